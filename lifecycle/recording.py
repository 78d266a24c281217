"""After a step or a run: the skills' benchmarks.json windows are refreshed.

The planner says which windows are due (``files_due``) in the transaction that settled
them; they are rewritten once it has committed (``write_files``, from ``send_outcome``),
so no run waits on a file before its client hears of its end. A run's waiting client
still returns only once its files are written: ``write_files`` NOTIFYs FILES_DONE_CHANNEL
with the run id when that run has ended (orchestrator/launch.py ``wait_run``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.orm import Session

from lifecycle.benchfile import refresh
from lifecycle.context import WorkerContext
from shared.db import deferred
from shared.db.models import PipelineRun
from shared.db.outage import first_line, is_outage
from shared.db.session import transaction
from shared.plan import Plan
from shared.vault import open_skill, open_vault

log = logging.getLogger(__name__)
FILES_DONE_CHANNEL = "skillq_files_done"  # NOTIFY payload: the run id, its files written


@dataclass(frozen=True, slots=True)
class FilesDue:
    """benchmarks.json windows to rewrite once the transaction that settled them commits."""
    run_id: str
    vault: Path  # the run's vault, or this process's when that one is not on this machine
    skills: tuple[str, ...]
    run_ended: bool  # its waiting client is told when they are written


def files_due(ctx: WorkerContext, run: PipelineRun, skills: set[str], *,
              pipeline: bool) -> FilesDue:
    """The windows of ``skills`` (and of the run's own skill when ``pipeline`` finished
    and it is an orchestrator: a leaf's own run is its step's record) in the run's
    vault, or this worker's."""
    names = set(skills)
    if pipeline and not run.plan.get("outputs_of"):
        names.add(run.skill)
    root = Path(run.vault)
    return FilesDue(run.id, root if root.is_dir() else ctx.vault, tuple(sorted(names)),
                    run_ended=pipeline)


def ended_run_files(ctx: WorkerContext, run: PipelineRun) -> FilesDue:
    """Every window an ended run may have settled: its steps' skills and its own."""
    steps = {s.skill for s in Plan.model_validate(run.plan).steps}
    return files_due(ctx, run, steps, pipeline=True)


def write_files(ctx: WorkerContext, due: FilesDue) -> None:
    """Rewrite the due windows from what has been committed, in a transaction of their
    own, and NOTIFY FILES_DONE_CHANNEL at its commit when the run has ended.

    Each file is read from the database and written under its lock (benchfile.refresh),
    so of two writers the later one writes what the database holds. Never raises: the
    run's record is committed already, and a window missed now is rebuilt whole at the
    skill's next settled step."""
    try:
        with transaction(ctx.database_url) as session:
            for name in due.skills:
                refresh_skill_benchmarks(ctx, due.vault, name, session)
            if due.run_ended:
                deferred.notify(session, FILES_DONE_CHANNEL, due.run_id)
    except Exception as exc:  # what was committed and sent stands either way
        if not is_outage(exc):
            log.exception("run %s: could not update benchmarks.json of %s", due.run_id,
                          ", ".join(due.skills))
            return
        # One line, no traceback: a `skillq run` that writes them itself shows this.
        log.warning("run %s: benchmarks.json of %s not updated, the database is "
                    "unreachable (%s); the next settled step rewrites them", due.run_id,
                    ", ".join(due.skills), first_line(exc))


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
