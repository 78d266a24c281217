"""The claim: a worker takes pending attempts for itself (pending -> running), in one
statement, or one by one when a redelivery finds one its batch claim missed."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from psycopg.rows import dict_row
from sqlalchemy import text
from sqlalchemy.orm import Session

from lifecycle import launch_fence
from lifecycle.step_counts import moved, moved_rows
from lifecycle.transitions.finishes import move
from lifecycle.transitions.runs import ENDED_RUN
from shared import cache
from shared.attempt_id import AttemptId
from shared.db.models import PipelineRun, StepRun
from shared.db.pipelined import pipelined
from shared.states import StepState, check_step


@dataclass(frozen=True, slots=True)
class Claimed:
    id: str
    run_id: str
    step_id: str
    skill: str
    version: int
    attempt: int
    inputs: Any
    source: str
    vault: str
    workdir: str | None
    started_at: datetime
    # The cache key of the inputs its planner stored (cache.key_sql), and that key's live
    # entry as [outputs] (None: no entry). The worker's own key says whether it applies:
    # it differs where the skill adds defaults or the worker's copy is another version.
    cache_key: str | None
    cache_found: list[Any] | None


# The key over this statement's own columns: no value is formatted in.
_KEY = cache.key_sql("s.skill", "s.version", "s.input_hash")
_CLAIM_SQL = (
    "UPDATE step_runs s SET state = %(running)s, "  # noqa: S608
    "worker = %(worker)s, worker_pid = %(pid)s, daemon = %(daemon)s, "
    "started_at = %(now)s, heartbeat_at = %(now)s FROM pipeline_runs r "
    "WHERE s.id = ANY(%(ids)s) AND s.state = %(pending)s AND r.id = s.run_id "
    "AND r.state <> ALL(%(ended)s) "
    "RETURNING s.id, s.run_id, s.step_id, s.skill, s.version, s.attempt, s.inputs, s.source, "
    "r.vault, "
    "r.plan ->> 'workdir' AS workdir, s.started_at, "
    f"{_KEY} AS cache_key, (SELECT jsonb_build_array(c.outputs) FROM cache_entries c "
    f"WHERE c.key = {_KEY} AND c.expires_at > %(now)s) AS cache_found")
_CLAIM = text(re.sub(r"%\((\w+)\)s", r":\1", _CLAIM_SQL))  # the same, for SQLAlchemy
# One attempt by its id: a scalar key lets PostgreSQL keep one generic plan for it, where
# an array's is planned again at every execution.
# Its start: the worker's clock as the claim's transaction begins, plus the server's
# time since (the wait for the launch fence, launch_fence.queue_wait): when it was
# claimed, on the clock its finish is stamped with.
_CLAIM_ONE_SQL = _CLAIM_SQL.replace("s.id = ANY(%(ids)s)", "s.id = %(id)s").replace(
    "%(now)s", "%(now)s + (clock_timestamp() - transaction_timestamp())")
# A lone attempt's run, as planner.lock_run reads it (its lazy columns left out).
_RUN_COLUMNS = [c.name for c in PipelineRun.__table__.columns
                if c.name not in ("inputs", "outputs")]
_LOCK_RUN = (f"SELECT {', '.join(_RUN_COLUMNS)} FROM pipeline_runs "  # noqa: S608 - the model's own column names
             "WHERE id = %(run)s FOR UPDATE SKIP LOCKED")
check_step(StepState.PENDING, StepState.RUNNING)  # the claim's one transition, at import


def _claim_params(worker: str, pid: int, daemon: str | None, now: datetime
                  ) -> dict[str, Any]:
    return {"worker": worker, "pid": pid, "daemon": daemon, "now": now,
            "running": StepState.RUNNING.value, "pending": StepState.PENDING.value,
            "ended": [s.value for s in ENDED_RUN]}


def claim_pending(session: Session, ids: Sequence[str], *, worker: str, pid: int,
                  daemon: str | None, now: datetime) -> dict[str, Claimed]:
    """Mark the pending ones of ``ids`` running for this process; by id.

    Two deliveries of one message race on the row lock: the second re-checks the pending
    state after the first commits and claims nothing. A run that ended claims nothing.
    """
    rows = session.execute(_CLAIM, {**_claim_params(worker, pid, daemon, now),
                                    "ids": list(ids)}).all()
    moved_rows(session, rows, StepState.PENDING, StepState.RUNNING)
    return {r.id: Claimed(**r._asdict()) for r in rows}


@dataclass(frozen=True, slots=True)
class LoneClaim:
    claimed: Claimed | None  # None: nothing pending
    run: dict[str, Any] | None  # the run's columns, None while another transaction holds it
    fence_free: bool  # no launch held the run's fence when the claim came
    run_known: bool  # the run's row is committed


def claim_lone(session: Session, row_id: str, *, worker: str, pid: int,
               daemon: str | None, fence_wait_s: float = launch_fence.WAIT_S) -> LoneClaim:
    """``claim_pending`` of one attempt, and its run's row taken FOR UPDATE SKIP LOCKED,
    in one round trip with the transaction's BEGIN, after the run's launch fence
    (lifecycle/launch_fence.py: waited for there, so a claim that came ahead of its
    launch's commit claims once it committed, in the same round trip; past
    ``fence_wait_s`` it raises, ``launch_fence.timed_out``): the claim (or None), the
    run's columns but its inputs and outputs (None while another transaction holds the
    row: it is never waited for, holding the attempt's, which a cancel takes the other
    way round), whether a launch held the fence and whether the run's row was there
    after it. The claim's start is when the wait ended. For a step's only item, whose
    cache hit is recorded and its run planned in the claim's transaction
    (workers/claim.py)."""
    run_id = AttemptId.parse(row_id).run_id
    with pipelined(session) as pg:
        # With the connection in hand (a new one takes milliseconds), by its BEGIN.
        now = datetime.now(UTC)
        waited = launch_fence.queue_wait(pg, run_id, fence_wait_s)
        claimed = pg.cursor(row_factory=dict_row)
        claimed.execute(_CLAIM_ONE_SQL, {**_claim_params(worker, pid, daemon, now),
                                         "id": row_id})
        locked = pg.cursor(row_factory=dict_row)
        locked.execute(_LOCK_RUN, {"run": run_id})
    fence_free, run_known = waited.read()
    row = claimed.fetchone()
    run = locked.fetchone()
    if row is None:
        return LoneClaim(None, run, fence_free, run_known)
    moved(session, row["run_id"], row["step_id"], StepState.PENDING, StepState.RUNNING)
    return LoneClaim(Claimed(**row), run, fence_free, run_known)


def take_over(row: StepRun, *, worker: str, pid: int, daemon: str | None,
              now: datetime) -> None:
    """A redelivery takes for itself a pending attempt its batch claim missed. A running
    one is never taken over (workers/claim.py declares it lost when its process
    died, or leaves it to the nested run that carries it)."""
    move(row, StepState.RUNNING)
    row.worker = worker
    row.worker_pid = pid
    row.daemon = daemon
    row.started_at = now
    row.heartbeat_at = now


