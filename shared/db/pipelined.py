"""The psycopg connection under a session, in pipeline mode: for what SQLAlchemy cannot
send, several statements in one round trip.

Statements sent inside ``pipelined`` go out together and are answered together as the
block ends; their cursors are read after it. When they are their transaction's first,
psycopg sends its BEGIN ahead, with a Sync of its own, and waits for it: one round trip
more. The ORM's UPDATEs stay outside: its flush checks their row counts, which a
pipeline gives only once it syncs (shared/db/deferred.py lets a flush of INSERTs in).
``plain`` is the same connection outside a pipeline.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session


@contextmanager
def pipelined(session: Session) -> Iterator[psycopg.Connection[Any]]:
    """The session's psycopg connection in pipeline mode, in the session's transaction.

    Its errors raise as SQLAlchemy raises its own statements' (IntegrityError, a cut
    connection marked invalidated, ...), so callers tell them apart as before; a cut
    connection is invalidated, so the pool never hands it out again."""
    with plain(session) as pg, pg.pipeline():
        yield pg


@contextmanager
def plain(session: Session) -> Iterator[psycopg.Connection[Any]]:
    """The session's psycopg connection as it is, in the session's transaction: for a
    hot statement SQLAlchemy's execution would cost several times what psycopg's does.
    Errors raise as ``pipelined``'s do."""
    connection = session.connection()
    pg: psycopg.Connection[Any] = connection.connection.driver_connection  # type: ignore[assignment]
    try:
        yield pg
    except psycopg.Error as exc:
        cut = isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
        if cut:
            connection.invalidate(exc)
        raise DBAPIError.instance(None, None, exc, psycopg.Error,
                                  connection_invalidated=cut) from exc
