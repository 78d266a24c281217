"""The run-time guard: a disabled skill does not run, alone or inside a pipeline."""

from __future__ import annotations

from orchestrator.library.repo import refuse_disabled
from shared.db.session import transaction
from shared.skill import Skill
from shared.vault import Vault


def refuse_disabled_run(database_url: str, vault: Vault, skill: Skill) -> None:
    """SkillDisabled when ``skill`` or a skill it calls (at any depth) is disabled.

    launch.start_run calls it before it records anything.
    """
    with transaction(database_url) as session:
        refuse_disabled(session, vault, skill)
