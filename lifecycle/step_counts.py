"""What the planner and the workers ask of a step's attempts, each an index range on
ix_step_runs_run_step_state however many items the step has: whether one is still open,
which want the planner (a retry, a loss, a heartbeat stopped), which failed, and how
many items are in each state.

Whether a step has an item left open is an index probe: a fan-in check costs the same
at 100,000 items as at 10 (a full COUNT of the open items, on every flush of every
batch, made a wide fan-out quadratic). The planner decides from the attempts' rows
themselves, which it sees with its own transaction's changes.

How many items are in each state (a waiting client's progress) is kept in step_counts:
lifecycle/transitions/ reports every state change here (``moved``) and the changes are
written when the transaction commits, after its other writes, as one statement in key
order. Taken last and in one order, the counter rows' locks are never part of a lock
cycle: a transaction holding one waits for nothing but the others, in the same order.
The changes wait in a ``deferred.pending`` list, so a savepoint rolled back takes its
changes with it.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    String,
    bindparam,
    func,
    literal_column,
    or_,
    select,
    tuple_,
    union_all,
)
from sqlalchemy.orm import Session

from shared.db import deferred
from shared.db.models import StepCount, StepRun
from shared.states import StepState

_CHANGES = "skillq.step_counts"  # deferred.pending: (run, step, state, change in items)
OPEN = (StepState.PENDING, StepState.RUNNING, StepState.WAITING)
_ADD_COUNTS = (
    "INSERT INTO step_counts (run_id, step_id, state, items) "
    "SELECT * FROM unnest(CAST(%(runs)s AS text[]), CAST(%(steps)s AS text[]), "
    "CAST(%(states)s AS text[]), CAST(%(items)s AS bigint[])) "
    "ON CONFLICT (run_id, step_id, state) DO UPDATE SET items = step_counts.items + "
    "excluded.items")


def in_state(*states: StepState) -> ColumnElement[bool]:
    """``step_runs.state`` is one of ``states``, written into the SQL as literals.

    Not as parameters: psycopg prepares a statement once it has run five times, and
    PostgreSQL's generic plan for ``state = $1`` cannot tell 'pending' (most of a new
    fan-out's items) from 'retrying' (a few): planned for any state, the planner's
    questions read every item of the step (slow in a wide fan-out) to find the few it wants.
    """
    values: list[ColumnElement[str]] = [literal_column(f"'{StepState(s).value}'")
                                        for s in states]
    return StepRun.state == values[0] if len(values) == 1 else StepRun.state.in_(values)


def _first(run_id: Any, step_id: Any, state: StepState) -> Any:
    # Ordered as ix_step_runs_run_step_state is, so PostgreSQL walks that index and stops
    # at the first entry. Asked as a plain EXISTS, it may take the statistics' word that
    # thousands of rows match and scan the table for one, which near a wide fan-out's end
    # (a few items open, the statistics taken when most were) reads every row.
    return (select(StepRun.id)
            .where(StepRun.run_id == run_id, StepRun.step_id == step_id,
                   in_state(state))
            .order_by(StepRun.superseded, StepRun.not_before).limit(1).scalar_subquery())


@functools.cache
def _any_open(states: tuple[StepState, ...]) -> Select[tuple[bool]]:
    # Built once per set of states: every advance and every batch flush asks it.
    run_id, step_id = bindparam("run_id", type_=String), bindparam("step_id", type_=String)
    return select(or_(*(_first(run_id, step_id, s).is_not(None) for s in states)))


def any_open(session: Session, run_id: str, step_id: str,
             states: Sequence[StepState] = OPEN) -> bool:
    """Whether an item of the step has an attempt in ``states`` (default: pending,
    running or waiting), attempts added in this transaction included."""
    return bool(session.scalar(_any_open(tuple(StepState(s) for s in states)),
                               {"run_id": run_id, "step_id": step_id}))


def open_items(session: Session, run_id: str, step_id: str) -> int:
    """Attempts of a step still pending or running, counted up to one: the callers ask
    whether any is left (0 means the step can settle), and that is an index probe."""
    return int(any_open(session, run_id, step_id, (StepState.PENDING, StepState.RUNNING)))


def _wanting() -> Any:
    def of_steps(*where: Any) -> Any:
        return select(StepRun).where(StepRun.run_id == bindparam("run_id"),
                                     StepRun.step_id.in_(bindparam("steps", expanding=True)),
                                     *where)

    live = StepRun.superseded.is_(False)
    # Three plain index scans, not one OR: a bitmap scan never marks the dead index
    # entries it meets (a wide fan-out leaves one per item in 'running' until VACUUM)
    # and rechecks every one in the table each time; a plain scan marks them once.
    return select(StepRun).from_statement(union_all(
        of_steps(in_state(StepState.RETRYING, StepState.LOST), live),
        of_steps(in_state(StepState.PENDING), live, StepRun.not_before.is_not(None)),
        # ``+ 0 s``: the heartbeat is a filter here, not an index condition, so that the
        # run's own rows (ix_step_runs_run_step_state) are read, not every running row of
        # every run by heartbeat (ix_step_runs_state_heartbeat, with the dead entries
        # every finished item of every recent run left there).
        of_steps(in_state(StepState.RUNNING), StepRun.child_run_id.is_(None),
                 StepRun.heartbeat_at + timedelta(0) < bindparam("dead_before"))))


_WANTING = _wanting()  # built once: every advance of a running step asks it


def wanting(session: Session, run_id: str, steps: Sequence[str],
            dead_before: datetime) -> list[StepRun]:
    """The attempts of ``steps`` that want something of the planner: retrying or lost
    ones without their next attempt, pending ones with a due time (a retry, an agent
    step resumed), running ones (not waiting on a nested run) whose heartbeat stopped
    before ``dead_before``. Only an item's newest attempt is ever pending or running,
    and a retrying or lost one is its newest until the next marks it superseded."""
    found = session.scalars(_WANTING, {"run_id": run_id, "steps": list(steps),
                                       "dead_before": dead_before}).all()
    return sorted(found, key=lambda r: (r.step_id, r.item_index))


def losses(session: Session, run_id: str, rows: Sequence[StepRun]
           ) -> dict[tuple[str, int], int]:
    """How many attempts of these (lost or running) rows' items were lost so far."""
    items = {(r.step_id, r.item_index) for r in rows
             if r.state in (StepState.LOST, StepState.RUNNING)}
    if not items:
        return {}
    found = session.execute(
        select(StepRun.step_id, StepRun.item_index, func.count())
        .where(StepRun.run_id == run_id, in_state(StepState.LOST),
               tuple_(StepRun.step_id, StepRun.item_index).in_(sorted(items)))
        .group_by(StepRun.step_id, StepRun.item_index)).all()
    return {(step, item): int(n) for step, item, n in found}


