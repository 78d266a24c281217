"""Making a skill folder read-only after publish, and writable again for editing.

Read-only is a guard against accidental edits, not the security boundary: the owner
can always chmod a file back. What makes a changed folder refuse to run is the hash
check (shared/published.py verify).
"""

from __future__ import annotations

import stat
from pathlib import Path

_WRITE = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH


def _chmod(path: Path, writable: bool) -> None:
    mode = stat.S_IMODE(path.lstat().st_mode)
    path.chmod(mode | stat.S_IWUSR if writable else mode & ~_WRITE)


def make_read_only(folder: Path, *, keep_root_writable: bool) -> None:
    """Clear every write bit under ``folder`` (symbolic links are left alone).

    ``keep_root_writable``: the folder itself keeps its owner's write bit, so a worker can
    still replace benchmarks.json (its run window; only its test cases are hashed) by an
    atomic rename; every file and sub-folder is read-only, and any file added beside them
    is a change the hash check names.
    """
    paths = sorted(folder.rglob("*"), key=lambda p: len(p.parts), reverse=True)
    for path in paths:  # deepest first: a folder loses its write bit after its contents
        if path.is_symlink() or (path.parent == folder and path.name == "benchmarks.json"):
            continue
        _chmod(path, writable=False)
    _chmod(folder, writable=keep_root_writable)


def make_writable(folder: Path) -> None:
    """Give the owner write access to ``folder`` and everything in it again."""
    _chmod(folder, writable=True)
    for path in sorted(folder.rglob("*"), key=lambda p: len(p.parts)):
        if not path.is_symlink():
            _chmod(path, writable=True)
