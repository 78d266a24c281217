"""The skill an attempt runs: a built-in one, else the vault's, as published at the
version the run wants (workers/published.py verifies or rebuilds it), or the failure
that says why there is none."""

from __future__ import annotations

from lifecycle.context import WorkerContext
from shared.builtin import builtin_skill
from shared.skill import Skill
from shared.states import StepState
from shared.vault import open_skill, open_vault
from workers import published
from workers.step_types import Claim, Result


def skill_for(ctx: WorkerContext, job: Claim) -> Skill | Result:
    """The skill the attempt runs, or the failure that says why there is none."""
    skill = builtin_skill(job.skill) or open_skill(job.vault, job.skill) or open_vault(
        job.vault, ttl_s=ctx.settings.discovery_ttl_s).skills.get(job.skill)
    if skill is None:
        return Result(StepState.FAILED, error=f"skill '{job.skill}' is not in this worker's "
                      f"vault {job.vault}", error_kind="missing_skill")
    # The published files, verified, or the version the run wants rebuilt from the store
    # (so what runs is always job.version, or the step fails here).
    try:
        return published.skill_for_step(ctx, job, skill)
    except published.REFUSED as exc:
        return Result(StepState.FAILED, error=str(exc), error_kind=exc.error_kind)
