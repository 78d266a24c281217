"""A Celery worker process serving some queue classes: `python -m workers.main`.

`skillq worker` and the local stack both start workers through here. The broker and
database come from SKILLQ_BROKER_URL / SKILLQ_DATABASE_URL (the local stack sets them).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from typing import Any

from celery.signals import worker_process_init, worker_ready

from shared import daemon_key
from shared.celery_app import create_app
from shared.db.session import dispose_engines
from shared.errors import ConfigError
from shared.settings import get_settings
from shared.worker_pools import WorkerPool
from workers import announce, attempt_end, sweeper
from workers import sandbox as sandboxes

POOLS = tuple(p.value for p in WorkerPool)


def worker_argv(queues: list[str], concurrency: int, node: str, pool: str = "prefork"
                ) -> list[str]:
    return ["worker", "--queues", ",".join(queues), "--concurrency", str(concurrency),
            "--hostname", node, "--without-mingle", "--without-gossip", "--loglevel", "INFO",
            "--pool", pool]


def daemon_queues(queues: list[str], daemon: str | None) -> list[str]:
    """The shared queues, plus each one narrowed to this daemon (`default@laptop`), where
    the planner sends a step that only this daemon can run or that is pinned to it."""
    if not daemon:
        return queues
    return [*queues, *(f"{q}@{daemon}" for q in queues if "@" not in q)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="skillq-worker")
    parser.add_argument("--queues", required=True, help="comma-separated queue names")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--pool", choices=POOLS, default="prefork",
                        help="threads: steps run in the worker's own process (one process "
                        "instead of two for a class of concurrency 1; a killed worker's "
                        "step is redelivered either way)")
    parser.add_argument("--name", default=None, help="worker name (default: the queues)")
    parser.add_argument("--daemon", default=None, help="this machine's daemon name "
                        "(default: SKILLQ_DAEMON, else the host name)")
    parser.add_argument("--role", choices=("agent", "daily-driver"), default=None,
                        help="routing prefers agent daemons (default: SKILLQ_ROLE or agent)")
    args = parser.parse_args(argv)
    # Through the environment, so the pool processes (which read their own settings) agree.
    if args.daemon:
        os.environ["SKILLQ_DAEMON"] = args.daemon
    if args.role:
        os.environ["SKILLQ_ROLE"] = args.role
    settings = get_settings()
    if not settings.broker_url:
        raise ConfigError("SKILLQ_BROKER_URL is not set: start workers with `skillq up`, or "
                          "set it to your Redis URL")
    queues = [q.strip() for q in args.queues.split(",") if q.strip()]
    isolation = sandboxes.check(settings)  # SandboxError (exit 2) before taking any work
    # The key its messages are signed with: unusable (readable by others) = exit 2 now,
    # not a refused message later. Enrolled at the first announcement (workers/announce.py).
    daemon_key.load_or_create(settings.home)
    app = create_app(settings, broker_url=settings.broker_url,
                     result_backend=settings.result_backend,
                     database_url=settings.database_url)
    name = args.name or "-".join(queues)
    daemon = announce.daemon_name(settings)
    node = f"{name}@{daemon if settings.daemon else socket.gethostname()}"

    def on_ready(sender: Any = None, **_: object) -> None:
        # Here, not where the mode is found: Celery configures logging once the worker
        # starts, and a record logged before that never reaches the worker's log.
        sandboxes.log_mode(isolation)

        def live_queues() -> list[str]:
            consumer = getattr(sender, "task_consumer", None)
            if consumer is None:
                return daemon_queues(queues, daemon)
            return [q.name for q in consumer.queues]

        sweeper.start(app, settings)  # first: it must run whatever announcing meets
        announce.start(settings, node, live_queues, sandbox=isolation)

    def on_fork(**_: object) -> None:
        # A pool process forked after the main process opened connections (the sweeper)
        # must not share its parent's sockets.
        dispose_engines()
        attempt_end.become_subreaper()  # a step's escaped processes come back to it

    worker_ready.connect(on_ready, weak=False)
    if args.pool == "prefork":
        worker_process_init.connect(on_fork, weak=False)
    else:  # steps run in this process: it is their subreaper
        attempt_end.become_subreaper()
    app.worker_main(worker_argv(daemon_queues(queues, daemon), args.concurrency, node,
                                args.pool))


if __name__ == "__main__":
    try:
        main()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
