"""Only one beat: a PostgreSQL advisory lock held on a dedicated connection.

The lock lives as long as the connection: a beat that exits, crashes or is killed -9
closes it and PostgreSQL releases the lock at once; a beat whose machine vanishes is
dropped by the server's TCP keepalives (set on this session: about 25 s). A second beat
waits, retrying every ``retry_s``, and says once who holds the lock; it takes over as
soon as the holder is gone. Every tick the holder checks its connection still answers:
if not, the lock may be someone else's now, so it stops (a supervisor restarts it).
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from shared.db import libpq
from shared.errors import ScheduleError

BEAT_LOCK_ID = 0x5C11BEA  # an advisory-lock number owned by `skillq beat` (< 2**31)
# Server-side keepalives: a beat on a machine that vanished loses the lock in ~25 s.
KEEPALIVE_OPTIONS = ("-c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 "
                     "-c tcp_keepalives_count=3")


class BeatLock:
    def __init__(self, pg: psycopg.Connection[Any]) -> None:
        self._pg = pg

    def check(self) -> None:
        """Raise ScheduleError when the lock's connection no longer answers."""
        try:
            self._pg.execute("select 1")
        except psycopg.Error as exc:
            raise ScheduleError("beat lost its lock (the database connection closed: "
                                f"{exc}); stopping so that only one beat fires "
                                "schedules; restart it") from exc


def holder(pg: psycopg.Connection[Any]) -> str:
    """Who holds the lock, as its session named itself (host, pid, since when)."""
    row = pg.execute(
        "select a.application_name, a.client_addr, a.backend_start from pg_locks l "
        "join pg_stat_activity a on a.pid = l.pid where l.locktype = 'advisory' "
        "and l.classid = 0 and l.objid = %s and l.granted", (BEAT_LOCK_ID,)).fetchone()
    if row is None:
        return "another beat (gone since)"
    name, addr, since = row
    return f"{name or 'another session'} (from {addr or 'local socket'}, since {since:%c})"


@contextmanager
def beat_lock(database_url: str, *, wait: bool, retry_s: float, stop: threading.Event,
              say: Callable[[str], None]) -> Iterator[BeatLock | None]:
    """Hold the beat lock for the ``with`` body; None if ``stop`` was set while waiting.

    With ``wait`` False a held lock raises ScheduleError naming the holder.
    """
    name = f"skillq-beat {socket.gethostname()} pid {os.getpid()}"
    with libpq.connect(database_url, application_name=name, options=KEEPALIVE_OPTIONS) as pg:
        told = False
        while True:
            got = pg.execute("select pg_try_advisory_lock(%s)", (BEAT_LOCK_ID,)).fetchone()
            if got and got[0]:
                break
            who = holder(pg)
            if not wait:
                raise ScheduleError(f"another beat is active: {who}. Only one beat fires "
                                    "schedules; stop it first, or start this one without "
                                    "--exit-if-locked to wait and take over")
            if not told:
                say(f"another beat is active: {who}; waiting to take over (retrying every "
                    f"{retry_s:g} s)")
                told = True
            if stop.wait(retry_s):
                yield None
                return
        say(f"holding the beat lock as '{name}'")
        yield BeatLock(pg)
