"""Runs: recorded, started, ended (succeeded, failed, rejected, cancelled), and the cancelling of
a run's attempts that goes with its end."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from lifecycle.step_counts import moved_rows
from lifecycle.transitions.waits import cancel_waits
from shared.cache import input_hash
from shared.db import deferred
from shared.db.models import PipelineRun, StepRun
from shared.db.txn_context import context
from shared.states import (
    RunState,
    StepState,
    check_run,
    check_step,
    step_sources,
)

ENDED_RUN = tuple(s for s in RunState if s.terminal)


def now_utc() -> datetime:
    return datetime.now(UTC)


def state_values(states: Iterable[RunState | StepState]) -> list[str]:
    return [s.value for s in states]


def new_run(session: Session, *, run_id: str, skill: str, version: int, source: str,
            vault: str, plan: dict[str, Any], inputs: dict[str, Any],
            triggered_by: str | None, parent_step_run_id: str | None,
            agent_call: str | None = None, retry_of: str | None = None,
            progress: dict[str, Any] | None = None) -> PipelineRun:
    """A pending run; ``progress``: the steps a retry starts with done (lifecycle/retry.py)."""
    run = PipelineRun(id=run_id, skill=skill, version=version, state=RunState.PENDING,
                      source=source, vault=vault, plan=plan, inputs=inputs,
                      input_hash=input_hash(inputs), progress=progress or {},
                      triggered_by=triggered_by, parent_step_run_id=parent_step_run_id,
                      agent_call=agent_call, retry_of=retry_of)
    session.add(run)
    deferred.insert_plainly(session, run)  # as the planning passes leave it, at the commit
    # planner.lock_run takes it from here: a row this transaction inserted is seen by no
    # other, so it needs neither a lock nor a read (and, not yet flushed, it is inserted
    # as the first planning pass left it, not inserted and then updated).
    context(session).new_runs[run_id] = run
    return run


def is_new(session: Session, run_id: str) -> bool:
    """``run_id`` was recorded by this session (``new_run``), not read."""
    return run_id in context(session).new_runs


def start_run(run: PipelineRun, now: datetime | None = None) -> None:
    check_run(RunState(run.state), RunState.RUNNING)
    run.state = RunState.RUNNING
    run.started_at = now or now_utc()


def succeed_run(run: PipelineRun, outputs: Any, now: datetime | None = None) -> None:
    check_run(RunState(run.state), RunState.SUCCEEDED)
    run.state = RunState.SUCCEEDED
    run.outputs = outputs
    run.finished_at = now or now_utc()


def fail_run(session: Session, run: PipelineRun, *, error: str, step: str | None,
             item: int | None, now: datetime | None = None,
             state: RunState = RunState.FAILED) -> None:
    """The run ends failed (or ``state`` REJECTED: an approval turned down); attempts
    still waiting in a queue will never run."""
    check_run(RunState(run.state), state)
    run.state = state
    run.error = error
    run.failed_step = step
    run.failed_item = item
    run.finished_at = now or now_utc()
    cancel_pending(session, run.id, "not run: the run failed before it started",
                   run.finished_at)
    cancel_waits(session, run.id, run.finished_at)


def cancel_run(session: Session, run_id: str, reason: str = "cancelled",
               now: datetime | None = None) -> list[str]:
    """Cancel a run that has not ended, its open attempts and its nested runs.

    Returns the ids of the attempts that were running (their processes are to be
    stopped by whoever runs them). A run that already ended is left as it ended.
    """
    now = now or now_utc()
    run = session.get(PipelineRun, run_id, with_for_update=True)
    if run is None or RunState(run.state).terminal:
        return []
    check_run(RunState(run.state), RunState.CANCELLED)
    run.state = RunState.CANCELLED
    run.error = reason
    run.finished_at = now
    run.watch_at = None
    stopped = cancel_open(session, run_id, reason, now)
    cancel_waits(session, run_id, now)
    children = session.scalars(select(PipelineRun.id).where(
        PipelineRun.parent_step_run_id.in_(
            select(StepRun.id).where(StepRun.run_id == run_id)))).all()
    for child in children:
        stopped += cancel_run(session, child, reason, now)
    return stopped


def cancel_pending(session: Session, run_id: str, reason: str, now: datetime) -> None:
    """Attempts of the run still waiting in a queue, or for sub-skill runs, never run."""
    _cancel(session, run_id, (StepState.PENDING, StepState.WAITING), reason, now)


def cancel_open(session: Session, run_id: str, reason: str, now: datetime) -> list[str]:
    """Every open attempt of the run is cancelled; the ids of those that were running."""
    rows = _cancel(session, run_id, step_sources(StepState.CANCELLED), reason, now)
    return [str(r.id) for r in rows if r.started_at is not None]


def _cancel(session: Session, run_id: str, sources: Sequence[StepState], reason: str,
            now: datetime) -> list[Any]:
    """The run's attempts in ``sources`` cancelled, a statement per source state (the
    counts need to know which state each left); the rows changed."""
    changed: list[Any] = []
    for source in sources:
        check_step(source, StepState.CANCELLED)
        rows = session.execute(
            update(StepRun)
            .where(StepRun.run_id == run_id, StepRun.state == source.value)
            .values(state=StepState.CANCELLED.value, finished_at=now, error=reason,
                    error_kind="cancelled")
            .returning(StepRun.id, StepRun.started_at, StepRun.run_id, StepRun.step_id)
            .execution_options(synchronize_session=False)).all()
        moved_rows(session, rows, source, StepState.CANCELLED)
        changed += rows
    return changed

