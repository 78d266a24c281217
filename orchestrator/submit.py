"""The check a run must pass before anything is recorded: it and its callees validate."""

from __future__ import annotations

from orchestrator.drawing import edges
from shared.errors import ValidationFailed
from shared.skill import Skill
from shared.vault import Vault


def checked(vault: Vault, skill: Skill) -> None:
    """A skill runs only when it and everything it calls validate."""
    names = {skill.name} | {callee for _, _, callee in edges(vault, skill.name)}
    problems = [p for name in sorted(names) if name in vault.skills
                for p in vault.problems_in(vault.skills[name].folder)]
    if problems:
        raise ValidationFailed(problems)
