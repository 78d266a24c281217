"""Attempts ended: recorded with their results, lost with their process, skipped, or
settled by the nested run they started; an agent step's wait on its sub-skill runs."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session, object_session

from lifecycle.step_counts import moved, moved_rows
from lifecycle.transitions.runs import ENDED_RUN, now_utc, state_values
from lifecycle.transitions.waits import open_count
from shared.attempt_id import AttemptId
from shared.db import deferred
from shared.db.models import PipelineRun, StepRun
from shared.db.txn_context import context
from shared.states import (
    RunState,
    StepState,
    check_step,
    step_sources,
)

LONE_ITEM = -1  # a step that does not fan out has one item, numbered -1


_FINISH_SQL = (
    "UPDATE step_runs SET state = %(state)s, outputs = CAST(%(outputs)s AS jsonb), "
    "error = %(error)s, error_kind = %(error_kind)s, cache_hit = %(cache_hit)s, "
    "exit_code = %(exit_code)s, stdout_tail = %(stdout_tail)s, stderr_tail = %(stderr_tail)s, "
    "finished_at = %(now)s, duration_ms = COALESCE(CAST(%(duration_ms)s AS double precision), "
    "EXTRACT(EPOCH FROM CAST(%(now)s AS timestamptz) - started_at) * 1000), "
    "not_before = %(not_before)s, lock_wait_ms = %(lock_wait_ms)s, locked_at = %(locked_at)s, "
    "unlocked_at = %(unlocked_at)s, cost_usd = %(cost_usd)s, tokens_in = %(tokens_in)s, "
    "tokens_out = %(tokens_out)s "
    "WHERE id = %(id)s AND state = %(running)s AND worker_pid = %(pid)s")
_FINISH = text(re.sub(r"%\((\w+)\)s", r":\1", _FINISH_SQL)  # the same, for SQLAlchemy
               + " RETURNING duration_ms, cost_usd, source, run_id, step_id, item_index")

# A screen step's machine lock (workers/screen/lock.py) and an agent step's model usage
# (workers/agent/); other steps have neither.
_UNSET = {"lock_wait_ms": None, "locked_at": None, "unlocked_at": None,
            "cost_usd": 0.0, "tokens_in": 0, "tokens_out": 0}


@dataclass(frozen=True, slots=True)
class Finished:
    duration_ms: float | None
    cost_usd: float
    source: str  # success rates count production attempts only (shared/db/skill_stats.py)


def _finish_params(values: dict[str, Any], pid: int) -> dict[str, Any]:
    check_step(StepState.RUNNING, StepState(values["state"]))
    return {**_UNSET, **values, "pid": pid, "running": StepState.RUNNING.value,
            "outputs": None if values.get("outputs") is None else json.dumps(values["outputs"])}


def _finished(session: Session, run_id: str, step_id: str, item_index: int,
              params: dict[str, Any]) -> None:
    moved(session, run_id, step_id, StepState.RUNNING, params["state"])
    if params["state"] == StepState.SUCCEEDED and item_index == LONE_ITEM:
        # The planner, in this transaction, need not ask what it would read back: the
        # JSON text as stored, so what it decodes is what a read would give.
        context(session).succeeded_lone[(run_id, step_id)] = params["outputs"]


def finish_attempt(session: Session, values: dict[str, Any], *, pid: int) -> Finished | None:
    """Record an attempt's result; None when it is no longer this process's to record
    (declared lost, or cancelled, meanwhile: the newer record counts)."""
    params = _finish_params(values, pid)
    row = session.execute(_FINISH, params).first()
    if row is None:
        return None
    _finished(session, row.run_id, row.step_id, row.item_index, params)
    return Finished(row.duration_ms, row.cost_usd, row.source)


def finish_held(session: Session, values: dict[str, Any], *, pid: int, run_id: str,
                step_id: str, item_index: int, started_at: datetime, source: str
                ) -> Finished:
    """``finish_attempt`` of an attempt this very transaction claimed (its row locked
    here since, running under this process): nothing can have moved it, so the UPDATE
    is sure to match and needs no answer. It goes with the COMMIT
    (shared/db/deferred.py), and what it would have returned is worked out here."""
    params = _finish_params(values, pid)
    deferred.defer(session, _FINISH_SQL, params)
    _finished(session, run_id, step_id, item_index, params)
    took_ms = values.get("duration_ms")
    if took_ms is None:
        took_ms = (values["now"] - started_at).total_seconds() * 1000
    return Finished(took_ms, params["cost_usd"], source)


def declare_lost(row: StepRun, error: str, now: datetime | None = None) -> None:
    move(row, StepState.LOST)
    row.finished_at = now or now_utc()
    row.error = error
    row.error_kind = "lost"


def lose_process(session: Session, ids: Sequence[str], pid: int, error: str,
                 now: datetime | None = None) -> list[str]:
    """Attempts of ``ids`` running under process ``pid``, which died: declared lost.
    The ids declared (none when a redelivery had found them settled or lost first)."""
    now = now or now_utc()
    lost = []
    for source in step_sources(StepState.LOST):  # one by one: the counts need the source
        rows = session.execute(
            update(StepRun)
            .where(StepRun.id.in_(list(ids)), StepRun.worker_pid == pid,
                   StepRun.state == source.value, StepRun.child_run_id.is_(None))
            .values(state=StepState.LOST.value, finished_at=now, error=error,
                    error_kind="lost")
            .returning(StepRun.id, StepRun.run_id, StepRun.step_id)).all()
        moved_rows(session, rows, source, StepState.LOST)
        lost += [str(r.id) for r in rows]
    return lost


def skip_failed(row: StepRun) -> None:
    """``on_failure: skip``: a failed item is dropped, and recorded as skipped."""
    move(row, StepState.SKIPPED)


def skip_failed_items(session: Session, run_id: str, step_id: str) -> int:
    """``on_failure: skip`` for every failed item of a step at once (one statement)."""
    check_step(StepState.FAILED, StepState.SKIPPED)
    rows = session.execute(
        update(StepRun)
        .where(StepRun.run_id == run_id, StepRun.step_id == step_id,
               StepRun.state == StepState.FAILED.value)
        .values(state=StepState.SKIPPED.value)
        .returning(StepRun.run_id, StepRun.step_id)
        .execution_options(synchronize_session=False)).all()
    moved_rows(session, rows, StepState.FAILED, StepState.SKIPPED)
    return len(rows)


def move(row: StepRun, new: StepState) -> None:
    """An ORM row's state change, checked and counted (in the row's session)."""
    old = StepState(row.state)
    check_step(old, new)
    row.state = new
    session = object_session(row)
    if session is not None:
        moved(session, row.run_id, row.step_id, old, new)


def settle_parent(parent: StepRun, child: PipelineRun, now: datetime | None = None) -> None:
    """A nested run ended: the step that started it ends the same way."""
    now = now or now_utc()
    new = StepState.SUCCEEDED if child.state == RunState.SUCCEEDED else StepState.FAILED
    move(parent, new)
    parent.finished_at = now
    if parent.started_at is not None:
        parent.duration_ms = (now - parent.started_at).total_seconds() * 1000
    if new == StepState.SUCCEEDED:
        parent.outputs = child.outputs
    else:
        parent.error = f"nested run {child.id} of {child.skill}: {child.error}"
        parent.error_kind = "cancelled" if child.state == RunState.CANCELLED else "nested"


def wait_on(session: Session, row_id: str, children: Sequence[str],
            now: datetime | None = None) -> bool:
    """A step recorded waiting for ``children`` (runs its execute_skill calls started)
    and for its open waits for a person: resumed at once when nothing is left to wait
    for (a run that ended, or a question answered, while the step was still running
    has nobody else to wake it); True if so."""
    still = session.scalar(select(func.count()).select_from(PipelineRun).where(
        PipelineRun.id.in_(list(children)), PipelineRun.state.not_in(state_values(ENDED_RUN))))
    if still or open_count(session, AttemptId.parse(row_id).calls_prefix):
        return False
    return _resume(session, row_id, now or now_utc())


def resume_if_done(session: Session, row_id: str, *, ended_run: str | None = None,
                   now: datetime | None = None) -> bool:
    """A run the step waited for ended (``ended_run``), or a person decided one of its
    waits: it goes back to its queue (pending, due now: the planner's next pass sends
    it) once no run it started is open and no wait of its item is. False when it was
    not waiting, or still waits."""
    open_runs = select(func.count()).select_from(PipelineRun).where(
        PipelineRun.parent_step_run_id == row_id,
        PipelineRun.state.not_in(state_values(ENDED_RUN)))
    if ended_run is not None:
        open_runs = open_runs.where(PipelineRun.id != ended_run)
    if session.scalar(open_runs) or open_count(session, AttemptId.parse(row_id).calls_prefix):
        return False
    return _resume(session, row_id, now or now_utc())


def _resume(session: Session, row_id: str, now: datetime) -> bool:
    check_step(StepState.WAITING, StepState.PENDING)
    done = session.execute(
        update(StepRun).where(StepRun.id == row_id,
                              StepRun.state == StepState.WAITING.value)
        .values(state=StepState.PENDING.value, not_before=now)
        .returning(StepRun.run_id, StepRun.step_id)
        .execution_options(synchronize_session=False)).all()
    moved_rows(session, done, StepState.WAITING, StepState.PENDING)
    return bool(done)


