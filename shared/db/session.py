"""Engines and sessions: one engine per process and URL, created on first use.

Repository functions take a Session; the caller owns the transaction.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import Session, sessionmaker

_engines: dict[str, Engine] = {}
_factories: dict[str, sessionmaker[Session]] = {}
_lock = threading.Lock()


def engine_for(url: str) -> Engine:
    with _lock:
        engine = _engines.get(url)
        if engine is None:
            # Small pools: a prefork worker has one engine per child process.
            engine = create_engine(url, pool_size=2, max_overflow=4, pool_pre_ping=True)
            _engines[url] = engine
            _factories[url] = sessionmaker(engine, expire_on_commit=False)
        return engine


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
