"""Reaching the servers and workers a command needs, starting the embedded ones if so.

With SKILLQ_BROKER_URL and SKILLQ_DATABASE_URL set, skillq uses those servers and the
workers already serving them. With either unset it starts real Redis and PostgreSQL
servers under SKILLQ_HOME and a worker per queue class: the same code path, local.

Every command that connects enrolls its SKILLQ_HOME's daemon key (made on first use):
holding the database credentials is already full trust (docs/security.md). A revoked key
stops the command, naming the fix, since every message it sent would be refused.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

from celery import Celery

from lifecycle.context import WorkerContext
from shared import daemon_key
from shared.celery_app import create_app
from shared.db import daemon_keys
from shared.db.migrate import upgrade
from shared.db.session import transaction
from shared.endpoints import Endpoints
from shared.settings import Settings, get_settings
from shared.vault import resolved_root


@dataclass(frozen=True)
class Connection:
    settings: Settings
    endpoints: Endpoints
    app: Celery
    embedded: bool
    # The SKILLQ_HOME whose local stack starts a worker class on a run's first need of it
    # (orchestrator/local_stack.py ensure_workers); None: the workers are someone else's.
    local_workers: Path | None = None


def client_context(conn: Connection) -> WorkerContext:
    """What this process needs to run the lifecycle for ``conn`` (its launches, cancels,
    benchmarks.json windows)."""
    return WorkerContext(settings=conn.settings, database_url=conn.endpoints.database_url,
                         vault=resolved_root(conn.settings.vault),
                         hostname=socket.gethostname(), pid=os.getpid())


def enroll_own_key(settings: Settings, database_url: str, *, refuse_revoked: bool = True
                   ) -> daemon_key.DaemonKey:
    key = daemon_key.load_or_create(settings.home)
    with transaction(database_url) as session:
        done = daemon_keys.enroll_own(session, key, daemon_key.daemon_name(settings.daemon))
    if refuse_revoked:
        daemon_keys.check_not_revoked(done, key)
    return key


def connect(*, start: bool = True, workers: bool = True, vault_workers: bool = True,
            refuse_revoked_key: bool = True) -> Connection:
    """``workers=False``: this command starts no local worker, now or for a run.
    ``vault_workers=False``: none now; a run starts the classes it needs (`skillq run`,
    which has started them already: local_stack.start_early).
    ``refuse_revoked_key=False``: for `skillq daemons`, which must still list and
    revoke when this home's own key was revoked."""
    from orchestrator.embedded import resolve_endpoints

    settings = get_settings()
    embedded = not (settings.broker_url and settings.database_url)
    endpoints = resolve_endpoints(settings, start=start)
    upgrade(endpoints.database_url)
    enroll_own_key(settings, endpoints.database_url, refuse_revoked=refuse_revoked_key)
    app = create_app(settings, broker_url=endpoints.broker_url,
                     result_backend=endpoints.result_backend,
                     database_url=endpoints.database_url)
    home = None
    if embedded and start and workers:
        home = settings.home.expanduser().resolve()
    if home is not None and vault_workers:
        from orchestrator.local_stack import classes_for_vault, ensure_workers

        ensure_workers(home, endpoints, classes_for_vault(settings.vault.expanduser()))
    return Connection(settings, endpoints, app, embedded, home)
