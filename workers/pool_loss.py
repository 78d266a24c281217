"""A pool process died holding a step: its step runs again now, not after a queue's wait.

Celery hands the message of a dead pool process back to the broker
(``task_reject_on_worker_lost``), at the back of its queue: behind a fan-out's backlog the
step would wait for every message ahead of it. The worker's main process learns of the
death at once (its Request's ``on_failure`` with WorkerLostError), so it ends the attempt
there: kills what the step started, removes its scratch folder, records the attempt
lost, and lets the planner send the next attempt ahead of the queue (canvas: urgent).
The requeued message, when it comes, finds the attempt settled and does nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from billiard.exceptions import WorkerLostError
from celery import Celery
from celery.worker.request import Request

from lifecycle import transitions
from lifecycle.context import current
from lifecycle.tasks import advance_run
from shared.attempt_id import AttemptId
from shared.db.outage import through_outage
from shared.db.session import transaction
from workers import attempt_end

log = logging.getLogger(__name__)


def step_ids(args: Sequence[Any]) -> list[str]:
    """The attempt ids a step message carries: one id, or a batch's list."""
    if not args:
        return []
    first = args[0]
    return [str(i) for i in first] if isinstance(first, list) else [str(first)]


def handle_loss(app: Celery, ids: Sequence[str], pid: int, why: str) -> list[str]:
    """End the attempts ``ids`` that process ``pid`` was running; the ids declared lost."""
    for row_id in ids:
        attempt_end.end(row_id, by_tag=True)
    ctx = current()

    def record() -> tuple[list[str], set[str]]:
        with transaction(ctx.database_url) as session:
            lost = transitions.lose_process(
                session, ids, pid, f"its worker process (pid {pid}) died: {why}; "
                "re-dispatched")
            runs = {AttemptId.parse(row_id).run_id for row_id in lost}
        return lost, runs

    lost, runs = through_outage(record, limit_s=ctx.settings.database_outage_s,
                                what="recording a lost step")
    for run_id in sorted(runs):
        advance_run(app, ctx, run_id)
    return lost


class StepRequest(Request):
    """The step tasks' request in the worker's main process: a pool death is handled."""

    def on_failure(self, exc_info: Any, send_failed_event: bool = True,
                   return_ok: bool = False) -> None:
        super().on_failure(exc_info, send_failed_event=send_failed_event, return_ok=return_ok)
        exc = getattr(exc_info.exception, "exc", exc_info.exception)
        pid = int(self.worker_pid) if self.worker_pid else None
        if not isinstance(exc, WorkerLostError) or pid is None:
            return
        ids, app = step_ids(self.args), self.task.app

        def work() -> None:
            try:
                handle_loss(app, ids, pid, str(exc))
            except Exception:  # the requeued message and the watchdog remain
                log.exception("handling the death of pool process %s failed", pid)

        # Off the event loop: the database may be slow, and the worker must go on
        # consuming meanwhile.
        threading.Thread(target=work, name="skillq-pool-loss", daemon=True).start()
