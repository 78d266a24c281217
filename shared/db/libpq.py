"""Plain psycopg connections beside SQLAlchemy's pool: LISTEN/NOTIFY and session locks.

A LISTEN, or an advisory lock held for a process's life, needs a connection of its own
that the pool never hands to anyone else; these open one from the same database URL.
"""

from __future__ import annotations

import re
import select
import time
from typing import Any

import psycopg
from psycopg import pq, sql
from sqlalchemy.engine import make_url


def dsn(database_url: str) -> str:
    """The libpq connection string for a SQLAlchemy URL (``postgresql+psycopg://...``)."""
    url = make_url(database_url).set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


def connect(database_url: str, *, connect_timeout_s: float | None = None,
            **kwargs: Any) -> psycopg.Connection[Any]:
    """An autocommit connection of its own (not the pool's)."""
    if connect_timeout_s is not None:
        kwargs["connect_timeout"] = max(1, round(connect_timeout_s))
    return psycopg.connect(dsn(database_url), autocommit=True, **kwargs)


_PLAIN = re.compile(r"[A-Za-z0-9_.-]{1,200}")  # an id of ours (a run's, a step's)


def literal(value: str) -> str:
    """``value`` as an SQL string literal, for a simple query (which takes no
    parameters): an id of ours as it is, anything else quoted by psycopg (as E'...',
    whatever the server's standard_conforming_strings)."""
    return f"'{value}'" if _PLAIN.fullmatch(value) else sql.Literal(value).as_string(None)


def listen_to(channels: tuple[str, ...]) -> str:
    """The LISTEN statements for ``channels``, as one simple query."""
    return "; ".join(f"LISTEN {channel}" for channel in channels)


def listening(database_url: str, *channels: str, connect_timeout_s: float | None = None
              ) -> psycopg.Connection[Any]:
    """A connection LISTENing on ``channels`` (fixed identifiers of ours, never input),
    in one round trip."""
    pg = connect(database_url, connect_timeout_s=connect_timeout_s)
    try:
        pg.execute(listen_to(channels))
    except BaseException:
        pg.close()
        raise
    return pg


def send(pg: psycopg.Connection[Any], sql: str) -> None:
    """Send ``sql`` (a simple query: no parameters, several statements allowed) on
    ``pg`` without awaiting its answer, so that its round trip overlaps the caller's
    work; ``answered`` reads the answer, and nothing else may use ``pg`` before it has.
    Cheaper than psycopg's pipeline for a statement or two (no cursor, no adaptation).
    Raises psycopg.OperationalError when the connection is cut."""
    pgconn = pg.pgconn
    pgconn.send_query(sql.encode())
    while pgconn.flush():  # a small query fits the socket's buffer: rarely loops
        _ready(pgconn, select.POLLOUT, None)


def answered(pg: psycopg.Connection[Any], timeout_s: float | None) -> bool:
    """Whether the query ``send`` sent on ``pg`` has been answered, waiting up to
    ``timeout_s`` (None: until it is; 0: only what has arrived). Its results are read
    and dropped; a notification that came with them is kept for ``pg.notifies()``, as
    psycopg keeps one that arrives during a query. Raises psycopg.OperationalError when
    a statement failed (after reading the whole answer, so that the connection is ready
    for a rollback) or the connection is cut."""
    pgconn = pg.pgconn
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    failed: str | None = None
    while True:
        pgconn.consume_input()
        while n := pgconn.notifies():
            if pgconn.notify_handler:
                pgconn.notify_handler(n)
        while not pgconn.is_busy():
            result = pgconn.get_result()
            if result is None:
                if failed is not None:
                    raise psycopg.OperationalError(failed)
                return True
            if result.status == pq.ExecStatus.FATAL_ERROR and failed is None:
                failed = (result.error_message or b"").decode(errors="replace").strip()
        left_s = None if deadline is None else deadline - time.monotonic()
        if left_s is not None and left_s <= 0:
            return False
        _ready(pgconn, select.POLLIN, left_s)


def _ready(pgconn: pq.abc.PGconn, events: int, timeout_s: float | None) -> None:
    poller = select.poll()  # not select(): a busy process may hold descriptors past 1024
    poller.register(pgconn.socket, events)
    poller.poll(None if timeout_s is None else max(0, int(timeout_s * 1000) + 1))
