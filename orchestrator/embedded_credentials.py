"""The embedded servers' passwords, and a SKILLQ_HOME no other account may look into.

Without them any local process could reach the embedded Redis (no password) and connect
to the embedded PostgreSQL as its superuser (trust auth). Each SKILLQ_HOME gets its own
pair of random passwords, kept in credentials.json (mode 0600 from its first byte); the
URLs resolve_endpoints returns carry them, and nothing prints them unmasked.

A home made before credentials existed (trust, no password) is given them on its next
start (orchestrator/embedded.py does the servers' side); the helpers for that live here.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import socket
import stat
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from shared.atomic import write_json
from shared.errors import ConfigError

log = logging.getLogger(__name__)

CREDENTIALS = "credentials.json"
PG_DATA = "postgres/data"
PG_ROLE, PG_DATABASE = "postgres", "skillq"
HBA = "pg_hba.conf"
NO_PASSFILE = "/nonexistent/skillq-no-pgpass"  # libpq skips a missing one without a word
# No "trust" line anywhere: with it any local process connects as the superuser. The
# server listens on loopback TCP only (no Unix socket), the local line is a safeguard.
SCRAM_HBA = """\
# Written by skillq (orchestrator/embedded_credentials.py): password logins only.
local   all           all                  scram-sha-256
host    all           all    127.0.0.1/32  scram-sha-256
host    all           all    ::1/128       scram-sha-256
host    replication   all    127.0.0.1/32  scram-sha-256
host    replication   all    ::1/128       scram-sha-256
"""


@dataclass(frozen=True, slots=True, repr=False)
class Credentials:
    redis: str
    postgres: str

    def __repr__(self) -> str:  # a stray print or log line shows no password
        return "Credentials(redis='***', postgres='***')"


def credentials_file(home: Path) -> Path:
    return home / CREDENTIALS


def read_credentials(home: Path) -> Credentials | None:
    """The passwords of home's embedded servers; None before any was made. ConfigError
    when the file is unsafe or damaged (naming it and the fix)."""
    path = credentials_file(home)
    try:
        mode = path.stat().st_mode
        if mode & 0o077:
            raise ConfigError(f"{path} is readable by group/others (mode "
                              f"{stat.S_IMODE(mode):04o}): it holds the embedded servers' "
                              f"passwords; run `chmod 600 {path}`")
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path} ({exc.__class__.__name__}): restore it from "
                          "a backup; it holds the embedded servers' passwords") from None
    found = {k: data.get(k) for k in ("redis", "postgres")} if isinstance(data, dict) else {}
    if not all(isinstance(v, str) and v for v in found.values()) or not found:
        raise ConfigError(f"{path} lacks a redis or postgres password: restore it from a "
                          "backup; it holds the embedded servers' passwords")
    return Credentials(redis=str(found["redis"]), postgres=str(found["postgres"]))


def create_credentials(home: Path) -> Credentials:
    """New random passwords, written before any server is given them: a crash in between
    leaves a password on file that the next start applies, never one lost."""
    made = Credentials(redis=secrets.token_urlsafe(32), postgres=secrets.token_urlsafe(32))
    # private: mode 0600 from the first byte, kept by the rename
    write_json(credentials_file(home), {"redis": made.redis, "postgres": made.postgres},
               private=True)
    return made


def redis_url(port: int, creds: Credentials) -> str:
    return f"redis://:{quote(creds.redis, safe='')}@127.0.0.1:{port}/0"


def postgres_url(port: int, creds: Credentials) -> str:
    return (f"postgresql+psycopg://{PG_ROLE}:{quote(creds.postgres, safe='')}"
            f"@127.0.0.1:{port}/{PG_DATABASE}")


# -- the home directory ------------------------------------------------------------------

def private_home(home: Path) -> None:
    """home, owner-only: created 0700, an existing one stripped of group/other bits (as
    ssh wants ~/.ssh). The one bit kept is group search (no listing) for the account the
    embedded PostgreSQL runs as, given by grant_group_search: it must reach its data."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = home.stat()
    allowed = 0o010 if _search_group(home) == st.st_gid else 0
    loose = stat.S_IMODE(st.st_mode) & 0o077 & ~allowed
    if not loose:
        return
    try:
        home.chmod(stat.S_IMODE(st.st_mode) & ~loose)
    except OSError as exc:
        raise ConfigError(f"{home} is open to group/others (mode "
                          f"{stat.S_IMODE(st.st_mode):04o}) and cannot be tightened "
                          f"({exc.strerror}): run `chmod 700 {home}`") from None
    log.warning("%s was open to group/others (mode %04o): tightened to %04o, as it holds "
                "queued work, logs and passwords", home, stat.S_IMODE(st.st_mode),
                stat.S_IMODE(st.st_mode) & ~loose)


def grant_group_search(home: Path, gid: int) -> None:
    """Let PostgreSQL's own account (group gid) through home to its data, and nobody else:
    group gid, mode 0710. As root only (it owns home, the account does not)."""
    st = home.stat()
    if st.st_gid != gid:
        os.chown(home, -1, gid)
    if stat.S_IMODE(st.st_mode) != 0o710:
        home.chmod(0o710)


