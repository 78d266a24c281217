"""LISTEN connections for run ends, kept between waits in one process.

A waiting client (`skillq run`, the MCP server, `skillq ask`, a benchmark) needs a
connection LISTENing on the channels of run ends and of their files. Opening one costs a
backend's start and a password exchange (~2.6 ms, a tenth of a one-step run), so a
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
    with _lock:
        kept = _idle.get(database_url)
        pg = kept.pop() if kept else None
    if pg is not None:
        try:
            pg.execute(libpq.listen_to(channels))
            return pg
        except psycopg.Error:  # the server restarted or dropped it while it sat here
            pg.close()
    return libpq.listening(database_url, *channels)


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
