"""This SKILLQ_HOME's daemon key: the Ed25519 key every task message it sends is signed with.

The private key is ``<home>/keys/daemon.key`` (PKCS#8 PEM, mode 0600, in a 0700 folder),
made on first use. It is written to a 0600 file of its own and linked into place, so two
processes starting together agree on one key and no reader ever sees half of one. A key
file that group or others could read is refused, naming the ``chmod`` fix.

The public key travels as one OpenSSH-style line, ``ssh-ed25519 AAAA... skillq:<daemon>``
(what `skillq daemons key` prints and `skillq daemons enroll` reads), and is named by its
fingerprint, ``SHA256:<base64>``: the same text ``ssh-keygen -lf`` prints for that line.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import secrets
import socket
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from shared.errors import DaemonKeyError, KeyRegistryError

KEY_DIR = "keys"
KEY_FILE = "daemon.key"
COMMENT_PREFIX = "skillq:"
_lock = threading.Lock()


def key_path(home: Path) -> Path:
    return home.expanduser() / KEY_DIR / KEY_FILE


def daemon_name(daemon: str | None) -> str:
    """The name a key is enrolled under: SKILLQ_DAEMON, else the host name (as workers
    announce themselves, workers/announce.py)."""
    return daemon or socket.gethostname()


def openssh_line(public: Ed25519PublicKey, comment: str | None = None) -> str:
    line = public.public_bytes(serialization.Encoding.OpenSSH,
                               serialization.PublicFormat.OpenSSH).decode("ascii")
    return f"{line} {comment}" if comment else line


def fingerprint(public: Ed25519PublicKey) -> str:
    """``SHA256:`` and the unpadded base64 of the SHA-256 of the key's SSH wire form."""
    blob = base64.b64decode(openssh_line(public).split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


@dataclass(frozen=True)
class DaemonKey:
    """A loaded private key, its public half and the fingerprint messages name it by."""

    private: Ed25519PrivateKey
    public: Ed25519PublicKey
    fingerprint: str
    path: Path

    @classmethod
    def of(cls, private: Ed25519PrivateKey, path: Path) -> DaemonKey:
        public = private.public_key()
        return cls(private, public, fingerprint(public), path)

    def public_text(self, daemon: str | None = None) -> str:
        return openssh_line(self.public, f"{COMMENT_PREFIX}{daemon}" if daemon else None)


def _check_private(path: Path, mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise DaemonKeyError(f"daemon key {path} is not a regular file")
    if mode & 0o077:
        raise DaemonKeyError(f"daemon key {path} is accessible to group/others (mode "
                             f"{stat.S_IMODE(mode):04o}); run `chmod 600 {path}`, or, if "
                             "others may have read it, revoke it (`skillq daemons revoke`) "
                             "and move it away so a new one is made")


def _read(path: Path) -> DaemonKey:
    with path.open("rb") as fh:
        _check_private(path, os.fstat(fh.fileno()).st_mode)
        raw = fh.read()
    try:
        private = serialization.load_pem_private_key(raw, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise DaemonKeyError(f"daemon key {path} cannot be read ({exc}); move it away and a "
                             "new one is made (and enrolled) at the next start") from None
    if not isinstance(private, Ed25519PrivateKey):
        raise DaemonKeyError(f"daemon key {path} is not an Ed25519 key")
    return DaemonKey.of(private, path)


def _create(path: Path) -> None:
    """Write a new key beside ``path`` (0600 from the first byte) and link it into place;
    a key another process linked first wins (FileExistsError)."""
    folder = path.parent
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if stat.S_IMODE(folder.stat().st_mode) & 0o077:
        folder.chmod(0o700)
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption())
    tmp = folder / f".{path.name}.{secrets.token_hex(8)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(pem)
            fh.flush()
            os.fsync(fh.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def load_or_create(home: Path) -> DaemonKey:
    """This home's daemon key, made now if it has none."""
    path = key_path(home)
    with _lock:
        try:
            return _read(path)
        except FileNotFoundError:
            pass
        try:
            _create(path)
        except OSError as exc:
            raise DaemonKeyError(f"cannot create the daemon key {path}: {exc.strerror}; "
                                 "SKILLQ_HOME must be writable by this account") from None
        return _read(path)


@dataclass(frozen=True)
class PublicKey:
    """A public key given to `skillq daemons enroll`."""

    key: Ed25519PublicKey
    fingerprint: str
    daemon: str | None  # from the line's ``skillq:<daemon>`` comment, if any

    @property
    def text(self) -> str:
        return openssh_line(self.key)


def parse_public(text: str) -> PublicKey:
    """An OpenSSH ``ssh-ed25519`` line (with an optional ``skillq:<daemon>`` comment) or a
    PEM public key."""
    text = text.strip()
    daemon = None
    # Typed as the widest of the two loaders' unions: each cryptography release may add
    # a key type to one of them, and only the Ed25519 check below matters here.
    key: object
    try:
        if text.startswith("-----BEGIN"):
            key = serialization.load_pem_public_key(text.encode())
        else:
            fields = text.split()
            if len(fields) < 2 or fields[0] != "ssh-ed25519":
                raise ValueError("not an ssh-ed25519 line")
            comment = " ".join(fields[2:])
            if comment.startswith(COMMENT_PREFIX):
                daemon = comment.removeprefix(COMMENT_PREFIX).strip() or None
            key = serialization.load_ssh_public_key(" ".join(fields[:2]).encode())
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise KeyRegistryError(f"not a daemon public key ({exc}); give the line "
                               "`skillq daemons key` prints on that machine, or a file "
                               "holding it") from None
    if not isinstance(key, Ed25519PublicKey):
        raise KeyRegistryError("not an Ed25519 public key: daemon keys are Ed25519")
    return PublicKey(key, fingerprint(key), daemon)

