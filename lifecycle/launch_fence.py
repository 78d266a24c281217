"""The launch fence: a run's first message leaves before the run's record is committed.

Sent after the commit, a one-step run's message waited for the commit's round trip, its
fsync and SQLAlchemy's work at the commit: on the path of every `skillq run`. Instead,
when a launch sends one lone first attempt (``goes_ahead``), it takes the run's fence
(an exclusive transaction-level advisory lock on the run's id, ``hold``), sends the
message, then commits, so the commit overlaps the message's way to the worker. The
lock's statement is on the wire before the message is sent, and its answer is awaited
only after, so the lock's round trip overlaps the send too.

The claim of that attempt waits for the fence, shared, first in its own pipeline
(``queue_wait``): it sets a ``lock_timeout`` and tries the fence in one statement (did a
launch hold it?), waits for it, resets the bound, then asks whether the run is known.
Under READ COMMITTED each later statement of the pipeline reads a snapshot taken after
the lock was granted, so after the launch committed: a claim that came ahead of the
commit waits for it in the same round trip and claims then. One that waited and finds
the run unknown had a launch that rolled back: it finds nothing, as for any message
whose attempt is not there, and the message is dropped. One that found the fence free
and the run unknown came ahead of the lock itself (the lock travels one hop to
PostgreSQL, the message several, so this is rare) or its launch rolled back before: it
waits ``UNSEEN_WAIT_S`` at most for either the fence or the run to show (``wait_seen``),
then claims again. The record is still durable before anyone hears of the result: the
worker records the step only after the launch's commit.

Only a launch takes a fence exclusively, for a run nobody else knows yet, so the claims
of other runs never meet it (two run ids whose hashes collide wait a commit for each
other, no more). A client that stops between its send and its commit holds its fence
until PostgreSQL drops its connection; a claim waits ``WAIT_S`` at most (its
transaction then fails with LockNotAvailable, ``timed_out``), then leaves the attempt
pending, as a lost message, for the sweeper (workers/sweeper.py), which also sends
again an attempt whose message was dropped while its launch was slower than
``UNSEEN_WAIT_S``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.errors import LockNotAvailable
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from shared.attempt_id import AttemptId
from shared.db import libpq
from shared.db.pipelined import begin_command, plain
from shared.db.session import transaction

if TYPE_CHECKING:
    from lifecycle.dispatch import Dispatch

# The two-key form of advisory locks, a key space apart from single-key ones (the
# migrations' and beat's): this class number, then the hash of the run's id.
FENCE_CLASS = 0x5C11
_KEY = "%(fence)s, hashtext(%(run)s)"
_KNOWN = "EXISTS (SELECT 1 FROM pipeline_runs WHERE id = %(run)s)"
_WAIT_SQL = f"SELECT pg_advisory_xact_lock_shared({_KEY})"
# Where a claim's bound keeps the lock_timeout it replaced (a setting of the
# transaction), so that the wait's own statement puts it back once the lock is granted.
_WAS = "skillq.lock_timeout_was"
_SEEN_SQL = f"SELECT NOT pg_try_advisory_xact_lock_shared({_KEY}) OR {_KNOWN}"
# A claim's bound (SET LOCAL's, as a function: its statement also tries the fence, so the
# claim knows whether a launch held it, which costs no statement more). Tried and free,
# the fence is held shared already, and the wait after it returns at once.
_BOUND_SQL = (f"SELECT set_config('{_WAS}', current_setting('lock_timeout'), true), "
              "set_config('lock_timeout', %(bound)s, true), "
              f"pg_try_advisory_xact_lock_shared({_KEY})")
# The wait, then the bound reset in the same statement (a select list is evaluated in
# order): the rest of the transaction waits for its row locks as any does.
_WAIT_RESET_SQL = (f"SELECT pg_advisory_xact_lock_shared({_KEY}), "
                   f"set_config('lock_timeout', current_setting('{_WAS}'), true)")
WAIT_S = 30.0  # a launch holds its fence for a send and a commit: milliseconds
UNSEEN_WAIT_S = 1.0  # for a fence whose lock is behind its message: microseconds
_SEEN_POLL_S = 0.02


def params(run_id: str) -> dict[str, object]:
    return {"fence": FENCE_CLASS, "run": run_id}


def is_lone_first(row_id: str) -> bool:
    """The first attempt of a step's only item ("<run>/<step>/-1/1"): the attempt a
    worker claims with its run's row (workers/claim.py ``_claim_lone``), which is
    the claim that waits for the fence."""
    try:
        attempt = AttemptId.parse(row_id)
    except ValueError:
        return False
    return attempt.item == -1 and attempt.attempt == 1


def goes_ahead(dispatches: Sequence[Dispatch]) -> bool:
    """Whether a launch's messages may leave before its commit: one message of one lone
    first attempt. A wider launch (a fan-out known at launch) sends after the commit,
    so that no claim waits for a commit that is still sending."""
    return (len(dispatches) == 1 and len(dispatches[0].step_run_ids) == 1
            and is_lone_first(dispatches[0].step_run_ids[0]))


@contextmanager
def hold(session: Session, run_id: str) -> Iterator[None]:
    """Take ``run_id``'s fence in the session's transaction, until it ends: its statement
    (with the transaction's BEGIN) is sent before the block runs, and its answer awaited
    as the block ends, so what the block sends (the message) overlaps its round trip.
    Sent as one simple query through libpq (``libpq.send``): psycopg's pipeline costs
    more CPU here, on the path of every one-step run. The block must not use the
    session: its connection awaits that answer meanwhile."""
    with plain(session) as pg:
        libpq.send(pg, "; ".join(filter(None, [begin_command(pg), _hold_sql(run_id)])))
        try:
            yield
        finally:
            libpq.answered(pg, None)


def _hold_sql(run_id: str) -> str:
    """The launch's exclusive lock on the fence, its values in the text (a simple query
    takes no parameters)."""
    return (f"SELECT pg_advisory_xact_lock({FENCE_CLASS}, "
            f"hashtext({libpq.literal(run_id)}))")


@dataclass(frozen=True, slots=True)
class QueuedWait:
    """A claim's wait for its fence, sent in its pipeline: ``read`` once it has synced."""
    free: psycopg.Cursor[Any]
    known: psycopg.Cursor[Any]

    def read(self) -> tuple[bool, bool]:
        """Whether the fence was free when the claim came (no launch held it), and
        whether the run's row was there once the wait was over."""
        free, known = self.free.fetchone(), self.known.fetchone()
        return bool(free and free[2]), bool(known and known[0])


