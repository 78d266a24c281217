"""A validation problem: one line a user reads as `<path>: <field>: <message>`.

Validation never stops at the first problem; it collects every one it finds so a
user fixes a folder in one pass. Each problem names the file, the field inside it
(dotted, with list indexes: ``inputs[2].type``) and what to do about it; for a name
that is not known, `did_you_mean` offers the one meant, only when the miss is near.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
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


# The folder paths are shown from when it is not this process's working directory: the
# local API (orchestrator/api/) checks a run for a `skillq run` started elsewhere, and its
# messages must read as that command's own would.
_shown_from: ContextVar[str | None] = ContextVar("shown_from", default=None)


def display_base() -> str:
    """The folder display_path shows paths relative to (a cache key, too)."""
    return _shown_from.get() or os.getcwd()  # noqa: PTH109 (a string key)


@contextlib.contextmanager
def shown_from(folder: str) -> Iterator[None]:
    """display_path relative to ``folder`` (an absolute path) in this context only."""
    token = _shown_from.set(folder)
    try:
        yield
    finally:
        _shown_from.reset(token)


def display_path(path: Path) -> str:
    """A path relative to the working directory when it is below it, else as given."""
    base = display_base()
    full = path
    if not path.is_absolute() and _shown_from.get() is not None:
        full = Path(base) / path  # relative to the caller's folder, not this process's
    try:
        return str(full.resolve().relative_to(_cwd(base)))
    except ValueError:
        return str(path)


@functools.lru_cache(maxsize=8)
def _cwd(cwd: str) -> Path:
    # Resolving the working directory on every call was a fifth of a vault scan.
    return Path(cwd).resolve()


def edit_distance(a: str, b: str) -> int:
    """Optimal string alignment distance: insertions, deletions, substitutions and swaps of
    two neighbours (the commonest typo, 'inptus') each count one."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            cost = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, previous2[j - 2] + 1)
            current.append(cost)
        previous2, previous = previous, current
    return previous[-1]


def did_you_mean(word: str, known: Iterable[str]) -> str | None:
    """The known name ``word`` is a plausible typo of, or None.

    Plausible means fewer than one edit per three letters: 'timout', 'lable' and 'inptus'
    are near misses, while 'author' is two edits from 'auth' in six letters, a different
    word that merely shares a prefix (difflib's ratio calls it 0.8, a match).
    """
    best: tuple[int, str] | None = None
    for name in sorted(set(known)):
        if name == word:
            continue
        distance = edit_distance(word.lower(), name.lower())
        if distance * 3 < max(len(word), len(name)) and (best is None or distance < best[0]):
            best = (distance, name)
    return best[1] if best else None
