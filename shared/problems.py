"""A validation problem: one line a user reads as `<path>: <field>: <message>`.

Validation never stops at the first problem; it collects every one it finds so a
user fixes a folder in one pass. Each problem names the file, the field inside it
(dotted, with list indexes: ``inputs[2].type``) and what to do about it.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Problem:
    path: str
    field: str
    message: str
    line: int | None = None

    def sort_key(self) -> tuple[str, int, str, str]:
        return (self.path, self.line or 0, self.field, self.message)

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.field}: {self.message}"


def display_path(path: Path) -> str:
    """A path relative to the working directory when it is below it, else as given."""
    try:
        return str(path.resolve().relative_to(_cwd(os.getcwd())))  # noqa: PTH109 (cache key)
    except ValueError:
        return str(path)


@functools.lru_cache(maxsize=8)
def _cwd(cwd: str) -> Path:
    # Resolving the working directory on every call was a fifth of a vault scan.
    return Path(cwd).resolve()
