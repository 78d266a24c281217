"""LISTEN connections for run ends, kept between waits in one process.

A waiting client (`skillq run`, the MCP server, `skillq ask`, a benchmark) needs a
connection LISTENing on the channels of run ends and of their files. Opening one costs a
backend's start and a password exchange (a real part of a one-step run), so a
finished wait hands its connection back here and the next wait takes it. An idle
connection is kept UNLISTENed: a listener nobody reads would have the server queue run
ends for it without end.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg

from shared.db import libpq

MAX_IDLE = 4  # per database URL: the waits a busy MCP server runs at once

_lock = threading.Lock()
_idle: dict[str, list[psycopg.Connection[Any]]] = {}


def take(database_url: str, channels: tuple[str, ...]) -> psycopg.Connection[Any]:
    """A connection LISTENing on ``channels``: a kept one if it still answers, else new."""
    return take_reading(database_url, channels, None)[0]


def take_reading(database_url: str, channels: tuple[str, ...], then: str | None
                 ) -> tuple[psycopg.Connection[Any], list[tuple[Any, ...]]]:
    """A connection LISTENing on ``channels`` (a kept one if it still answers, else new),
    and the rows of ``then`` (a simple query: its values in its text) read once the
    LISTEN is in effect, in the same round trip: what a waiter checks after it begins
    listening costs no round trip of its own."""
    with _lock:
        kept = _idle.get(database_url)
        pg = kept.pop() if kept else None
    if pg is not None:
        try:
            return pg, _listen(pg, channels, then)
        except psycopg.Error:  # the server restarted or dropped it while it sat here
            pg.close()
    pg = libpq.connect(database_url)
    try:
        return pg, _listen(pg, channels, then)
    except BaseException:
        pg.close()
        raise


def _listen(pg: psycopg.Connection[Any], channels: tuple[str, ...], then: str | None
            ) -> list[tuple[Any, ...]]:
    if then is None:
        pg.execute(libpq.listen_to(channels))
        return []
    # Committed before ``then`` runs: what it reads, a NOTIFY committed later is heard.
    with pg.cursor() as cur:
        cur.execute(f"BEGIN; {libpq.listen_to(channels)}; COMMIT; {then}")
        while cur.nextset():
            pass
        return list(cur.fetchall())


def give_back(database_url: str, pg: psycopg.Connection[Any]) -> None:
    """Keep ``pg`` for the next wait, or close it if it is broken or enough are kept."""
    if pg.closed:
        return
    try:
        pg.execute("UNLISTEN *")
    except psycopg.Error:
        pg.close()
        return
    with _lock:
        kept = _idle.setdefault(database_url, [])
        if len(kept) < MAX_IDLE:
            kept.append(pg)
            return
    pg.close()


def close_all() -> None:
    """Close every kept connection (tests, and a process that is done with the database)."""
    with _lock:
        kept = [pg for pgs in _idle.values() for pg in pgs]
        _idle.clear()
    for pg in kept:
        pg.close()
