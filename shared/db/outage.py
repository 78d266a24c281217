"""Riding out a database outage: which errors are one, and the one retry policy for them.

A restart of PostgreSQL, a failover or a network blip must slow a run, never lose one: a
worker holds a finished result, a claimed message or a planning step and tries again; an
announcement keeps its loop; a waiting client reconnects. Only connection-level failures
are retried (the server is gone, restarting or starting); a bad query or a constraint
violation is not. Backoff is exponential with jitter (tenacity), so clients and workers
cut off together do not retry in step, and an outage is reported once when it starts
and once when it ends, not once per try. The engine's pool pings a connection before
use (shared/db/session.py), so a try after the server is back gets a fresh connection.

A client following a run waits one way wherever it follows from (``FollowingRun``):
`skillq run` and `skillq wait` reading the database themselves (orchestrator/launch.py
wait_run) and the thin client reading it through the local API's long-poll
(orchestrator/cli/run_client.py), which imports this module only once it meets an outage:
so psycopg and SQLAlchemy are imported here only when an error is looked at.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import tenacity

from shared.errors import DatabaseUnreachable

T = TypeVar("T")
log = logging.getLogger(__name__)
FIRST_WAIT_S = 0.25  # then twice as long each time
MAX_WAIT_S = 5.0  # the longest pause between two tries of a worker's record
FOLLOW_WAIT_S = 2.0  # a client following a run sees its end this soon after an outage


def is_outage(exc: BaseException) -> bool:
    """The database could not be reached: refused, cut by a shutdown or a restart, or a
    server still starting. Not a bad query, which no retry would mend."""
    import psycopg
    from sqlalchemy.exc import DBAPIError

    outage = (psycopg.OperationalError, psycopg.InterfaceError)
    if isinstance(exc, DBAPIError):
        return bool(exc.connection_invalidated) or isinstance(exc.orig, outage)
    return isinstance(exc, outage)


def first_line(exc: BaseException) -> str:
    """psycopg's own first line: SQLAlchemy's wrapper adds the SQL and a link."""
    orig = getattr(exc, "orig", None)  # a DBAPIError's (not imported for every error)
    text = str(orig if isinstance(orig, BaseException) else exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


class Outage:
    """Calls that wait for the database, sharing one outage's state.

    ``call`` retries while ``retry_on`` says the error is worth it, waiting FIRST_WAIT_S,
    then twice as long each time, up to ``max_wait_s`` (plus up to FIRST_WAIT_S of
    jitter). ``give_up_s`` after the outage began (None: never), or once ``stop`` is set,
    it raises tenacity.RetryError (``reraise``: the last error itself).
    ``on_down(error)`` hears of an outage once, when it starts (``down`` marks one that a
    plain attempt met); ``on_up(seconds)`` once, when a call succeeds again.
    """

    def __init__(self, *, on_down: Callable[[BaseException], None],
                 on_up: Callable[[float], None], max_wait_s: float,
                 give_up_s: float | None = None,
                 retry_on: Callable[[BaseException], bool] = is_outage,
                 stop: threading.Event | None = None, reraise: bool = False) -> None:
        self.down_since: float | None = None
        self._on_down, self._on_up = on_down, on_up
        self._give_up_s, self._retry_on, self._stop = give_up_s, retry_on, stop
        self._reraise = reraise
        # jitter: clients and workers cut off together do not retry in step
        self._wait = (tenacity.wait_exponential(multiplier=FIRST_WAIT_S, max=max_wait_s)
                      + tenacity.wait_random(0, FIRST_WAIT_S))

    def down(self, exc: BaseException) -> None:
        if self.down_since is None:
            self.down_since = time.monotonic()
            self._on_down(exc)

    def call(self, fn: Callable[[], T]) -> T:
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(self._retry_on), wait=self._wait,
            stop=self._over, before_sleep=self._failed, sleep=self._sleep,
            reraise=self._reraise)
        result = retrying(fn)
        if self.down_since is not None:
            took, self.down_since = time.monotonic() - self.down_since, None
            self._on_up(took)
        return result

    def _sleep(self, seconds: float) -> None:
        if self._stop is None:
            time.sleep(seconds)
        else:
            self._stop.wait(seconds)  # a stopping worker must not sit out a backoff

    def _over(self, _state: tenacity.RetryCallState) -> bool:
        if self._stop is not None and self._stop.is_set():
            return True
        return (self._give_up_s is not None and self.down_since is not None
                and time.monotonic() - self.down_since >= self._give_up_s)

    def _failed(self, state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        if exc is not None:
            self.down(exc)


def through_outage(fn: Callable[[], T], *, limit_s: float, what: str) -> T:
    """``fn()``, called again while the database is unreachable, for up to ``limit_s``;
    then the last error is raised as it was (``is_outage`` tells it apart)."""
    outage = Outage(
        on_down=lambda exc: log.warning("%s: database unreachable (%s); retrying for up "
                                        "to %g s", what, first_line(exc), limit_s),
        on_up=lambda took: log.warning("%s: database reachable again after %.1f s", what,
                                       took),
        max_wait_s=MAX_WAIT_S, give_up_s=limit_s, reraise=True)
    return outage.call(fn)


class FollowingRun(Outage):
    """The one way a client following run ``run_id`` waits out a database outage, read
    directly (wait_run) or through the local API (its answer that the database is
    unreachable: ``retry_on``): ``say`` hears once that the database is unreachable and
    that the client is retrying, once that it is back; a try every FOLLOW_WAIT_S at
    most; after ``bound_s`` (SKILLQ_DATABASE_OUTAGE_S) ``call`` raises
    DatabaseUnreachable, one line naming the run, which goes on without its client."""

    def __init__(self, run_id: str, bound_s: float, say: Callable[[str], None], *,
                 retry_on: Callable[[BaseException], bool] = is_outage) -> None:
        self.run_id, self.bound_s = run_id, bound_s
        super().__init__(
            on_down=lambda exc: say(f"database unreachable ({first_line(exc)}); retrying "
                                    f"for up to {bound_s:g} s (SKILLQ_DATABASE_OUTAGE_S); "
                                    f"run {run_id} goes on meanwhile"),
            on_up=lambda took_s: say(f"database back after {took_s:.0f} s; following run "
                                     f"{run_id} again"),
            max_wait_s=FOLLOW_WAIT_S, give_up_s=bound_s, retry_on=retry_on)

    def call(self, fn: Callable[[], T]) -> T:
        try:
            return super().call(fn)
        except tenacity.RetryError:
            raise DatabaseUnreachable(
                f"the database has been unreachable for {self.bound_s:g} s "
                f"(SKILLQ_DATABASE_OUTAGE_S): stopped waiting for run {self.run_id}, which "
                f"may still finish; `skillq run-show {self.run_id}` once it is back"
            ) from None
