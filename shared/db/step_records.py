"""The hot path's step-run SQL: recording a fan-out, claiming, finishing, counting.

Every step attempt passes through these, so each is one statement rather than an ORM
load-modify-flush: a wide fan-out's rows go in by COPY, a claim is one
``UPDATE ... RETURNING`` for a whole batch, a finish one ``UPDATE ... RETURNING`` per
attempt inside one transaction. The caller owns the transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, select, text
from sqlalchemy.orm import Session

from shared.db.models import StepRun
from shared.states import StepState

COPY_FROM = 64  # below this many rows a multi-row INSERT is as quick and simpler

# The columns the planner writes when it launches attempts; the rest take their defaults.
LAUNCH_COLUMNS = ("id", "run_id", "step_id", "item_index", "attempt", "skill", "version",
                  "state", "source", "queue", "inputs", "input_hash", "not_before", "route")
_DEFAULTS = {"cache_hit": False, "cost_usd": 0.0, "tokens_in": 0, "tokens_out": 0}


def insert_attempts(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Insert pending attempts (dicts of LAUNCH_COLUMNS) in the session's transaction."""
    if not rows:
        return
    if len(rows) < COPY_FROM:
        session.execute(insert(StepRun), [{**_DEFAULTS, **r} for r in rows])
        return
    columns = (*LAUNCH_COLUMNS, *_DEFAULTS)
    raw = session.connection().connection.driver_connection
    with raw.cursor() as cursor, cursor.copy(  # type: ignore[union-attr]
            f"COPY step_runs ({', '.join(columns)}) FROM STDIN") as copy:
        for r in rows:
            copy.write_row([*(json.dumps(r["inputs"]) if c == "inputs" else r.get(c)
                              for c in LAUNCH_COLUMNS), *_DEFAULTS.values()])


@dataclass(frozen=True, slots=True)
class Claimed:
    id: str
    run_id: str
    step_id: str
    skill: str
    version: int
    attempt: int
    inputs: Any
    vault: str
    workdir: str | None


_CLAIM = text(
    "UPDATE step_runs s SET state = 'running', worker = :worker, worker_pid = :pid, "
    "daemon = :daemon, started_at = :now, heartbeat_at = :now FROM pipeline_runs r "
    "WHERE s.id = ANY(:ids) AND s.state = 'pending' AND r.id = s.run_id "
    "AND r.state NOT IN ('failed', 'cancelled') "
    "RETURNING s.id, s.run_id, s.step_id, s.skill, s.version, s.attempt, s.inputs, r.vault, "
    "r.plan ->> 'workdir' AS workdir")


def claim_pending(session: Session, ids: Sequence[str], *, worker: str, pid: int,
                  daemon: str | None, now: datetime) -> dict[str, Claimed]:
    """Mark the pending ones of ``ids`` running for this process; by id.

    Two deliveries of one message race on the row lock: the second re-checks
    ``state = 'pending'`` after the first commits and claims nothing.
    """
    rows = session.execute(_CLAIM, {"ids": list(ids), "worker": worker, "pid": pid,
                                    "daemon": daemon, "now": now}).all()
    return {r.id: Claimed(r.id, r.run_id, r.step_id, r.skill, r.version, r.attempt, r.inputs,
                          r.vault, r.workdir) for r in rows}


_FINISH = text(
    "UPDATE step_runs SET state = :state, outputs = CAST(:outputs AS jsonb), error = :error, "
    "error_kind = :error_kind, cache_hit = :cache_hit, exit_code = :exit_code, "
    "stdout_tail = :stdout_tail, stderr_tail = :stderr_tail, finished_at = :now, "
    "duration_ms = COALESCE(CAST(:duration_ms AS double precision), "
    "EXTRACT(EPOCH FROM CAST(:now AS timestamptz) - started_at) * 1000), "
    "not_before = :not_before, lock_wait_ms = :lock_wait_ms, locked_at = :locked_at, "
    "unlocked_at = :unlocked_at "
    "WHERE id = :id AND state = 'running' AND worker_pid = :pid "
    "RETURNING duration_ms, cost_usd")


# A screen step's machine lock (workers/screen/lock.py); other steps have none.
_NO_LOCK = {"lock_wait_ms": None, "locked_at": None, "unlocked_at": None}


@dataclass(frozen=True, slots=True)
class Finished:
    duration_ms: float | None
    cost_usd: float


def finish_attempt(session: Session, values: dict[str, Any], *, pid: int) -> Finished | None:
    """Record an attempt's result; None when it is no longer this process's to record
    (declared lost and re-dispatched meanwhile: the newer attempt counts)."""
    params = {**_NO_LOCK, **values, "pid": pid,
              "outputs": None if values.get("outputs") is None else json.dumps(values["outputs"])}
    row = session.execute(_FINISH, params).first()
    return None if row is None else Finished(row.duration_ms, row.cost_usd)


def open_items(session: Session, run_id: str, step_id: str) -> int:
    """Attempts of a step still pending or running (zero: the step can settle)."""
    return int(session.scalar(select(func.count()).select_from(StepRun).where(
        StepRun.run_id == run_id, StepRun.step_id == step_id,
        StepRun.state.in_([StepState.PENDING.value, StepState.RUNNING.value]))) or 0)
