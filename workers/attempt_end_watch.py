"""A cancelled attempt ends where it runs: its worker notices and ends its processes.

`skillq cancel` (lifecycle/tasks.py ``cancel``) records the run's running attempts
cancelled in PostgreSQL, from any machine; the worker running one learns so here. While
a message's attempts run, a thread of the pool process reads their states every
``POLL_S``. One found cancelled has its processes killed by the tag in their environment
(STEP_MARKER, through /proc: sandboxed or not, in a new session or not), so the executor
sees its command end and the attempt's end (workers/attempt_end.py) sweeps what is left;
a batch's items not yet started are skipped. Its record is never touched: the
cancellation is already recorded, and ``finish_attempt`` refuses a row that is not
running.

The record decides, not a message: a redelivered message of a cancelled attempt claims
nothing (the claim wants a pending attempt of a run that has not ended), and a worker
that restarts has nothing of it left to stop (the pool-loss handler killed its processes
by tag). Polling costs one indexed read per ``POLL_S`` per busy pool process, and
nothing for a message done sooner than that.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Set
from contextlib import contextmanager

from sqlalchemy import select

from shared.db.models import StepRun
from shared.db.session import transaction
from shared.states import StepState
from workers.attempt_end import STEP_MARKER
from workers.proc_tags import kill_tagged

POLL_S = 0.5  # a cancelled step's processes are gone this soon (plus a /proc scan)
log = logging.getLogger(__name__)


@contextmanager
def watch_cancelled(database_url: str, step_run_ids: Set[str],
                    every_s: float = POLL_S) -> Iterator[Set[str]]:
    """Watch ``step_run_ids`` (a live set, as the heartbeat's) while the block runs;
    yields the live set of those found cancelled, their processes killed already."""
    cancelled: set[str] = set()
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(every_s):
            try:
                watched = [i for i in list(step_run_ids) if i not in cancelled]
                if not watched:
                    continue
                with transaction(database_url) as session:
                    found = session.scalars(select(StepRun.id).where(
                        StepRun.id.in_(watched),
                        StepRun.state == StepState.CANCELLED.value)).all()
                for row_id in found:
                    cancelled.add(row_id)  # before the kill: the runner skips its record
                    killed = kill_tagged(STEP_MARKER, row_id)
                    log.info("step %s was cancelled: stopped %d process(es)", row_id,
                             len(killed))
            except Exception:  # noqa: S112 - a set changed mid-copy, the database away:
                continue  # the next tick looks again

    thread = threading.Thread(target=poll, name="skillq-cancel-watch", daemon=True)
    thread.start()
    try:
        yield cancelled
    finally:
        stop.set()
        thread.join(timeout=every_s + 1)
