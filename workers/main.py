"""A Celery worker process serving some queue classes: `python -m workers.main`.

`skillq worker` and the local stack both start workers through here. The broker and
database come from SKILLQ_BROKER_URL / SKILLQ_DATABASE_URL (the local stack sets them).
"""

from __future__ import annotations

import argparse
import socket
import sys

from celery.signals import worker_process_init, worker_ready

from shared.celery_app import create_app
from shared.db.session import dispose_engines
from shared.errors import ConfigError
from shared.settings import get_settings
from workers import sweeper


def worker_argv(queues: list[str], concurrency: int, name: str) -> list[str]:
    return ["worker", "--queues", ",".join(queues), "--concurrency", str(concurrency),
            "--hostname", f"{name}@{socket.gethostname()}", "--without-mingle",
            "--without-gossip", "--loglevel", "INFO", "--pool", "prefork"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="skillq-worker")
    parser.add_argument("--queues", required=True, help="comma-separated queue names")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--name", default=None, help="worker name (default: the queues)")
    args = parser.parse_args(argv)
    settings = get_settings()
    if not settings.broker_url:
        raise ConfigError("SKILLQ_BROKER_URL is not set: start workers with `skillq up`, or "
                          "set it to your Redis URL")
    queues = [q.strip() for q in args.queues.split(",") if q.strip()]
    app = create_app(settings, broker_url=settings.broker_url,
                     result_backend=settings.result_backend)
    name = args.name or "-".join(queues)

    def on_ready(**_: object) -> None:
        sweeper.start(app, settings)

    def on_fork(**_: object) -> None:
        # A pool process forked after the main process opened connections (the sweeper)
        # must not share its parent's sockets.
        dispose_engines()

    worker_ready.connect(on_ready, weak=False)
    worker_process_init.connect(on_fork, weak=False)
    app.worker_main(worker_argv(queues, args.concurrency, name))


if __name__ == "__main__":
    try:
        main()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
