"""The one writer of run and step states.

Every change of ``pipeline_runs.state`` or ``step_runs.state`` is a function here, and
each is checked against the transition tables of shared/states.py before it is written:
an ORM write calls ``check_run``/``check_step`` on the row's current state, and a bulk
statement's guard (``WHERE state IN (...)``) is built from the table's sources of the
new state, passed as parameters taken from the enums. The caller owns the transaction.

Other columns (outputs, errors, heartbeats) travel with the state change that sets them;
heartbeats alone are not state changes (workers/heartbeat.py). Each change of a step
attempt's state is also reported to lifecycle/step_counts.py, which keeps the per-step
counts of the newest attempts' states (written at the commit).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import chain, islice
from typing import Any

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from sqlalchemy import func, insert, select, text, update
from sqlalchemy.orm import Session, object_session

from lifecycle.step_counts import moved, moved_rows
from shared.cache import input_hash
from shared.db import deferred
from shared.db.models import PipelineRun, StepRun
from shared.db.pipelined import pipelined
from shared.states import (
    RunState,
    StepState,
    check_run,
    check_step,
    step_sources,
)

COPY_FROM = 64  # below this many rows a multi-row INSERT is as quick and simpler

# The columns the planner writes when it launches attempts; the rest take their defaults.
LAUNCH_COLUMNS = ("id", "run_id", "step_id", "item_index", "attempt", "skill", "version",
                  "state", "source", "queue", "inputs", "input_hash", "not_before", "route")
_DEFAULTS = {"cache_hit": False, "cost_usd": 0.0, "tokens_in": 0, "tokens_out": 0}
_ATTEMPT_COLUMNS = (*LAUNCH_COLUMNS, *_DEFAULTS)
_INSERT_ATTEMPT = (f"INSERT INTO step_runs ({', '.join(_ATTEMPT_COLUMNS)}) "  # noqa: S608 - fixed column names
                   f"VALUES ({', '.join(f'%({c})s' for c in _ATTEMPT_COLUMNS)})")
ENDED_RUN = tuple(s for s in RunState if s.terminal)
NEW_RUNS = "skillq.new_runs"  # session.info: the runs this session recorded, by id
# session.info: (run, step) -> stored outputs (JSON text, or None) of the steps (not
# fan-outs: one item) whose attempt this session recorded succeeded. That attempt was
# its item's live one (the finish matched it running), so the step's only item is final:
# planner._Advance skips the reads that would say so.
SUCCEEDED_LONE = "skillq.succeeded_lone"
LONE_ITEM = -1  # a step that does not fan out has one item, numbered -1


def _now() -> datetime:
    return datetime.now(UTC)


def _values(states: Iterable[RunState | StepState]) -> list[str]:
    return [s.value for s in states]


# -- pipeline runs ----------------------------------------------------------------------

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
    # planner.lock_run takes it from here: a row this transaction inserted is seen by no
    # other, so it needs neither a lock nor a read (and, not yet flushed, it is inserted
    # as the first planning pass left it, not inserted and then updated).
    session.info.setdefault(NEW_RUNS, {})[run_id] = run
    return run


def is_new(session: Session, run_id: str) -> bool:
    """``run_id`` was recorded by this session (``new_run``), not read."""
    return run_id in (session.info.get(NEW_RUNS) or {})


def start_run(run: PipelineRun, now: datetime | None = None) -> None:
    check_run(RunState(run.state), RunState.RUNNING)
    run.state = RunState.RUNNING
    run.started_at = now or _now()


def succeed_run(run: PipelineRun, outputs: Any, now: datetime | None = None) -> None:
    check_run(RunState(run.state), RunState.SUCCEEDED)
    run.state = RunState.SUCCEEDED
    run.outputs = outputs
    run.finished_at = now or _now()


def fail_run(session: Session, run: PipelineRun, *, error: str, step: str | None,
             item: int | None, now: datetime | None = None) -> None:
    """The run ends failed; attempts still waiting in a queue will never run."""
    check_run(RunState(run.state), RunState.FAILED)
    run.state = RunState.FAILED
    run.error = error
    run.failed_step = step
    run.failed_item = item
    run.finished_at = now or _now()
    cancel_pending(session, run.id, "not run: the run failed before it started",
                   run.finished_at)


def cancel_run(session: Session, run_id: str, reason: str = "cancelled",
               now: datetime | None = None) -> list[str]:
    """Cancel a run that has not ended, its open attempts and its nested runs.

    Returns the ids of the attempts that were running (their processes are to be
    stopped by whoever runs them). A run that already ended is left as it ended.
    """
    now = now or _now()
    run = session.get(PipelineRun, run_id, with_for_update=True)
    if run is None or RunState(run.state).terminal:
        return []
    check_run(RunState(run.state), RunState.CANCELLED)
    run.state = RunState.CANCELLED
    run.error = reason
    run.finished_at = now
    run.watch_at = None
    stopped = cancel_open(session, run_id, reason, now)
    children = session.scalars(select(PipelineRun.id).where(
        PipelineRun.parent_step_run_id.in_(
            select(StepRun.id).where(StepRun.run_id == run_id)))).all()
    for child in children:
        stopped += cancel_run(session, child, reason, now)
    return stopped


# -- step attempts ------------------------------------------------------------------------

def launch_attempts(session: Session, rows: Iterable[dict[str, Any]], *,
                    at_commit: bool = False) -> int:
    """Insert pending attempts (dicts of LAUNCH_COLUMNS); how many. A wide fan-out goes
    by COPY, and ``rows`` may be a generator: its rows are made as COPY takes them.

    ``at_commit``, for the first attempts of runs this session records (``new_run``):
    fewer than COPY_FROM go with the commit (shared/db/deferred.py), after the runs' own
    rows, and are not seen before it. Nobody looks for them sooner (their messages are
    sent after it), and a run's row is then inserted once, as its first planning pass
    left it, instead of inserted here and updated at the commit."""
    it = iter(rows)
    head = list(islice(it, COPY_FROM))
    launched: Counter[tuple[str, str]] = Counter()

    def checked(r: dict[str, Any]) -> dict[str, Any]:
        if r["state"] != StepState.PENDING:
            raise ValueError("an attempt starts pending")
        launched[(r["run_id"], r["step_id"])] += 1
        return r

    if at_commit and not all(is_new(session, r["run_id"]) for r in head):
        raise ValueError("only a run this session records has its attempts at the commit")
    if at_commit and len(head) < COPY_FROM:
        for r in head:
            deferred.defer(session, _INSERT_ATTEMPT, {
                **_DEFAULTS, **checked(r), "inputs": Jsonb(r["inputs"])})
    elif len(head) < COPY_FROM:
        session.flush()  # their runs' rows first (the foreign key)
        session.execute(insert(StepRun), [{**_DEFAULTS, **checked(r)} for r in head])
    else:
        session.flush()  # as above
        columns = (*LAUNCH_COLUMNS, *_DEFAULTS)
        raw = session.connection().connection.driver_connection
        with raw.cursor() as cursor, cursor.copy(  # type: ignore[union-attr]
                f"COPY step_runs ({', '.join(columns)}) FROM STDIN") as copy:
            for r in chain(head, it):
                checked(r)
                copy.write_row([*(json.dumps(r["inputs"]) if c == "inputs" else r.get(c)
                                  for c in LAUNCH_COLUMNS), *_DEFAULTS.values()])
    for (run_id, step_id), n in launched.items():
        moved(session, run_id, step_id, None, StepState.PENDING, n)
    return sum(launched.values())


# What a retry copies of an attempt it reuses (the rest: who ran it, when, its logs).
REUSED_COLUMNS = ("step_id", "item_index", "skill", "version", "source", "queue", "inputs",
                  "input_hash", "outputs", "worker", "daemon", "exit_code", "started_at",
                  "finished_at", "duration_ms", "child_run_id")


def reuse_attempts(session: Session, run_id: str, rows: Sequence[StepRun],
                   now: datetime | None = None) -> int:
    """A retry's run starts with these succeeded attempts of the run it retries, copied
    as its own first attempts (nothing is run again; no cost is counted twice; the route
    names the attempt reused). Not a transition: each copy is inserted as it ended."""
    if any(StepState(r.state) != StepState.SUCCEEDED for r in rows):
        raise ValueError("only a succeeded attempt is reused")
    now = now or _now()
    copies = [{**_DEFAULTS, **{c: getattr(r, c) for c in REUSED_COLUMNS},
               "id": f"{run_id}/{r.step_id}/{r.item_index}/1", "run_id": run_id,
               "attempt": 1, "state": StepState.SUCCEEDED.value, "cache_hit": True,
               "route": f"reused from {r.id} (a retry of run {r.run_id})",
               "created_at": now} for r in rows]
    if copies:
        session.execute(insert(StepRun), copies)
        for step_id, n in Counter(c["step_id"] for c in copies).items():
            moved(session, run_id, step_id, None, StepState.SUCCEEDED, n)
    return len(copies)


def add_attempt(session: Session, follows: StepRun | None = None, **columns: Any) -> StepRun:
    """One more pending attempt of a step item (a retry, or a re-dispatch after a loss).

    The attempt it follows is marked superseded: it needs no next attempt any more, and
    it is no longer the item's counted one. ``follows``: that attempt, as the planner
    holds it (marked in memory, flushed with the rest); without it, found by a query.
    """
    if follows is not None:
        follows.superseded = True
        moved(session, follows.run_id, follows.step_id, follows.state, None)
    else:
        followed = session.execute(
            update(StepRun)
            .where(StepRun.run_id == columns["run_id"], StepRun.step_id == columns["step_id"],
                   StepRun.item_index == columns["item_index"],
                   StepRun.attempt < columns["attempt"], StepRun.superseded.is_(False))
            .values(superseded=True).returning(StepRun.state)
            .execution_options(synchronize_session="fetch")).scalars().all()
        for old in followed:  # the newest of them was the item's counted attempt
            moved(session, columns["run_id"], columns["step_id"], old, None)
    row = StepRun(state=StepState.PENDING, superseded=False, **columns)
    session.add(row)
    moved(session, row.run_id, row.step_id, None, StepState.PENDING)
    return row


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


_CLAIM_SQL = (
    "UPDATE step_runs s SET state = %(running)s, worker = %(worker)s, worker_pid = %(pid)s, "
    "daemon = %(daemon)s, started_at = %(now)s, heartbeat_at = %(now)s FROM pipeline_runs r "
    "WHERE s.id = ANY(%(ids)s) AND s.state = %(pending)s AND r.id = s.run_id "
    "AND r.state <> ALL(%(ended)s) "
    "RETURNING s.id, s.run_id, s.step_id, s.skill, s.version, s.attempt, s.inputs, r.vault, "
    "r.plan ->> 'workdir' AS workdir")
_CLAIM = text(re.sub(r"%\((\w+)\)s", r":\1", _CLAIM_SQL))  # the same, for SQLAlchemy
# A lone attempt's run, as planner.lock_run reads it (its lazy columns left out).
_RUN_COLUMNS = [c.name for c in PipelineRun.__table__.columns
                if c.name not in ("inputs", "outputs")]
_LOCK_RUN = (f"SELECT {', '.join(_RUN_COLUMNS)} FROM pipeline_runs "  # noqa: S608 - the model's own column names
             "WHERE id = %(run)s FOR UPDATE SKIP LOCKED")
check_step(StepState.PENDING, StepState.RUNNING)  # the claim's one transition, at import


def _claim_params(ids: Sequence[str], worker: str, pid: int, daemon: str | None,
                  now: datetime) -> dict[str, Any]:
    return {"ids": list(ids), "worker": worker, "pid": pid, "daemon": daemon, "now": now,
            "running": StepState.RUNNING.value, "pending": StepState.PENDING.value,
            "ended": _values(ENDED_RUN)}


def claim_pending(session: Session, ids: Sequence[str], *, worker: str, pid: int,
                  daemon: str | None, now: datetime) -> dict[str, Claimed]:
    """Mark the pending ones of ``ids`` running for this process; by id.

    Two deliveries of one message race on the row lock: the second re-checks the pending
    state after the first commits and claims nothing. A run that ended claims nothing.
    """
    rows = session.execute(_CLAIM, _claim_params(ids, worker, pid, daemon, now)).all()
    moved_rows(session, rows, StepState.PENDING, StepState.RUNNING)
    return {r.id: Claimed(r.id, r.run_id, r.step_id, r.skill, r.version, r.attempt, r.inputs,
                          r.vault, r.workdir) for r in rows}


def claim_lone(session: Session, row_id: str, *, worker: str, pid: int,
               daemon: str | None, now: datetime
               ) -> tuple[Claimed | None, dict[str, Any] | None]:
    """``claim_pending`` of one attempt, and its run's row taken FOR UPDATE SKIP LOCKED,
    in one round trip with the transaction's BEGIN: the claim (or None), and the run's
    columns but its inputs and outputs (None while another transaction holds the row:
    it is never waited for, holding the attempt's, which a cancel takes the other way
    round). For a step's only item, whose cache hit is recorded and its run planned in
    the claim's transaction (workers/step_runner.py)."""
    with pipelined(session) as pg:
        claimed = pg.cursor(row_factory=dict_row)
        claimed.execute(_CLAIM_SQL, _claim_params([row_id], worker, pid, daemon, now))
        locked = pg.cursor(row_factory=dict_row)
        locked.execute(_LOCK_RUN, {"run": row_id.rsplit("/", 3)[0]})
    row = claimed.fetchone()
    run = locked.fetchone()
    if row is None:
        return None, run
    moved(session, row["run_id"], row["step_id"], StepState.PENDING, StepState.RUNNING)
    return Claimed(**row), run


