"""Attempts launched: a step's first attempts (by COPY when wide), a retry's reused
ones, and one more attempt of an item (a retry or a re-dispatch)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from itertools import chain, islice
from typing import Any

from psycopg.types.json import Jsonb
from sqlalchemy import insert, update
from sqlalchemy.orm import Session

from lifecycle.step_counts import moved
from lifecycle.transitions.runs import is_new, now_utc
from shared.attempt_id import AttemptId
from shared.db import deferred
from shared.db.models import StepRun
from shared.states import StepState

COPY_FROM = 64  # below this many rows a multi-row INSERT is as quick and simpler

# The columns the planner writes when it launches attempts; the rest take their defaults.
LAUNCH_COLUMNS = ("id", "run_id", "step_id", "item_index", "attempt", "skill", "version",
                  "state", "source", "queue", "inputs", "input_hash", "not_before", "route")
_DEFAULTS = {"cache_hit": False, "cost_usd": 0.0, "tokens_in": 0, "tokens_out": 0}
_ATTEMPT_COLUMNS = (*LAUNCH_COLUMNS, *_DEFAULTS)
_INSERT_ATTEMPT = (f"INSERT INTO step_runs ({', '.join(_ATTEMPT_COLUMNS)}) "  # noqa: S608 - fixed column names
                   f"VALUES ({', '.join(f'%({c})s' for c in _ATTEMPT_COLUMNS)})")


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
    now = now or now_utc()
    copies = [{**_DEFAULTS, **{c: getattr(r, c) for c in REUSED_COLUMNS},
               "id": AttemptId.text(run_id, r.step_id, r.item_index, 1), "run_id": run_id,
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


