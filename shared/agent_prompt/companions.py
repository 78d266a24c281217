"""The files beside a skill's SKILL.md, as an agent step's prompt shows them.

Text the body refers to ("the schema is in analyze-prompt.md beside this file") is
inlined within a character budget, so the first turn can act without fetching it; the
top level comes first, then deeper folders, each whole or not at all. Everything else
is listed by relative path for the model to read when it needs it: files past the
budget, code (``scripts/``), binaries, links, and text that is not instructions (the
author's build notes in plan.md, licences).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from shared.folderhash import content_paths
from shared.skill import BENCHMARKS, SIDECAR, SUB_SKILLS, Skill

INLINE_SUFFIXES = frozenset({".md", ".markdown", ".txt", ".json"})
# The manifest and the run records: what skillq reads, not what the skill says to do.
_RECORDS = frozenset({SIDECAR, BENCHMARKS, SUB_SKILLS})
_LISTED_ONLY = re.compile(r"(plan\.md|(LICENSE|LICENCE|COPYING|NOTICE)(\.\w+)?)\Z", re.I)
_CODE_DIRS = frozenset({"scripts"})
_UTF8_MAX = 4  # bytes per character at most: a file of more bytes than 4x the room is
# over budget whatever it holds, and is not read


@dataclass(frozen=True, slots=True)
class Companions:
    inlined: tuple[tuple[str, str], ...]  # (relative path, text), in prompt order
    resources: tuple[str, ...]  # relative paths left for the model to read
    over_budget: tuple[str, ...] = ()  # text files listed only for want of room

    @property
    def size(self) -> int:
        """Characters the inlined files take in the prompt."""
        return sum(len(companion_block(rel, text)) for rel, text in self.inlined)


def skill_files(skill: Skill) -> list[str]:
    """Relative paths of the files a model may read: everything in the folder except
    SKILL.md, the sidecar and the run records, hidden files and tool caches."""
    found = []
    for rel, _ in content_paths(skill.folder, authored=True):
        parts = PurePosixPath(rel).parts
        if any(p.startswith(".") for p in parts):
            continue
        if len(parts) == 1 and (rel == skill.skill_md.name or rel in _RECORDS):
            continue
        found.append(rel)
    return found


def companions(skill: Skill, budget_chars: int) -> Companions:
    """The text companions that fit beside the body within ``budget_chars``, and every
    other file of the folder as a resource."""
    files = skill_files(skill)
    room = budget_chars - len(skill.body)
    inlined: list[tuple[str, str]] = []
    over: list[str] = []
    for rel in sorted((f for f in files if inlinable(f)), key=lambda r: (r.count("/"), r)):
        path = skill.folder / rel
        try:
            if path.is_symlink():  # it may point anywhere: named, never read
                continue
            if path.stat().st_size > max(room, 0) * _UTF8_MAX:
                over.append(rel)
                continue
        except OSError:
            continue
        text = read_text(path)
        if text is None:
            continue
        block = companion_block(rel, text)
        if len(block) > room:
            over.append(rel)
            continue
        inlined.append((rel, text))
        room -= len(block)
    shown = {rel for rel, _ in inlined}
    return Companions(tuple(inlined), tuple(f for f in files if f not in shown), tuple(over))


def companion_block(rel: str, text: str) -> str:
    return f'<skill_file path="{html.escape(rel)}">\n{text.strip()}\n</skill_file>'


def inlinable(rel: str) -> bool:
    path = PurePosixPath(rel)
    return path.suffix.lower() in INLINE_SUFFIXES and not _LISTED_ONLY.match(path.name) \
        and not (len(path.parts) > 1 and path.parts[0] in _CODE_DIRS)


def read_text(path: Path) -> str | None:
    """The file as UTF-8 text, or None for binary data or a file that cannot be read."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        return None
