"""Engines and sessions: one engine per process and URL, created on first use.

Repository functions take a Session; the caller owns the transaction.

A connection is pinged before use only when it has sat idle in the pool for
PING_IDLE_S or longer: the transactions of one step (its claim, then its record and its
run's planning) or of one `skillq run` follow each other within milliseconds on a
connection that just worked, and a ping each was a round trip apiece. A connection that
a restart cut within that second fails on its first statement instead: SQLAlchemy marks
it (and every connection the pool held then) invalid, and the callers that ride out
outages (shared/db/outage.py) try again on a fresh one, as after any cut mid-transaction.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

PING_IDLE_S = 1.0  # a connection idle this long is pinged before it is handed out
_IDLE_SINCE = "skillq.idle_since"  # connection record info: when it was last checked in

_engines: dict[str, Engine] = {}
_factories: dict[str, sessionmaker[Session]] = {}
_lock = threading.Lock()


def engine_for(url: str) -> Engine:
    with _lock:
        engine = _engines.get(url)
        if engine is None:
            # Small pools: a prefork worker has one engine per child process.
            engine = create_engine(url, pool_size=2, max_overflow=4)
            _ping_when_idle(engine)
            _engines[url] = engine
            _factories[url] = sessionmaker(engine, expire_on_commit=False)
        return engine


def _ping_when_idle(engine: Engine) -> None:
    """pool_pre_ping, for connections idle PING_IDLE_S or longer only (see above)."""
    dialect = engine.dialect
    dbapi_error: Any = dialect.loaded_dbapi.Error

    def used(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()  # fresh, or handed back working

    def checkout(dbapi_connection: Any, record: ConnectionPoolEntry,
                 proxy: PoolProxiedConnection) -> None:
        since = record.info.get(_IDLE_SINCE)
        if since is not None and time.monotonic() - since < PING_IDLE_S:
            return
        try:
            dialect.do_ping(dbapi_connection)
        except dbapi_error as exc:
            if dialect.is_disconnect(exc, dbapi_connection, None):
                # The pool drops this connection and checks out a fresh one.
                raise DisconnectionError(str(exc)) from exc
            raise

    event.listen(engine, "connect", used)
    event.listen(engine, "checkin", used)
    event.listen(engine, "checkout", checkout)


def dispose_engines() -> None:
    """After fork: a child must not share its parent's connections."""
    with _lock:
        for engine in _engines.values():
            engine.dispose(close=False)
        _engines.clear()
        _factories.clear()


@contextmanager
def transaction(url: str) -> Iterator[Session]:
    """A session whose work commits on success and rolls back on any error."""
    engine_for(url)
    with _factories[url]() as session, session.begin():
        yield session
