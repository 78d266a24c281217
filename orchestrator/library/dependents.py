"""Which skills refer to a skill: the check before it is deleted or disabled.

A skill refers to another through an orchestrator step (`skill: NAME` or `NAME@2`), an
entry of its sub-skills.json, or a `/NAME` mention in its instructions or description
(the chat-style slash token that tells a model those instructions are in play).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from shared.skill import Skill
from shared.vault import Vault


@dataclass(frozen=True)
class Reference:
    skill: str  # the referrer
    how: str

    def __str__(self) -> str:
        return f"{self.skill} ({self.how})"


def mention_pattern(name: str) -> re.Pattern[str]:
    """`/name` as a token of its own.

    Not when followed by a slug character (`/name-longer`, `/names` are other skills),
    and not inside a path or URL (`docs/name`, `example.com/name`): the lookbehind wants
    start of text, whitespace or punctuation other than a path or word character.
    """
    return re.compile(rf"(?<![\w/.\-:~]){re.escape('/' + name)}(?![A-Za-z0-9_\-])")


def mentions(text: str, name: str) -> bool:
    return mention_pattern(name).search(text) is not None


def references_in(skill: Skill, name: str) -> list[Reference]:
    found: list[Reference] = []
    for step in skill.manifest.steps or ():
        if step.skill_name == name:
            found.append(Reference(skill.name, f"step '{step.id}'"))
    if skill.sub_skills and name in skill.sub_skills.names:
        found.append(Reference(skill.name, "sub-skills.json"))
    pattern = mention_pattern(name)
    if pattern.search(skill.body):
        found.append(Reference(skill.name, f"mentions /{name} in its instructions"))
    elif pattern.search(skill.manifest.description):
        found.append(Reference(skill.name, f"mentions /{name} in its description"))
    return found


def find_dependents(vault: Vault, name: str) -> list[Reference]:
    """Every reference to ``name`` from another skill of the vault, by referrer name."""
    return [ref for other in sorted(vault.skills) if other != name
            for ref in references_in(vault.skills[other], name)]


def grouped(refs: list[Reference]) -> list[str]:
    """One entry per referrer: `nested (step 'first', sub-skills.json)`."""
    hows: dict[str, list[str]] = {}
    for ref in refs:
        hows.setdefault(ref.skill, []).append(ref.how)
    return [f"{skill} ({', '.join(how)})" for skill, how in hows.items()]
