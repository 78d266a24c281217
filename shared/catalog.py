"""The progressive-disclosure listing of skills: what a model sees before it loads one.

`skillq catalog` prints it for people and other Agent Skills clients; an agent step puts
it in its system prompt. One shape for both, the Agent Skills client guide's
``<available_skills>`` block, so a skill's entry reads the same wherever it appears.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    name: str
    description: str
    # The SKILL.md path, for clients that activate a skill by reading the file; None when
    # the skill arrives through a tool (an agent step: daemons share no filesystem).
    location: str | None = None


def one_line(text: str) -> str:
    return " ".join(text.split())


def catalog_line(entry: CatalogEntry) -> str:
    """``name: description`` on one line (the text form)."""
    return f"{entry.name}: {one_line(entry.description)}"


def skill_xml(entry: CatalogEntry) -> str:
    """One ``<skill>`` element of the block, indented as the guide writes it."""
    lines = ["  <skill>", f"    <name>{html.escape(entry.name)}</name>",
             f"    <description>{html.escape(entry.description)}</description>"]
    if entry.location is not None:
        lines.append(f"    <location>{html.escape(entry.location)}</location>")
    lines.append("  </skill>")
    return "\n".join(lines)


def catalog_xml(entries: Iterable[CatalogEntry]) -> str:
    """The ``<available_skills>`` block (an empty block when there are none: a caller
    that offers no skills should leave the block out altogether)."""
    return "\n".join(["<available_skills>", *map(skill_xml, entries), "</available_skills>"])