def take_over(row: StepRun, *, worker: str, pid: int, daemon: str | None,
              now: datetime) -> None:
    """A redelivery takes an attempt whose process died (or a pending one) for itself."""
    _move(row, StepState.RUNNING)
    row.worker = worker
    row.worker_pid = pid
    row.daemon = daemon
    row.started_at = now
    row.heartbeat_at = now


_FINISH = text(
    "UPDATE step_runs SET state = :state, outputs = CAST(:outputs AS jsonb), error = :error, "
    "error_kind = :error_kind, cache_hit = :cache_hit, exit_code = :exit_code, "
    "stdout_tail = :stdout_tail, stderr_tail = :stderr_tail, finished_at = :now, "
    "duration_ms = COALESCE(CAST(:duration_ms AS double precision), "
    "EXTRACT(EPOCH FROM CAST(:now AS timestamptz) - started_at) * 1000), "
    "not_before = :not_before, lock_wait_ms = :lock_wait_ms, locked_at = :locked_at, "
    "unlocked_at = :unlocked_at, cost_usd = :cost_usd, tokens_in = :tokens_in, "
    "tokens_out = :tokens_out "
    "WHERE id = :id AND state = :running AND worker_pid = :pid "
    "RETURNING duration_ms, cost_usd, source, run_id, step_id, item_index")

