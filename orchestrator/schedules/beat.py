"""`skillq beat`: the one process that fires schedules.

Why not Celery's own beat: its schedulers keep their state in a local shelve file (or
need a Django app), and its entries send a task. A skillq schedule needs its state in
PostgreSQL (every machine sees it), a lock a second beat respects, and a stated policy
for missed runs; starting a run is ``orchestrator.launch.start_run``, the path
`skillq run` takes. So beat is this lean loop; the cron math is Celery's ``crontab``
(shared/cron.py).

The loop: hold the lock (lock.py), then each tick claim and start what is due
(firing.py) and sleep until the earliest next due time, or ``beat_tick_s`` at most (so
schedules added, paused or removed meanwhile are seen within a tick).
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime

from sqlalchemy.exc import SQLAlchemyError

from orchestrator.connect import Connection
from orchestrator.schedules.firing import claim_due, start_firing
from orchestrator.schedules.lock import beat_lock
from orchestrator.schedules.records import earliest_due, now_utc
from shared.db.session import transaction

log = logging.getLogger("skillq.beat")
MIN_SLEEP_S = 0.05


def tick(conn: Connection) -> datetime | None:
    """Fire what is due; the earliest next due time of an unpaused schedule."""
    settings = conn.settings
    url = conn.endpoints.database_url
    with transaction(url) as session:
        firings = claim_due(session, now_utc(), settings.beat_grace_s)
    for firing in firings:
        start_firing(conn, firing, settings.discovery_ttl_s)
    with transaction(url) as session:
        return earliest_due(session)


def sleep_s(next_due: datetime | None, tick_s: float) -> float:
    if next_due is None:
        return tick_s
    return max(MIN_SLEEP_S, min(tick_s, (next_due - now_utc()).total_seconds()))


def run_beat(conn: Connection, *, wait: bool, stop: threading.Event) -> None:
    """Fire schedules until ``stop`` is set (SIGTERM / Ctrl-C)."""
    tick_s = conn.settings.beat_tick_s
    with beat_lock(conn.endpoints.database_url, wait=wait, retry_s=tick_s, stop=stop,
                   say=log.info) as lock:
        if lock is None:
            return
        while not stop.is_set():
            lock.check()
            try:
                next_due = tick(conn)
            except (SQLAlchemyError, OSError) as exc:  # the database away for a moment
                log.error("beat: the schedules could not be read (%s); retrying in %g s",
                          exc, tick_s)
                next_due = None
            stop.wait(sleep_s(next_due, tick_s))
    log.info("beat stopped; the lock is released")
