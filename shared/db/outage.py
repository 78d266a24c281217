"""Riding out a database outage: which errors are one, and the one retry policy for them.

A restart of PostgreSQL, a failover or a network blip must slow a run, never lose one: a
worker holds a finished result, a claimed message or a planning step and tries again; an
announcement keeps its loop; a waiting client reconnects. Only connection-level failures
are retried (the server is gone, restarting or starting); a bad query or a constraint
violation is not. Backoff is exponential with jitter (tenacity), so clients and workers
cut off together do not retry in step, and an outage is reported once when it starts
and once when it ends, not once per try. The engine's pool pings a connection before
use (shared/db/session.py), so a try after the server is back gets a fresh connection.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import psycopg
import tenacity
from sqlalchemy.exc import DBAPIError

T = TypeVar("T")
log = logging.getLogger(__name__)
FIRST_WAIT_S = 0.25  # then twice as long each time
MAX_WAIT_S = 5.0  # the longest pause between two tries of a worker's record
_OUTAGE = (psycopg.OperationalError, psycopg.InterfaceError)


def is_outage(exc: BaseException) -> bool:
    """The database could not be reached: refused, cut by a shutdown or a restart, or a
    server still starting. Not a bad query, which no retry would mend."""
    if isinstance(exc, DBAPIError):
        return bool(exc.connection_invalidated) or isinstance(exc.orig, _OUTAGE)
    return isinstance(exc, _OUTAGE)


def first_line(exc: BaseException) -> str:
    """psycopg's own first line: SQLAlchemy's wrapper adds the SQL and a link."""
    text = str(exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc)
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
