"""The progressive-disclosure listing of skills: what a model sees before it loads one.

Two renderings of the same entries, both an ``<available_skills>`` block:
  - `skillq catalog --format xml` prints what the reference client prints,
    `agentskills to-prompt` (skills-ref 0.1.1), byte for byte, so a client built on
    either gets the same prompt; tests/unit/test_catalog_compat.py holds it to that;
  - an agent step puts the Agent Skills client guide's indented form in its system prompt,
    one line per element and no location (skills arrive through a tool there).
Either way a description is trimmed as the reference trims it, so a YAML block scalar's
final newline never reaches a prompt.
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
    return f"{entry.name.strip()}: {one_line(entry.description)}"


def skill_xml(entry: CatalogEntry) -> str:
    """One ``<skill>`` element of the agent's block, indented as the guide writes it."""
    lines = ["  <skill>", f"    <name>{html.escape(entry.name.strip())}</name>",
             f"    <description>{html.escape(entry.description.strip())}</description>"]
    if entry.location is not None:
        lines.append(f"    <location>{html.escape(entry.location)}</location>")
    lines.append("  </skill>")
    return "\n".join(lines)


def catalog_xml(entries: Iterable[CatalogEntry]) -> str:
    """The agent's ``<available_skills>`` block (an empty block when there are none: a
    caller that offers no skills should leave the block out altogether)."""
    return "\n".join(["<available_skills>", *map(skill_xml, entries), "</available_skills>"])


def to_prompt(entries: Iterable[CatalogEntry]) -> str:
    """The block exactly as `agentskills to-prompt` prints it, without the final newline.

    Every value sits on a line of its own, unindented. The location is printed as is,
    unescaped, as the reference does; paths holding '&' or '<' are rare enough that
    matching the reference is worth more than a strictly well-formed block.
    """
    lines = ["<available_skills>"]
    for entry in entries:
        lines += ["<skill>", "<name>", html.escape(entry.name.strip()), "</name>",
                  "<description>", html.escape(entry.description.strip()), "</description>"]
        if entry.location is not None:
            lines += ["<location>", entry.location, "</location>"]
        lines.append("</skill>")
    lines.append("</available_skills>")
    return "\n".join(lines)
