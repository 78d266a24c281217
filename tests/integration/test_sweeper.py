"""The workers' sweep (workers/sweeper.py) while the broker is away: it says so once, in
one line, not a traceback every sweep, and it keeps sweeping.

Its own database (support/databases.py) holds one run whose watch is overdue, so every
sweep finds work and tries to send; the broker is a port nothing listens on. And the
planner's sends (lifecycle/canvas.py) wait on no result backend.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import Stack, free_port, wait_until
from support.databases import fresh_database

from lifecycle import canvas
from shared.celery_app import create_app
from shared.db.migrate import upgrade
from shared.db.models import PipelineRun
from shared.db.session import dispose_engines, transaction
from shared.settings import Settings
from shared.states import RunState
from workers import sweeper

pytestmark = pytest.mark.integration

DEAD_AFTER_S = 0.4  # a sweep every 0.2 s


@pytest.fixture
def overdue(stack: Stack) -> Iterator[str]:
    """A database with one running run whose watch is long overdue; its URL."""
    with fresh_database(stack.endpoints.database_url, "sweep") as url:
        upgrade(url)
        with transaction(url) as session:
            session.add(PipelineRun(
                id="run-overdue", skill="s", version=1, state=RunState.RUNNING.value,
                source="test", vault="/nowhere", plan={"steps": []}, inputs={},
                input_hash="sha256:" + "0" * 64, progress={},
                watch_at=datetime.now(UTC) - timedelta(hours=1)))
        try:
            yield url
        finally:
            dispose_engines()  # before the database is dropped


def test_a_sweep_with_the_broker_away_warns_once_and_sweeps_on(
        overdue: str, tmp_path: Path, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(_env_file=None, home=tmp_path, database_url=overdue,
                        dead_after_s=DEAD_AFTER_S)
    app = create_app(settings, broker_url=f"redis://127.0.0.1:{free_port()}/0",
                     database_url=overdue)
    app.conf.broker_connection_timeout = 0.5
    app.conf.task_publish_retry = False  # one failed send per sweep, not a retry loop
    sweeps: list[float] = []
    real = sweeper.stalled_runs

    def counted(database_url: str, dead_after_s: float) -> list[str]:
        sweeps.append(time.monotonic())
        return real(database_url, dead_after_s)

    caplog.set_level(logging.INFO, logger="workers.sweeper")
    monkeypatch.setattr(sweeper, "stalled_runs", counted)  # counts; the real query runs
    stop = sweeper.start(app, settings)
    try:
        wait_until(lambda: len(sweeps) >= 5, 60, "five sweeps with the broker away")
    finally:
        stop.set()
    mine = [r for r in caplog.records if r.name == "workers.sweeper"]
    assert [r.levelno for r in mine] == [logging.WARNING], [r.getMessage() for r in mine]
    assert not any(r.exc_info for r in mine)
    assert "broker unreachable" in mine[0].getMessage(), mine[0].getMessage()


def test_the_planner_s_sends_subscribe_to_no_result(stack: Stack, tmp_path: Path) -> None:
    # A worker sends an advance per settled step and a watch per run, and nobody reads
    # their results: subscribing to each one's result channel (and unsubscribing when the
    # AsyncResult is collected) would be two Redis commands and a pub/sub connection for
    # nothing, and a send blocked on the result backend's reconnects while Redis is away.
    settings = Settings(_env_file=None, home=tmp_path)
    app = create_app(settings, broker_url=stack.endpoints.broker_url,
                     result_backend=stack.endpoints.result_backend,
                     database_url=stack.endpoints.database_url)
    assert type(app.backend).__name__ == "RedisBackend"
    for n in range(3):  # runs that do not exist: the planner's no-op
        canvas.request_advance(app, f"run-none-{n}")
        canvas.schedule_watch(app, f"run-none-{n}", 0.05)
    consumer = app.backend.result_consumer
    assert consumer._pubsub is None and not consumer.subscribed_to
