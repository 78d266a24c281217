"""One LISTEN connection for the whole API, waking the long-polls whose run just ended.

The planner NOTIFYs ``skillq_run_done`` at a run's final commit, its payload's first
line the run id (lifecycle/run_end_notice.py), so a `skillq run` following through the
API learns the end within a millisecond or two rather than at its next poll. A long-poll
registers its wake-up before it reads the record, so an end between the two is never
missed. Should the connection break, every waiter is woken (it reads the record again)
and the listener reconnects: the polls still see every end, a little later.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import psycopg

from lifecycle.run_end_notice import RUN_DONE_CHANNEL, run_of
from shared.db import libpq

log = logging.getLogger(__name__)
RECONNECT_S = 1.0
LISTEN_SLICE_S = 1.0  # how soon a stop() is noticed


class RunEnds:
    def __init__(self, database_url: str) -> None:
        self._database_url = database_url
        self._waiters: defaultdict[str, set[threading.Event]] = defaultdict(set)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, name="run-ends", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=LISTEN_SLICE_S + 1)

    @contextlib.contextmanager
    def watch(self, run_id: str) -> Iterator[threading.Event]:
        """An event set when run ``run_id`` ends (or the listener lost its connection)."""
        event = threading.Event()
        with self._lock:
            self._waiters[run_id].add(event)
        try:
            yield event
        finally:
            with self._lock:
                self._waiters[run_id].discard(event)
                if not self._waiters[run_id]:
                    del self._waiters[run_id]

    def _wake(self, run_id: str | None) -> None:
        with self._lock:
            events = [e for rid, found in self._waiters.items() if run_id in (None, rid)
                      for e in found]
        for event in events:
            event.set()

    def _listen(self) -> None:
        while not self._stop.is_set():
            pg: psycopg.Connection[Any] | None = None
            try:
                pg = libpq.listening(self._database_url, RUN_DONE_CHANNEL)
                while not self._stop.is_set():
                    for note in pg.notifies(timeout=LISTEN_SLICE_S):
                        self._wake(run_of(note.payload))
            except Exception as exc:  # an outage: the polls carry on reading records
                log.warning("run-end listener lost its connection (%s); reconnecting",
                            type(exc).__name__)
                self._wake(None)
                self._stop.wait(RECONNECT_S)
            finally:
                if pg is not None:
                    with contextlib.suppress(Exception):
                        pg.close()