def _search_group(home: Path) -> int | None:
    """The group of the account that owns home's PostgreSQL data, when it is not us.

    Read from the data's parent: a start chowns it before it grants the search, and
    initdb makes the data only after, so a second caller in between must see the grant
    as meant (it used to strip it, and the first start's initdb failed)."""
    try:
        st = (home / PG_DATA).parent.stat()
    except OSError:
        return None
    return st.st_gid if st.st_uid != os.geteuid() else None


# -- PostgreSQL: the initdb password file, and a home from before credentials -------------

@contextlib.contextmanager
def pwfile(directory: Path, password: str, account: tuple[int, int] | None
           ) -> Iterator[Path]:
    """initdb's --pwfile: 0600 from its creation, the PostgreSQL account's, then gone."""
    fd, name = tempfile.mkstemp(prefix=".pwfile.", dir=directory)
    path = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(password + "\n")
            if account:
                os.fchown(fh.fileno(), *account)
        yield path
    finally:
        path.unlink(missing_ok=True)


def hba_trusts(data: Path) -> bool:
    """pg_hba.conf lets someone in without a password (a home made before credentials)."""
    try:
        lines = (data / HBA).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return False
    return any("trust" in line.partition("#")[0].split() for line in lines)


def write_scram_hba(data: Path) -> None:
    """Replace pg_hba.conf with SCRAM_HBA, its owner and mode kept (PostgreSQL's account
    must read it), chowned before the rename so no moment shows PostgreSQL a file it
    cannot read."""
    path = data / HBA
    st = path.stat()
    fd, tmp = tempfile.mkstemp(prefix=f".{HBA}.", dir=data)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(SCRAM_HBA)
            fh.flush()
            os.fsync(fh.fileno())
            if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
                os.fchown(fh.fileno(), st.st_uid, st.st_gid)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def set_pg_password(port: int, password: str) -> None:
    """Give PG_ROLE its password over a trust connection. The SCRAM verifier is computed
    here (libpq's PQencryptPasswordConn): the server, and any log line it writes about
    the statement, never sees the password itself."""
    import psycopg  # here: the broker-only paths never pay for it
    from psycopg import sql

    with psycopg.connect(host="127.0.0.1", port=port, user=PG_ROLE, password=password,
                         dbname="postgres", connect_timeout=5, autocommit=True) as conn:
        verifier = conn.pgconn.encrypt_password(password.encode(), PG_ROLE.encode(),
                                                b"scram-sha-256").decode()
        conn.execute(sql.SQL("alter role {} password {}").format(
            sql.Identifier(PG_ROLE), sql.Literal(verifier)))


def pg_reload(port: int, password: str) -> None:
    import psycopg

    with psycopg.connect(host="127.0.0.1", port=port, user=PG_ROLE, password=password,
                         dbname="postgres", connect_timeout=5, autocommit=True) as conn:
        conn.execute("select pg_reload_conf()")


def pg_lets_in_without_password(port: int) -> bool:
    """A login with no password gets in: the trust rules are still loaded."""
    import psycopg

    try:  # no passfile either: a ~/.pgpass holding the password would let it in
        with psycopg.connect(host="127.0.0.1", port=port, user=PG_ROLE, password="",
                             passfile=NO_PASSFILE, dbname="postgres", connect_timeout=2):
            return True
    except psycopg.OperationalError:
        return False


# -- Redis -------------------------------------------------------------------------------

RedisAuth = Literal["ready", "busy", "no-password", "wrong-password"]


def redis_auth_ping(port: int, password: str) -> RedisAuth:
    """AUTH then PING. "busy": no answer yet, or still loading its append-only file;
    "no-password": a server started before credentials existed (it answers PING
    without AUTH, and AUTH is an error)."""
    try:
        auth, ping = redis_call(port, ["AUTH", password], ["PING"])
    except (OSError, ValueError):
        return "busy"
    if auth.startswith((b"-WRONGPASS", b"-ERR invalid password")):
        return "wrong-password"
    if not ping.startswith(b"+PONG"):
        return "busy"
    return "ready" if auth.startswith(b"+OK") else "no-password"


def redis_set_password(port: int, password: str) -> bool:
    """CONFIG SET requirepass on a server that has none; False when it refuses."""
    (reply,) = redis_call(port, ["CONFIG", "SET", "requirepass", password])
    return reply.startswith(b"+OK")


def redis_call(port: int, *commands: Sequence[str]) -> list[bytes]:
    """The one-line replies to commands sent in one go. RESP arrays, not inline commands:
    an argument is sent as it is, whatever characters it holds."""
    payload = b"".join(
        f"*{len(cmd)}\r\n".encode() + b"".join(
            b"$%d\r\n%s\r\n" % (len(arg.encode()), arg.encode()) for arg in cmd)
        for cmd in commands)
    buf = b""
    with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
        sock.sendall(payload)
        while buf.count(b"\r\n") < len(commands):
            chunk = sock.recv(4096)
            if not chunk:
                raise ValueError("connection closed before every reply")
            buf += chunk
    return buf.split(b"\r\n")[:len(commands)]
