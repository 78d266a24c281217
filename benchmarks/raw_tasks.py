"""The raw Celery floor for benchmarks/execution.py: a no-op and a subprocess task.

A plain Celery app, no skillq code: ``celery -A raw_tasks worker -Q bench-raw`` (with
benchmarks/ on PYTHONPATH) serves it on its own queue of the same broker skillq uses.

    BENCH_RAW_BROKER  the Redis URL (broker and result backend)
    BENCH_RAW_STRICT  "1": also apply skillq's Celery settings (acks_late,
                      reject_on_worker_lost, prefetch 1, track_started, task events), to
                      tell what those settings cost apart from what skillq's code costs
"""

from __future__ import annotations

import os
import subprocess

from celery import Celery

QUEUE = "bench-raw"
STRICT_QUEUE = "bench-raw-strict"
NOOP = "bench_raw.noop"
SPAWN = "bench_raw.spawn"


def make_app(broker_url: str, *, strict: bool = False) -> Celery:
    app = Celery("bench_raw", broker=broker_url, backend=broker_url)
    app.conf.update(
        task_serializer="json", result_serializer="json", accept_content=["json"],
        result_accept_content=["json"], task_default_queue=STRICT_QUEUE if strict else QUEUE,
        broker_connection_retry_on_startup=True, worker_hijack_root_logger=False,
        timezone="UTC",
    )
    if strict:  # what shared/celery_app.py sets, minus the queue list
        app.conf.update(task_acks_late=True, task_reject_on_worker_lost=True,
                        worker_prefetch_multiplier=1, task_track_started=True,
                        worker_send_task_events=True, task_send_sent_event=True)

    @app.task(name=NOOP, shared=False)
    def noop() -> None:
        return None

    @app.task(name=SPAWN, shared=False)
    def spawn(argv: list[str]) -> int:
        # What a script step runs, with none of skillq around it.
        return subprocess.run(argv, check=True).returncode

    return app


# The worker's app (``celery -A raw_tasks``); the benchmark builds its own client apps.
app = make_app(os.environ.get("BENCH_RAW_BROKER", "redis://127.0.0.1:6379/0"),
               strict=os.environ.get("BENCH_RAW_STRICT") == "1")