def queue_wait(pg: psycopg.Connection[Any], run_id: str, wait_s: float = WAIT_S
               ) -> QueuedWait:
    """Send, in pipeline ``pg`` and before anything else of its transaction, a wait for
    ``run_id``'s fence bounded by ``wait_s`` (``timed_out`` tells its error)."""
    free = pg.cursor()
    free.execute(_BOUND_SQL, {**params(run_id), "bound": _ms(wait_s)})
    pg.execute(_WAIT_RESET_SQL, params(run_id))
    # A statement of its own: one beside the lock would read the snapshot taken before
    # the lock was granted, when the launch may not have committed yet.
    known = pg.cursor()
    known.execute(f"SELECT {_KNOWN}", params(run_id))
    return QueuedWait(free, known)


def timed_out(exc: BaseException) -> bool:
    """Whether ``exc`` is a fence wait that outlasted its bound."""
    return isinstance(exc, DBAPIError) and isinstance(exc.orig, LockNotAvailable)


def _ms(wait_s: float) -> str:
    return str(max(1, int(wait_s * 1000)))


def wait_open(database_url: str, run_id: str, wait_s: float = WAIT_S) -> bool:
    """Wait until no launch holds ``run_id``'s fence (its transaction committed or rolled
    back); False after ``wait_s``."""
    try:
        with transaction(database_url) as session, plain(session) as pg:
            # SET LOCAL: the bound lasts this transaction only; it takes no parameters.
            pg.execute(f"SET LOCAL lock_timeout = {_ms(wait_s)}")
            pg.execute(_WAIT_SQL, params(run_id))
    except DBAPIError as exc:
        if timed_out(exc):
            return False
        raise
    return True


def wait_seen(database_url: str, run_id: str, wait_s: float = UNSEEN_WAIT_S) -> bool:
    """Wait until ``run_id``'s fence is taken or its run committed (a claim that found
    neither may have come ahead of its launch's lock); False after ``wait_s``: no launch
    of that run is under way, or it is slower than a launch should be."""
    deadline = time.monotonic() + wait_s
    while True:
        with transaction(database_url) as session, plain(session) as pg:
            row = pg.execute(_SEEN_SQL, params(run_id)).fetchone()
        if row is not None and row[0]:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(_SEEN_POLL_S)