# A screen step's machine lock (workers/screen/lock.py) and an agent step's model usage
# (workers/agent/); other steps have neither.
_UNSET = {"lock_wait_ms": None, "locked_at": None, "unlocked_at": None,
            "cost_usd": 0.0, "tokens_in": 0, "tokens_out": 0}


@dataclass(frozen=True, slots=True)
class Finished:
    duration_ms: float | None
    cost_usd: float
    source: str  # success rates count production attempts only (shared/db/skill_stats.py)


def finish_attempt(session: Session, values: dict[str, Any], *, pid: int) -> Finished | None:
    """Record an attempt's result; None when it is no longer this process's to record
    (declared lost, or cancelled, meanwhile: the newer record counts)."""
    check_step(StepState.RUNNING, StepState(values["state"]))
    params = {**_UNSET, **values, "pid": pid, "running": StepState.RUNNING.value,
              "outputs": None if values.get("outputs") is None else json.dumps(values["outputs"])}
    row = session.execute(_FINISH, params).first()
    if row is None:
        return None
    moved(session, row.run_id, row.step_id, StepState.RUNNING, values["state"])
    if values["state"] == StepState.SUCCEEDED and row.item_index == LONE_ITEM:
        # The planner, in this transaction, need not ask what it would read back: the
        # JSON text as stored, so what it decodes is what a read would give.
        session.info.setdefault(SUCCEEDED_LONE, {})[(row.run_id, row.step_id)] = \
            params["outputs"]
    return Finished(row.duration_ms, row.cost_usd, row.source)


