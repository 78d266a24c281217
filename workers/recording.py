"""After a step or a run: the skills' benchmarks.json windows are refreshed."""

from __future__ import annotations

import logging
from pathlib import Path

from shared.db.models import PipelineRun
from shared.db.session import transaction
from shared.vault import open_vault
from workers.benchfile import refresh
from workers.context import WorkerContext

log = logging.getLogger(__name__)


def refresh_skill_benchmarks(ctx: WorkerContext, vault_root: Path, skill_name: str) -> None:
    vault = open_vault(vault_root, ttl_s=ctx.settings.discovery_ttl_s)
    skill = vault.skills.get(skill_name)
    if skill is None:
        return
    try:
        with transaction(ctx.database_url) as session:
            refresh(session, skill, ctx.settings.home / "locks")
    except OSError as exc:  # a read-only vault copy must not fail the step
        log.warning("could not update %s/benchmarks.json: %s", skill_name, exc)


def refresh_benchmarks(ctx: WorkerContext, run_id: str, skills: set[str], *,
                       pipeline: bool) -> None:
    """Refresh the windows of ``skills`` (and of the run's own skill when ``pipeline``
    finished and it is an orchestrator) in the run's vault, or this worker's."""
    with transaction(ctx.database_url) as session:
        run = session.get(PipelineRun, run_id)
        if run is None:
            return
        names = set(skills)
        if pipeline and not run.plan.get("outputs_of"):
            names.add(run.skill)  # a leaf's own run is its step's record
        root = Path(run.vault)
    for name in sorted(names):
        refresh_skill_benchmarks(ctx, root if root.is_dir() else ctx.vault, name)
