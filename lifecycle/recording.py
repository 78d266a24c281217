"""After a step or a run: the skills' benchmarks.json windows are refreshed."""

from __future__ import annotations

import logging
from pathlib import Path

from sqlalchemy.orm import Session

from lifecycle.benchfile import refresh
from lifecycle.context import WorkerContext
from shared.db.models import PipelineRun
from shared.db.session import transaction
from shared.vault import open_skill, open_vault

log = logging.getLogger(__name__)


def refresh_skill_benchmarks(ctx: WorkerContext, vault_root: Path, skill_name: str,
                             session: Session | None = None) -> None:
    """Rewrite one skill's window; in ``session`` when given (it sees that transaction's
    own changes), else in a transaction of its own."""
    skill = open_skill(vault_root, skill_name) or open_vault(
        vault_root, ttl_s=ctx.settings.discovery_ttl_s).skills.get(skill_name)
    if skill is None:
        return
    try:
        if session is not None:
            refresh(session, skill, ctx.settings.home / "locks")
            return
        with transaction(ctx.database_url) as own:
            refresh(own, skill, ctx.settings.home / "locks")
    except OSError as exc:  # a read-only vault copy must not fail the step
        log.warning("could not update %s/benchmarks.json: %s", skill_name, exc)


def refresh_benchmarks(ctx: WorkerContext, session: Session, run: PipelineRun,
                       skills: set[str], *, pipeline: bool) -> None:
    """Refresh the windows of ``skills`` (and of the run's own skill when ``pipeline``
    finished and it is an orchestrator) in the run's vault, or this worker's.

    Called inside the planner's transaction before it commits, so that when a client
    sees the run finished, the files already show it.
    """
    names = set(skills)
    if pipeline and not run.plan.get("outputs_of"):
        names.add(run.skill)  # a leaf's own run is its step's record
    root = Path(run.vault)
    for name in sorted(names):
        # No savepoint: what fails here in the database fails the transaction anyway
        # (only a file's OSError is caught, and that leaves the transaction as it was).
        refresh_skill_benchmarks(ctx, root if root.is_dir() else ctx.vault, name, session)
