"""Writing files so a crash never leaves half of one: write beside it, then rename.

Modes are what a plain ``open(path, "w")`` would give: a new file gets ``0666 & ~umask``
(0644 under the usual umask 022) and a file written over keeps its mode. Two cases are
owner-only (0600) from the first byte: ``private=True`` (secrets, passwords), and any
file in a folder others may not list (no o+r, as SKILLQ_HOME and mkdtemp folders), so
what is written there (credentials, server state) is never readable on the way, and a
file an older skillq or a tool left wider there is narrowed.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

PRIVATE_MODE = 0o600
_TRIES = 100

# The name of a write in flight (fnmatch): what copies a folder another process may be
# rewriting a file of skips, since the file is renamed away at any moment.
TEMP_PATTERN = ".*.????????.tmp"


def write_text(path: Path, text: str, *, durable: bool = True, private: bool = False) -> None:
    """``durable=False`` skips the fsync, for files rebuilt from the database anyway:
    the rename still means no reader ever sees half of one. ``private=True``: mode 0600
    whatever the file had."""
    fd, tmp = _create_beside(path, _mode_for(path, private))
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json(path: Path, data: Any, *, durable: bool = True, private: bool = False) -> None:
    write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n", durable=durable,
               private=private)


def _mode_for(path: Path, private: bool) -> int | None:
    """The exact mode to set, or None for the umask's default (0666 & ~umask)."""
    if private or not path.parent.stat().st_mode & stat.S_IROTH:
        return PRIVATE_MODE  # a private folder's files are private, even ones made wider
    try:
        return stat.S_IMODE(path.stat().st_mode)  # written over: keep what it had
    except FileNotFoundError:
        return None


def _create_beside(path: Path, mode: int | None) -> tuple[int, Path]:
    """A new temporary file next to ``path``: its descriptor and path.

    Not mkstemp: it always creates 0600, and the rename would keep that.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(_TRIES):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")  # TEMP_PATTERN
        try:
            fd = os.open(tmp, flags, PRIVATE_MODE if mode is not None else 0o666)
        except FileExistsError:
            continue
        if mode is not None and mode != PRIVATE_MODE:
            try:  # the umask applied at creation would narrow a kept mode such as 0664
                os.fchmod(fd, mode)
            except BaseException:
                os.close(fd)
                tmp.unlink(missing_ok=True)
                raise
        return fd, tmp
    raise FileExistsError(f"no free temporary name beside {path}")
