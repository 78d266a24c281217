"""Plain psycopg connections beside SQLAlchemy's pool: LISTEN/NOTIFY and session locks.

A LISTEN, or an advisory lock held for a process's life, needs a connection of its own
that the pool never hands to anyone else; these open one from the same database URL.
"""

from __future__ import annotations

from typing import Any

import psycopg
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
