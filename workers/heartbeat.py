"""Running steps prove their worker alive by touching their records every few seconds."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Set
from contextlib import contextmanager
from datetime import UTC, datetime

from sqlalchemy import update

from shared.db.models import StepRun
from shared.db.session import transaction
from shared.states import StepState


@contextmanager
def heartbeat(database_url: str, step_run_ids: Set[str], every_s: float) -> Iterator[None]:
    """Beat for ``step_run_ids`` (a live set: a batch removes the ids it has recorded,
    and its claimed-but-not-started items keep beating while they wait their turn)."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every_s):
            try:
                ids = list(step_run_ids)
                if not ids:
                    continue
                with transaction(database_url) as session:
                    session.execute(update(StepRun)
                                    .where(StepRun.id.in_(ids),
                                           StepRun.state == StepState.RUNNING)
                                    .values(heartbeat_at=datetime.now(UTC)))
            except Exception:  # noqa: S112 - a missed beat is retried at the next tick
                continue

    thread = threading.Thread(target=beat, name="heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=every_s + 1)