# Built once: every settling step asks it. Through the state index alone (``+ 0``):
# walking the item-order index for the first failed one could read every item to find
# none.
_FAILED = select(func.count(), func.min(StepRun.item_index + 0)).where(
    StepRun.run_id == bindparam("run_id", type_=String),
    StepRun.step_id == bindparam("step_id", type_=String), in_state(StepState.FAILED))


def failed_items(session: Session, run_id: str, step_id: str) -> tuple[int, StepRun | None]:
    """How many items of the step failed, and the first of them (by item)."""
    count, lowest = session.execute(_FAILED, {"run_id": run_id, "step_id": step_id}).one()
    if not count:
        return 0, None
    return int(count), session.scalars(select(StepRun).where(
        StepRun.run_id == run_id, StepRun.step_id == step_id,
        StepRun.item_index == lowest, in_state(StepState.FAILED))).one()


def state_counts(session: Session, run_ids: Sequence[str]) -> dict[str, int]:
    """The newest attempt's state -> step items, over these runs."""
    rows = session.execute(
        select(StepCount.state, func.sum(StepCount.items))
        .where(StepCount.run_id.in_(list(run_ids))).group_by(StepCount.state)).all()
    return {state: int(n) for state, n in rows if n}


def moved(session: Session, run_id: str, step_id: str, old: str | None, new: str | None,
          n: int = 1) -> None:
    """``n`` items of a step left state ``old`` for ``new`` (None: none, as when an item's
    first attempt is added); written at the commit."""
    if old == new or not n:
        return
    changes = deferred.pending(session, _CHANGES)
    if old is not None:
        changes.append((run_id, step_id, str(old), -n))
    if new is not None:
        changes.append((run_id, step_id, str(new), n))


def moved_rows(session: Session, rows: Sequence[Any], old: str | None, new: str) -> None:
    """Rows with ``run_id`` and ``step_id`` (a RETURNING's) each moved from old to new."""
    by_step = Counter((r.run_id, r.step_id) for r in rows)
    for (run_id, step_id), n in by_step.items():
        moved(session, run_id, step_id, old, new, n)


@deferred.at_commit
def _write(session: Session) -> None:
    """The transaction's changes, as one write after all its others: the counters' locks
    come last, and the statement goes with the COMMIT (shared/db/deferred.py)."""
    changes = deferred.pending(session, _CHANGES)
    if not changes:
        return
    net: Counter[tuple[str, str, str]] = Counter()
    for run_id, step_id, state, n in changes:
        net[(run_id, step_id, state)] += n
    changes.clear()
    values = [(r, s, st, n) for (r, s, st), n in sorted(net.items()) if n]
    if not values:
        return
    # One fixed statement, its rows as arrays in key order: no ORM bulk insert and no
    # compile per commit (they were a large part of a one-step commit's Python).
    runs, steps, states, items = (list(column) for column in zip(*values, strict=True))
    deferred.defer(session, _ADD_COUNTS, {"runs": runs, "steps": steps, "states": states,
                                          "items": items})
