"""Recording finished step attempts, and planning their runs in the same transaction where
one commit can do for two (workers/claim.py claims them, workers/step_runner.py runs them).

A finished result is kept in this process until it can be recorded: a database outage
delays the record, it never throws the work away.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TypeVar

from sqlalchemy.orm import Session

from lifecycle import transitions
from lifecycle.context import WorkerContext
from lifecycle.planner import lock_run
from lifecycle.policy import CacheWrite
from lifecycle.step_counts import open_items
from shared import cache
from shared.db import skill_stats
from shared.db.models import PipelineRun
from shared.db.outage import is_outage, through_outage
from shared.db.session import transaction
from shared.skillfiles import RunSource
from shared.states import StepState
from shared.store import pack
from workers.failure_notes import note_failures
from workers.step_types import Claim, NestedRunStarted, Result, WaitingOn

T = TypeVar("T")
log = logging.getLogger(__name__)


def finish(ctx: WorkerContext, job: Claim, result: Result) -> bool:
    """Record one attempt; True when the planner should look at the run now."""
    return bool(finish_batch(ctx, [(job, result)]))


# Plans a run, its row locked (lifecycle.planner.lock_run), in the caller's transaction
# (lifecycle.tasks.advance_in); what it returns sends the outcome, once that transaction
# has committed.
PlanIn = Callable[[Session, PipelineRun], Callable[[], None]]


def finish_batch(ctx: WorkerContext, done: Sequence[tuple[Claim, Result]],
                 plan_in: PlanIn | None = None) -> set[str]:
    """Record finished attempts in one transaction; the runs the planner should look at.

    A run is due when one of its attempts did not succeed, or when a step has no open
    item left. Open items are counted after the commit, so whichever of two items
    finishing together commits last sees zero.

    With ``plan_in``, a lone attempt that needs no count (one item of a step without a
    fan-out, or one that did not succeed) has its run planned in the transaction that
    records it, and the outcome sent after its commit: one commit, not two, between a
    step's end and its run's (the run is then not returned as due).
    """
    run_id = _plans_with_record(done) if plan_in is not None else None
    if run_id is not None and plan_in is not None:
        try:
            due, send = outlasting(ctx, lambda: _record_and_plan(ctx, done, run_id, plan_in),
                                    "recording a step")
        except Exception as exc:
            if is_outage(exc):
                raise
            # The whole transaction rolled back: record alone, and plan as before.
            log.exception("planning run %s with its step's record failed; recording first",
                          run_id)
        else:
            if send is not None:
                send()
            return due
    # A finished result is kept (in this process) until it can be recorded: a database
    # outage delays the record, it never throws the work away.
    due, steps = outlasting(ctx, lambda: _record(ctx, done), "recording a step")
    if steps - {(r, s) for r, s in steps if r in due}:
        due |= outlasting(ctx, lambda: _settled_runs(ctx, steps, due), "recording a step")
    return due


def _plans_with_record(done: Sequence[tuple[Claim, Result]]) -> str | None:
    """The run of a lone attempt whose record alone makes its run due, if that is what
    ``done`` is: not an item of a fan-out that succeeded (due only when the step's last
    item is, counted after the commit), not a step now waiting for runs it started."""
    if len(done) != 1:
        return None
    job, result = done[0]
    if result.state in (StepState.RUNNING, StepState.WAITING) or (
            job.fans_out and result.state == StepState.SUCCEEDED):
        return None
    return job.run_id


def _record_and_plan(ctx: WorkerContext, done: Sequence[tuple[Claim, Result]], run_id: str,
                     plan_in: PlanIn) -> tuple[set[str], Callable[[], None] | None]:
    with transaction(ctx.database_url) as session:
        # The run's row first, as the planner and a cancel take it before its attempts'
        # rows: a cancel holding the run never waits for a row this transaction holds.
        run = lock_run(session, run_id)
        due, _ = record_in(session, ctx, done)
        if run is None or run_id not in due:  # not recorded (lost or cancelled meanwhile)
            return due, None
        return due - {run_id}, plan_in(session, run)


def _settled_runs(ctx: WorkerContext, steps: set[tuple[str, str]], due: set[str]) -> set[str]:
    with transaction(ctx.database_url) as session:
        return {run for run, step in steps
                if run not in due and not open_items(session, run, step)}


def _record(ctx: WorkerContext, done: Sequence[tuple[Claim, Result]]
            ) -> tuple[set[str], set[tuple[str, str]]]:
    with transaction(ctx.database_url) as session:
        return record_in(session, ctx, done)


def record_in(session: Session, ctx: WorkerContext, done: Sequence[tuple[Claim, Result]],
              *, claimed_at: datetime | None = None) -> tuple[set[str], set[tuple[str, str]]]:
    """Record finished attempts in the caller's transaction: the runs due for planning,
    and the fan-out steps whose open items are to be counted after the commit.
    ``claimed_at``: the attempts were claimed in this very transaction, then (their
    finishes go with the COMMIT: transitions.finish_held)."""
    due: set[str] = set()
    steps: set[tuple[str, str]] = set()
    totals: dict[str, skill_stats.Totals] = {}
    now = datetime.now(UTC)
    for job, result in done:
        if result.state == StepState.RUNNING:  # a nested run settles this step later
            assert isinstance(result.then, NestedRunStarted)
            due.add(result.then.run_id)  # its first advance
            continue
        outputs = pack(session, result.outputs, ctx.settings.inline_output_bytes) \
            if result.outputs is not None else None
        values = {
            "id": job.row_id, "state": result.state.value, "outputs": outputs,
            "error": result.error, "error_kind": result.error_kind,
            "cache_hit": result.cache_hit, "exit_code": result.exit_code,
            "stdout_tail": result.stdout_tail, "stderr_tail": result.stderr_tail,
            "now": now, "duration_ms": result.duration_ms,
            "not_before": result.not_before, "cost_usd": result.cost_usd,
            "tokens_in": result.tokens_in, "tokens_out": result.tokens_out,
            "lock_wait_ms": result.screen.wait_ms if result.screen else None,
            "locked_at": result.screen.locked_at if result.screen else None,
            "unlocked_at": result.screen.unlocked_at if result.screen else None}
        mine = transitions.finish_attempt(session, values, pid=ctx.pid) \
            if claimed_at is None else transitions.finish_held(
                session, values, pid=ctx.pid, run_id=job.run_id, step_id=job.step_id,
                item_index=job.item_index, started_at=claimed_at, source=job.source)
        if mine is None:
            continue  # re-dispatched meanwhile (declared lost): the new attempt counts
        if StepState(result.state).final:
            totals.setdefault(job.skill, skill_stats.Totals()).add(
                success=result.state == StepState.SUCCEEDED, duration_ms=mine.duration_ms,
                cost_usd=mine.cost_usd, at=now,
                production=mine.source == RunSource.PRODUCTION)
        if result.state == StepState.WAITING:  # its sub-skill runs go, a person decides
            assert isinstance(result.then, WaitingOn)
            children = list(result.then.run_ids)
            due.update(children)  # their first advance
            if transitions.wait_on(session, job.row_id, children, now) or \
                    result.then.deadline:
                # they had ended already, or were decided: it goes again now; or the
                # planner is to watch the run at a wait's deadline
                due.add(job.run_id)
            continue
        if isinstance(result.then, CacheWrite) and result.outputs is not None:
            cache.store(session, key=result.then.key, skill=job.skill, version=job.version,
                        outputs=result.outputs, ttl_s=result.then.ttl_s,
                        step_run_id=job.row_id)
        if result.state != StepState.SUCCEEDED or not job.fans_out:
            due.add(job.run_id)  # a lone item needs no count: it was the step's last
        else:
            steps.add((job.run_id, job.step_id))
    for skill, sums in sorted(totals.items()):  # sorted: two batches lock in one order
        skill_stats.add(session, skill, skill_stats.STEP, sums)
    note_failures(ctx, session, done)  # production's final failures: improvement notes
    return due, steps


def outlasting(ctx: WorkerContext, fn: Callable[[], T], what: str) -> T:
    return through_outage(fn, limit_s=ctx.settings.database_outage_s, what=what)
