"""Reaching the servers and workers a command needs, starting the embedded ones if so.

With SKILLQ_BROKER_URL and SKILLQ_DATABASE_URL set, skillq uses those servers and the
workers already serving them. With either unset it starts real Redis and PostgreSQL
servers under SKILLQ_HOME and a worker per queue class: the same code path, local.
"""

from __future__ import annotations

from dataclasses import dataclass

from celery import Celery

from shared.celery_app import create_app
from shared.db.migrate import upgrade
from shared.endpoints import Endpoints
from shared.settings import Settings, get_settings


@dataclass(frozen=True)
class Connection:
    settings: Settings
    endpoints: Endpoints
    app: Celery
    embedded: bool


def connect(*, start: bool = True, workers: bool = True) -> Connection:
    from orchestrator.embedded import resolve_endpoints

    settings = get_settings()
    embedded = not (settings.broker_url and settings.database_url)
    endpoints = resolve_endpoints(settings, start=start)
    upgrade(endpoints.database_url)
    app = create_app(settings, broker_url=endpoints.broker_url,
                     result_backend=endpoints.result_backend)
    if embedded and start and workers:
        from orchestrator.local_stack import WORKER_CLASSES, start_workers, wait_ready

        home = settings.home.expanduser().resolve()
        start_workers(home, endpoints)
        wait_ready(endpoints, [c.name for c in WORKER_CLASSES], timeout_s=60)
    return Connection(settings, endpoints, app, embedded)
