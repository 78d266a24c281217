"""Moving a skill folder by rename, published (read-only) folders included.

Linux refuses to move a directory to another parent unless the directory itself is
writable (its `..` entry changes), and published skill folders are read-only. The
folder's own mode is widened for the rename only and restored at its new place.
"""

from __future__ import annotations

import contextlib
import stat
from pathlib import Path


def move_folder(source: Path, target: Path) -> None:
    """Rename ``source`` to ``target`` (same filesystem), whatever its write bit."""
    mode = stat.S_IMODE(source.lstat().st_mode)
    widened = source.is_dir() and not source.is_symlink() and not mode & stat.S_IWUSR
    if widened:
        source.chmod(mode | stat.S_IWUSR)
    try:
        source.rename(target)
    except BaseException:
        if widened:
            with contextlib.suppress(OSError):
                source.chmod(mode)
        raise
    if widened:
        target.chmod(mode)
