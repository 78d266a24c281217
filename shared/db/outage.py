"""Waiting out a database outage: which errors are one, and retrying a call through it.

(Rebuilt from its call sites in workers/ after it was overwritten by mistake: check it
against the original.)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

import psycopg
import tenacity
from sqlalchemy.exc import DBAPIError

log = logging.getLogger(__name__)

T = TypeVar("T")


def is_outage(exc: BaseException) -> bool:
    """The database could not be reached: refused, cut by a shutdown or a restart, or a
    server still starting. Not a bad query, which no retry would mend."""
    if isinstance(exc, DBAPIError):
        return bool(exc.connection_invalidated) or isinstance(exc.orig, psycopg.OperationalError)
    return isinstance(exc, psycopg.OperationalError)


def through_outage(fn: Callable[[], T], *, limit_s: float, what: str) -> T:
    """fn(), retried with backoff while the database is unreachable, for up to limit_s;
    then the last error is raised as it was (``is_outage`` tells it apart)."""

    def failed(state: tenacity.RetryCallState) -> None:
        if state.attempt_number == 1:  # once per outage, not once per attempt
            exc = state.outcome.exception() if state.outcome is not None else None
            log.warning("%s: database unreachable (%s); retrying for up to %g s",
                        what, exc, limit_s)

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception(is_outage),
        wait=tenacity.wait_exponential_jitter(initial=0.25, max=5.0, jitter=0.25),
        stop=tenacity.stop_after_delay(limit_s), before_sleep=failed, reraise=True)
    result = retrying(fn)
    if retrying.statistics.get("attempt_number", 1) > 1:
        log.warning("%s: database reachable again", what)
    return result
