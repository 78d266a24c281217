"""The psycopg connection under a session, in pipeline mode: for what SQLAlchemy cannot
send, several statements in one round trip.

Statements sent inside ``pipelined`` go out together and are answered together as the
block ends; their cursors are read after it. When they are their transaction's first,
the transaction's BEGIN goes first in the same pipeline: psycopg would send it ahead with
a Sync of its own and wait for it, a round trip more (``_begun``). The ORM's UPDATEs stay
outside: its flush checks their row counts, which a pipeline gives only once it syncs
(shared/db/deferred.py lets a flush of INSERTs in). ``plain`` is the same connection
outside a pipeline.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session


@contextmanager
def pipelined(session: Session) -> Iterator[psycopg.Connection[Any]]:
    """The session's psycopg connection in pipeline mode, in the session's transaction.

    Its errors raise as SQLAlchemy raises its own statements' (IntegrityError, a cut
    connection marked invalidated, ...), so callers tell them apart as before; a cut
    connection is invalidated, so the pool never hands it out again."""
    with plain(session) as pg, _begun(pg):
        yield pg


@contextmanager
def _begun(pg: psycopg.Connection[Any]) -> Iterator[None]:
    """A pipeline that opens the transaction itself when none is open yet: psycopg, left
    to it, sends its BEGIN and awaits it alone before the pipeline's statements. Its
    ``_autocommit`` is set for the pipeline's length only (the public setter refuses once
    the transaction is open), so that psycopg sends no BEGIN of its own, and the BEGIN is
    psycopg's own text (isolation level and all). The transaction is then psycopg's as
    ever: committed or rolled back by SQLAlchemy, or by the COMMIT deferred.py sends."""
    begin = begin_command(pg)
    opening = begin is not None
    if opening:
        pg._autocommit = True
    try:
        with pg.pipeline():
            if begin is not None:
                # Queued as psycopg queues its own BEGIN in a pipeline: no cursor, no
                # adaptation (a cursor's execute costs CPU on a claim's path).
                pg.wait(pg._exec_command(begin))
            yield
    finally:
        if opening:
            pg._autocommit = False


def begin_command(pg: psycopg.Connection[Any]) -> str | None:
    """The BEGIN psycopg would send before the next statement (isolation level and
    all), or None when the transaction is open already or ``pg`` autocommits: for
    whoever sends it first in a round trip of its own making."""
    if pg.autocommit or pg.pgconn.transaction_status != TransactionStatus.IDLE:
        return None
    return pg._get_tx_start_command().decode()


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
