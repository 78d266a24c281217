"""Where a field lives: which file and line hold it, and how a user names it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from shared.problems import Problem, display_path
from shared.yamlload import Loc, Parsed


def field_name(loc: Loc) -> str:
    """('steps', 2, 'with', 'url') -> 'steps[2].with.url'."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(file)"


@dataclass
class Locator:
    """Turns a field location into a Problem naming the right file and line.

    In the Agent Skills form a skill is two files (SKILL.md and skill.yaml); a field's
    top-level key says which one holds it.
    """

    default: Path
    sources: dict[str, tuple[Path, Parsed]] = field(default_factory=dict)

    def add(self, path: Path, parsed: Parsed) -> None:
        for key in parsed.data:
            self.sources[key] = (path, parsed)

    def problem(self, loc: Loc, message: str) -> Problem:
        key = loc[0] if loc else None
        path, parsed = self.sources.get(str(key), (self.default, None))
        line = parsed.line(loc) if parsed is not None else None
        return Problem(display_path(path), field_name(loc), message, line)
