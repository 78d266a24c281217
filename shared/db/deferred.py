"""Writes nobody reads back in their transaction, sent with its COMMIT: one round trip.

A transaction's last statements are often writes whose results it never looks at: a
skill's running totals, the step counters, the NOTIFY of a run's end. ``defer`` holds
them in the session, and at the commit they go out in one psycopg pipeline together
with the COMMIT itself, instead of a round trip each and one more for the COMMIT.
Writes that must come last (``at_commit`` producers, run in the order they were
registered) are added then. All of them come after every ORM write of the transaction.
The ORM's writes go in the same pipeline when none needs an answer: INSERTs with nothing
to read back (a new run's row), and UPDATEs of rows this transaction holds FOR UPDATE
(``held``: such an UPDATE cannot miss its row, so its row count, which a pipeline gives
only at its sync and SQLAlchemy checks, needs no check). Those UPDATEs are sent as plain
UPDATEs of the changed columns, and the objects marked as having been written. A row
written once per run (``insert_plainly``: a new run's) is inserted by a plain INSERT of
its columns as the transaction left them, which costs less than the ORM's flush.

What a transaction holds for its commit (its deferred writes, the step counters'
changes) lives in ``pending`` lists, which follow savepoints: what was added inside one
that rolls back is dropped with it, and all of it is gone when the transaction ends.

SQLAlchemy's own commit then finds the connection idle, where psycopg's commit() does
nothing. A failure anywhere in the pipeline raises before the commit is acknowledged,
as SQLAlchemy's own error (shared/db/pipelined.py), and SQLAlchemy rolls back as after
any failed COMMIT.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from sqlalchemy import JSON, event, inspect
from sqlalchemy.orm import Session, SessionTransaction, make_transient_to_detached
from sqlalchemy.orm.attributes import set_committed_value

from shared.db.pipelined import pipelined
from shared.db.txn_context import context, drop_pending

_WRITES = "skillq.deferred"  # the pending list of (sql, params) to send
_HELD = "skillq.held"  # the pending list of identity keys of rows locked FOR UPDATE
_PLAIN = "skillq.plain_inserts"  # the pending list of new objects to INSERT by plain SQL
_producers: list[Callable[[Session], None]] = []


def pending(session: Session, key: str) -> list[Any]:
    """The session's list under ``key``, held for this transaction's commit."""
    return context(session).pending.setdefault(key, [])


def defer(session: Session, sql: str, params: Mapping[str, Any]) -> None:
    """Send ``sql`` (psycopg's ``%(name)s`` parameters) with this transaction's COMMIT."""
    pending(session, _WRITES).append((sql, dict(params)))


def notify(session: Session, channel: str, payload: str) -> None:
    """NOTIFY ``channel`` with ``payload``, sent with this transaction's COMMIT (a NOTIFY
    is delivered at the commit anyway)."""
    defer(session, _NOTIFY, {"channel": channel, "payload": payload})


_NOTIFY = "SELECT pg_notify(%(channel)s, %(payload)s)"


def held(session: Session, obj: object) -> None:
    """``obj``'s row is locked FOR UPDATE by this transaction (from now until it ends, or
    a savepoint begun before rolls back, which releases the lock too)."""
    pending(session, _HELD).append(inspect(obj).identity_key)


def insert_plainly(session: Session, obj: object) -> None:
    """``obj``, new in the session, is inserted at the commit by a plain INSERT of its
    columns as they are then, in the commit's pipeline, rather than by the ORM's flush
    (a row written once, such as a new run's: the ORM's flush of it is a large part of
    the commit). No other new row may need to be inserted before it."""
    pending(session, _PLAIN).append(obj)


def at_commit(producer: Callable[[Session], None]) -> Callable[[Session], None]:
    """Register ``producer`` to ``defer`` the writes that come last, at every commit."""
    _producers.append(producer)
    return producer


@event.listens_for(Session, "before_commit")
def _send(session: Session) -> None:
    if session.in_nested_transaction():
        # A savepoint's release, not the commit: SQLAlchemy fires this for both, and
        # the writes (and the COMMIT) wait for the transaction's own.
        return
    updates = _pipelinable(session)
    if updates is None:
        session.flush()  # the ORM's writes go first, on their own: it reads row counts
    for produce in _producers:
        produce(session)
    writes: list[tuple[str, dict[str, Any]]] = list(pending(session, _WRITES))
    pending(session, _WRITES).clear()
    if not writes and not (updates or (updates is not None and session.new)):
        return
    with pipelined(session) as pg:
        if updates is not None:
            for obj in pending(session, _PLAIN):
                if obj in session.new:  # not flushed by the ORM meanwhile
                    pg.execute(*_plain_insert(obj))
                    _persisted(session, obj)
            _update_held(session, pg, updates)
            session.flush()  # INSERTs only now, with nothing to read back
        for sql, params in writes:
            pg.execute(sql, params)
        # As a statement, answered at the pipeline's closing Sync: psycopg's commit()
        # syncs on its own, and leaving the pipeline would then sync again, one more
        # round trip. The connection is idle after it, where commit() does nothing.
        pg.execute("COMMIT")


def _pipelinable(session: Session) -> list[object] | None:
    """The changed objects to UPDATE in the pipeline, when the session's whole flush can
    go there (INSERTs of rows whose mapper reads nothing back: ``eager_defaults`` off,
    their keys given; UPDATEs of ``held`` rows); None when it cannot."""
    if session.deleted:
        return None
    for obj in session.new:
        mapper = inspect(type(obj))
        if mapper.eager_defaults is not False or None in mapper.primary_key_from_instance(obj):
            return None
    changed = [obj for obj in session.dirty if session.is_modified(obj)]
    if changed:
        locked = set(pending(session, _HELD))
        if any(inspect(obj).identity_key not in locked for obj in changed):
            return None
    return changed


def _plain_insert(obj: object) -> tuple[str, dict[str, Any]]:
    """The INSERT of ``obj``'s set columns, as psycopg takes it."""
    state = inspect(obj)
    params: dict[str, Any] = {}
    for prop in state.mapper.column_attrs:
        if prop.key in state.dict:
            column = prop.columns[0]
            params[column.name] = _plain(column, state.dict[prop.key])
    names = ", ".join(params)
    marks = ", ".join(f"%({name})s" for name in params)
    return (f"INSERT INTO {state.mapper.local_table.name} ({names}) "  # noqa: S608 - the model's own names
            f"VALUES ({marks})", params)


