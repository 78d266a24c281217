"""Writing a new ``version:`` into a skill's manifest text, leaving every other byte alone.

The version lives where the skill's form keeps its execution fields: SKILL.md's
frontmatter (bot0 form) or skill.yaml (Agent Skills form). A plain Agent Skills folder
has no execution fields; it gets a skill.yaml holding just the version, so its SKILL.md
stays valid for any Agent Skills client.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from shared.skill import SIDECAR, Skill, SkillForm

_VERSION_LINE = re.compile(r"^(version[ \t]*:[ \t]*)([^#\r\n]*?)([ \t]*(#.*)?)$")
_BOM = "\ufeff"


class VersionLineError(ValueError):
    """The manifest text has no line skillq can rewrite (the message says which file)."""


@dataclass(frozen=True)
class VersionEdit:
    path: Path
    text: str  # the file's whole new text
    created: bool  # the file did not exist before


def _newline(lines: list[str]) -> str:
    return "\r\n" if lines and lines[0].endswith("\r\n") else "\n"


def _replace(lines: list[str], start: int, stop: int, version: int) -> bool:
    """Rewrite the top-level ``version:`` line among lines[start:stop]; False if none."""
    for i in range(start, stop):
        body = lines[i].rstrip("\r\n")
        match = _VERSION_LINE.match(body)
        if match:
            lines[i] = (match[1] + str(version) + match[3]) + lines[i][len(body):]
            return True
    return False


def skill_md_with_version(text: str, version: int, where: str = "SKILL.md") -> str:
    """SKILL.md text with its frontmatter's version set (added before the closing
    ``---`` when absent)."""
    bom = _BOM if text.startswith(_BOM) else ""
    lines = text.removeprefix(_BOM).splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        raise VersionLineError(f"{where}: no frontmatter to write the version into")
    close = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if close is None:
        raise VersionLineError(f"{where}: the frontmatter is not closed by a '---' line")
    if not _replace(lines, 1, close, version):
        lines.insert(close, f"version: {version}{_newline(lines)}")
    return bom + "".join(lines)


def yaml_with_version(text: str, version: int) -> str:
    """skill.yaml text with its top-level version set (appended when absent)."""
    bom = _BOM if text.startswith(_BOM) else ""
    lines = text.removeprefix(_BOM).splitlines(keepends=True)
    if not _replace(lines, 0, len(lines), version):
        newline = _newline(lines)
        if lines and not lines[-1].endswith(("\n", "\r")):
            lines[-1] += newline
        lines.append(f"version: {version}{newline}")
    return bom + "".join(lines)


def version_edit(skill: Skill, version: int) -> VersionEdit:
    """The one file to write so ``skill`` declares ``version``."""
    if skill.form == SkillForm.BOT0:
        text = skill.skill_md.read_bytes().decode("utf-8")  # keeps CRLF line ends
        return VersionEdit(skill.skill_md, skill_md_with_version(
            text, version, str(skill.skill_md)), created=False)
    sidecar = skill.folder / SIDECAR
    if skill.form == SkillForm.AGENTSKILLS:
        return VersionEdit(sidecar, yaml_with_version(
            sidecar.read_bytes().decode("utf-8"), version), created=False)
    return VersionEdit(sidecar, f"version: {version}\n", created=True)
