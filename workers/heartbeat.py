"""A running step proves its worker alive by touching its record every few seconds."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from sqlalchemy import update

from shared.db.models import StepRun
from shared.db.session import transaction
from shared.states import StepState


@contextmanager
def heartbeat(database_url: str, step_run_id: str, every_s: float) -> Iterator[None]:
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every_s):
            try:
                with transaction(database_url) as session:
                    session.execute(update(StepRun)
                                    .where(StepRun.id == step_run_id,
                                           StepRun.state == StepState.RUNNING)
                                    .values(heartbeat_at=datetime.now(UTC)))
            except Exception:  # noqa: S112 - a missed beat is retried at the next tick
                continue

    thread = threading.Thread(target=beat, name=f"heartbeat {step_run_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=every_s + 1)