def declare_lost(row: StepRun, error: str, now: datetime | None = None) -> None:
    _move(row, StepState.LOST)
    row.finished_at = now or _now()
    row.error = error
    row.error_kind = "lost"


def lose_process(session: Session, ids: Sequence[str], pid: int, error: str,
                 now: datetime | None = None) -> list[str]:
    """Attempts of ``ids`` running under process ``pid``, which died: declared lost.
    The ids declared (a redelivery found them settled or taken over: none)."""
    now = now or _now()
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
    _move(row, StepState.SKIPPED)


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


def _move(row: StepRun, new: StepState) -> None:
    """An ORM row's state change, checked and counted (in the row's session)."""
    old = StepState(row.state)
    check_step(old, new)
    row.state = new
    session = object_session(row)
    if session is not None:
        moved(session, row.run_id, row.step_id, old, new)


def settle_parent(parent: StepRun, child: PipelineRun, now: datetime | None = None) -> None:
    """A nested run ended: the step that started it ends the same way."""
    now = now or _now()
    new = StepState.SUCCEEDED if child.state == RunState.SUCCEEDED else StepState.FAILED
    _move(parent, new)
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
    """An agent step recorded waiting for ``children`` (runs its execute_skill calls
    started): resumed at once when they have all ended already (one that ended while the
    step was still running has nobody else to wake it); True if so."""
    still = session.scalar(select(func.count()).select_from(PipelineRun).where(
        PipelineRun.id.in_(list(children)), PipelineRun.state.not_in(_values(ENDED_RUN))))
    if still:
        return False
    return _resume(session, row_id, now or _now())


def resume_waiting(session: Session, row_id: str, now: datetime | None = None) -> bool:
    """The runs an agent step waited for have ended: it goes back to its queue (pending,
    due now: the planner's next pass sends it). False when it was not waiting."""
    return _resume(session, row_id, now or _now())


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

