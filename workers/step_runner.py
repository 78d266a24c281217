"""Running one step message's attempts: claim them (claim.py), run each by its kind's
executor (executors/), record the results (step_records.py), and tell the planner which
runs to look at. Idempotent by attempt id: a delivery runs only what it claimed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from lifecycle.context import WorkerContext
from shared.states import StepState
from workers.attempt_end import STEP_MARKER
from workers.attempt_end_watch import watch_cancelled
from workers.attempt_skill import skill_for
from workers.claim import Answered, claim
from workers.executors.registry import executor_for
from workers.heartbeat import heartbeat
from workers.step_records import PlanIn, finish_batch
from workers.step_types import Claim, Result

__all__ = ["STEP_MARKER", "execute", "run_batch"]
FLUSH_S = 0.05  # a batch records its finished items at least this often


def execute(ctx: WorkerContext, job: Claim) -> Result:
    """Run one claimed attempt by its kind's executor."""
    skill = skill_for(ctx, job)
    if isinstance(skill, Result):
        return skill
    return executor_for(skill.manifest).run(ctx, job, skill)


def run_batch(ctx: WorkerContext, ids: Sequence[str], worker: str,
              on_due: Callable[[str], None], plan_in: PlanIn | None = None) -> list[Result]:
    """Claim, run and record one message's attempts; ``on_due(run_id)`` for each run the
    planner should look at, as soon as it is known (``plan_in``: how a lone attempt's run
    is planned with its record, see ``finish_batch``). The results of the attempts this
    delivery ran (none: another delivery owns them, or their run has ended)."""
    taken = claim(ctx, ids, worker, on_due, plan_in)
    if isinstance(taken, Answered):
        if taken.send is not None:
            taken.send()
        return [taken.result]
    jobs = taken.jobs
    states: list[Result] = []
    open_ids = {j.row_id for j in jobs}
    pending: list[tuple[Claim, Result]] = []

    def flush() -> None:
        for run_id in sorted(finish_batch(ctx, pending, plan_in)):
            on_due(run_id)
        for job, _ in pending:
            open_ids.discard(job.row_id)
        pending.clear()

    with heartbeat(ctx.database_url, open_ids, ctx.settings.heartbeat_s), \
            watch_cancelled(ctx.database_url, open_ids) as cancelled:
        flushed = time.monotonic()
        for job in jobs:
            if job.row_id in cancelled:  # its run was cancelled before it started
                open_ids.discard(job.row_id)
                continue
            try:
                result = execute(ctx, job)
            except Exception as exc:  # an executor bug still settles the step, with why
                result = Result(StepState.FAILED,
                                error=f"internal error: {type(exc).__name__}: {exc}",
                                error_kind="internal")
            if job.row_id in cancelled:  # stopped: the cancellation is its record
                open_ids.discard(job.row_id)
                continue
            pending.append((job, result))
            states.append(result)
            if time.monotonic() - flushed >= FLUSH_S:
                flush()
                flushed = time.monotonic()
        if pending:
            flush()
    return states
