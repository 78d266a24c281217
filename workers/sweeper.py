"""Every worker's safety net: wake runs that a dead worker left behind.

A run's watchdog is a delayed message, and a worker holds delayed messages in memory:
if that worker dies, the watch is gone until the broker's visibility timeout. So each
worker's main process also looks, every half of SKILLQ_DEAD_AFTER_S, for steps whose
heartbeat stopped and runs whose watch is overdue, and asks the planner to advance
them (advancing is idempotent, so several workers doing it is harmless).
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta

from celery import Celery
from kombu.exceptions import OperationalError
from sqlalchemy import select, union

from lifecycle import canvas
from shared.db.models import PipelineRun, StepRun
from shared.db.outage import first_line, is_outage
from shared.db.session import transaction
from shared.settings import Settings
from shared.states import RunState, StepState

log = logging.getLogger(__name__)


def stalled_runs(database_url: str, dead_after_s: float) -> list[str]:
    cutoff = datetime.now(UTC) - timedelta(seconds=dead_after_s)
    with transaction(database_url) as session:
        query = union(
            select(StepRun.run_id).where(StepRun.state == StepState.RUNNING,
                                         StepRun.child_run_id.is_(None),
                                         StepRun.heartbeat_at < cutoff),
            select(PipelineRun.id).where(PipelineRun.state == RunState.RUNNING,
                                         PipelineRun.watch_at < cutoff))
        return [str(r) for r in session.scalars(query).all()]


def unreachable(exc: BaseException) -> str | None:
    """"database" or "broker" when ``exc`` says that server could not be reached."""
    if is_outage(exc):
        return "database"
    # kombu re-raises a transport's connection errors (Redis, AMQP) as its own
    if isinstance(exc, (OperationalError, ConnectionError, TimeoutError)):
        return "broker"
    return None


def start(app: Celery, settings: Settings) -> threading.Event:
    """Run the sweep in a daemon thread until the returned event is set."""
    stop = threading.Event()
    database_url = settings.database_url
    assert database_url is not None

    def loop() -> None:
        down: str | None = None  # what was unreachable at the last sweep
        while not stop.wait(settings.dead_after_s / 2):
            try:
                for run_id in stalled_runs(database_url, settings.dead_after_s):
                    canvas.request_advance(app, run_id)
            except Exception as exc:  # the next sweep tries again
                away = unreachable(exc)
                if away is None:
                    log.exception("sweep for stalled runs failed")
                elif away != down:  # once per outage, not once per sweep
                    log.warning("sweep for stalled runs: %s unreachable (%s); sweeping on",
                                away, first_line(exc))
                down = away
            else:
                down = None

    threading.Thread(target=loop, name="skillq-sweeper", daemon=True).start()
    return stop
