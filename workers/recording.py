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


def refresh_run_benchmarks(ctx: WorkerContext, run_id: str) -> None:
    with transaction(ctx.database_url) as session:
        run = session.get(PipelineRun, run_id)
        if run is None or run.plan.get("outputs_of"):
            return  # a leaf's own run is recorded with its step
        name, root = run.skill, Path(run.vault)
    refresh_skill_benchmarks(ctx, root if root.is_dir() else ctx.vault, name)