def _plain(column: Any, value: Any) -> Any:
    """A column's value as psycopg takes it: JSON as Jsonb (None as JSON null, as the ORM
    stores it), an enum as its value (psycopg would send its name)."""
    if isinstance(column.type, JSON):
        return Jsonb(value)
    return value.value if isinstance(value, Enum) else value


def _persisted(session: Session, obj: object) -> None:
    """``obj`` as the ORM holds a row it has written: persistent, nothing to flush (its
    unset columns, the database's defaults, are read when first used)."""
    session.expunge(obj)
    make_transient_to_detached(obj)
    session.add(obj)


def _update_held(session: Session, pg: psycopg.Connection[Any], objs: list[object]) -> None:
    """A plain UPDATE of each held object's changed columns (what its flush would write;
    a Core UPDATE cost its compilation's cache key, over the values, at every commit),
    then the objects marked written."""
    for obj in objs:
        state = inspect(obj)
        mapper = state.mapper
        # Set since the row was loaded (or last written): what the flush would send. An
        # attribute set to the value it had is written again, which changes nothing.
        changed = [prop for prop in mapper.column_attrs if prop.key in state.committed_state]
        if not changed:
            continue
        params = {f"v{i}": _plain(prop.columns[0], state.dict.get(prop.key))
                  for i, prop in enumerate(changed)}
        keys = {f"k{i}": key for i, key in enumerate(mapper.primary_key_from_instance(obj))}
        columns = ", ".join(f"{prop.columns[0].name} = %(v{i})s"
                            for i, prop in enumerate(changed))
        where = " AND ".join(f"{column.name} = %(k{i})s"
                             for i, column in enumerate(mapper.primary_key))
        pg.execute(f"UPDATE {mapper.local_table.name} SET {columns} "  # noqa: S608 - the model's own names
                   f"WHERE {where}", {**params, **keys})
        for prop in changed:  # written: nothing left for the ORM's flush
            set_committed_value(obj, prop.key, state.dict.get(prop.key))
        if not state.committed_state:
            # Clean, as after a flush: else the ORM's commit flushes once more, to find
            # nothing to write (wasted CPU at every lone cache hit's commit).
            state._commit_all(state.dict, session.identity_map)


@event.listens_for(Session, "after_commit")
def _all_sent(session: Session) -> None:
    if not session.in_nested_transaction() and pending(session, _WRITES):
        # Committed with a savepoint still open (the transaction's own commit then comes
        # first, with the savepoint's): what was deferred was never sent.
        raise RuntimeError("deferred writes were not sent: the transaction committed with "
                           "a savepoint still open; close it first")


@event.listens_for(Session, "after_transaction_create")
def _savepoint(session: Session, transaction: SessionTransaction) -> None:
    if transaction.nested:
        txn = context(session)
        txn.saved[transaction] = {key: len(items) for key, items in txn.pending.items()}


@event.listens_for(Session, "after_soft_rollback")
def _rolled_back(session: Session, previous: SessionTransaction) -> None:
    if not previous.nested:
        return
    txn = context(session)
    if previous in txn.saved:
        at_start = txn.saved.pop(previous)
        for key, items in txn.pending.items():
            del items[at_start.get(key, 0):]


@event.listens_for(Session, "after_transaction_end")
def _ended(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None and not transaction.nested:
        drop_pending(session)  # committed (sent), rolled back or closed
