"""One LISTEN connection for the whole API, waking the long-polls whose run just ended.

The planner NOTIFYs ``skillq_run_done`` at a run's final commit, its payload's first
line the run id (lifecycle/run_end_notice.py), so a `skillq run` following through the
API learns the end within a millisecond or two rather than at its next poll. A long-poll
registers its wake-up before it reads the record, so an end between the two is never
missed. Should the connection break, every waiter is woken (it reads the record again)
and the listener reconnects as every client of the database does (shared/db/outage.py:
backoff, said once when it is lost and once when it is back), waking them again then:
the polls still see every end, a little later.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import psycopg
import tenacity

from lifecycle.run_end_notice import RUN_DONE_CHANNEL, run_of
from shared.db import libpq
from shared.db.outage import Outage, first_line

log = logging.getLogger(__name__)
RECONNECT_S = 1.0  # the longest pause between two tries to reconnect
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
        outage = Outage(
            on_down=lambda exc: log.warning("run-end listener lost its connection (%s); "
                                            "reconnecting", first_line(exc)),
            on_up=lambda took_s: log.warning("run-end listener reconnected after %.1f s",
                                             took_s),
            max_wait_s=RECONNECT_S, retry_on=lambda _exc: True, stop=self._stop)
        first = True
        while not self._stop.is_set():
            try:
                pg: psycopg.Connection[Any] = outage.call(
                    lambda: libpq.listening(self._database_url, RUN_DONE_CHANNEL))
            except tenacity.RetryError:  # stopped meanwhile
                return
            if not first:
                self._wake(None)  # an end while it was away: read the records again
            first = False
            try:
                while not self._stop.is_set():
                    for note in pg.notifies(timeout=LISTEN_SLICE_S):
                        self._wake(run_of(note.payload))
            except Exception as exc:  # an outage: the polls carry on reading records
                outage.down(exc)
                self._wake(None)
            finally:
                with contextlib.suppress(Exception):
                    pg.close()
