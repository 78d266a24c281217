"""When the local stack counts a worker it started as ready (orchestrator/local_stack.py
wait_ready): once that process, by its pid, has announced itself in daemon_workers.

A real PostgreSQL database of the test's own and real processes standing in for workers:
what is under test is the wait, not a worker's start-up (test_embedded_stack runs those).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import Stack
from sqlalchemy import update
from support.databases import fresh_database

from orchestrator.local_stack import wait_ready
from shared.db.daemon_models import Daemon, DaemonWorker
from shared.db.migrate import upgrade
from shared.db.session import transaction
from shared.endpoints import Endpoints
from shared.errors import ConfigError
from shared.settings import get_settings

pytestmark = pytest.mark.integration
HOST = get_settings().daemon or socket.gethostname()  # the local stack's workers' node names


@pytest.fixture
def endpoints(stack: Stack) -> Iterator[Endpoints]:
    with fresh_database(stack.endpoints.database_url, "ready") as url:
        upgrade(url)
        yield Endpoints(broker_url=stack.endpoints.broker_url, database_url=url,
                        result_backend=stack.endpoints.result_backend)


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A live process whose pid the home's pidfile names, as `skillq up` writes it."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def home_with_pidfile(tmp_path: Path, pid: int) -> Path:
    home = tmp_path / "home"
    (home / "run").mkdir(parents=True)
    (home / "logs").mkdir()
    (home / "run/worker-default.pid").write_text(f"{pid}\n")
    return home


def announce(database_url: str, pid: int, daemon: str = HOST) -> None:
    now = datetime.now(UTC)
    with transaction(database_url) as session:
        session.merge(Daemon(name=daemon, device_id="d", platform="linux", role="agent",
                             capabilities=[], software={}, skills={}, started_at=now,
                             heartbeat_at=now))
        session.flush()
        session.merge(DaemonWorker(node=f"default@{daemon}", daemon=daemon,
                                   queues=["default", "control"], pid=pid,
                                   heartbeat_at=now))


def test_a_row_of_an_earlier_process_is_not_the_started_worker_announcing(
        endpoints: Endpoints, sleeper: subprocess.Popen[bytes], tmp_path: Path) -> None:
    """After `skillq down`, the stopped worker's row stays, its heartbeat fresh for a
    while: a cold `skillq run` must wait for the new process's own row, or it would route
    by a stale record. A worker of another machine sharing the database, the same class
    and by chance the same pid, is not this stack's either."""
    home = home_with_pidfile(tmp_path, sleeper.pid)
    announce(endpoints.database_url, pid=sleeper.pid + 100_000)  # the earlier process
    announce(endpoints.database_url, pid=sleeper.pid, daemon="another-machine")  # not ours
    with pytest.raises(ConfigError, match=r"workers not ready after 1s: default"):
        wait_ready(endpoints, ["default"], 1.0, home=home)

    def announced_later() -> None:
        time.sleep(0.5)
        with transaction(endpoints.database_url) as session:
            session.execute(update(DaemonWorker).where(DaemonWorker.daemon == HOST)
                            .values(pid=sleeper.pid))

    seen: list[tuple[int, int]] = []
    later = threading.Thread(target=announced_later)
    later.start()
    try:
        wait_ready(endpoints, ["default"], 20.0, home=home,
                   progress=lambda n, total: seen.append((n, total)))
    finally:
        later.join()
    assert seen[0] == (0, 1) and seen[-1] == (1, 1)


def test_a_worker_that_exited_is_reported_at_once_with_its_log(
        endpoints: Endpoints, tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    home = home_with_pidfile(tmp_path, dead.pid)
    (home / "logs/worker-default.log").write_text(
        "celery starting\nSandboxError: SKILLQ_SANDBOX=bwrap, but bubblewrap cannot run\n")
    rounds: list[tuple[int, int]] = []
    with pytest.raises(ConfigError) as caught:
        wait_ready(endpoints, ["default"], 600.0, home=home,
                   progress=lambda n, total: rounds.append((n, total)))
    assert rounds == [(0, 1)]  # on the first look, not after the timeout
    message = str(caught.value)
    assert message.startswith(f"worker default exited; last lines of {home}/logs/"
                              "worker-default.log:")
    assert "bubblewrap cannot run" in message


def test_a_database_not_made_yet_is_waited_through(
        stack: Stack, sleeper: subprocess.Popen[bytes], tmp_path: Path) -> None:
    """A fresh home: the worker makes the tables itself (workers/announce.py), so at first
    there is no daemon_workers table to look in; that is not ready, not an error."""
    home = home_with_pidfile(tmp_path, sleeper.pid)
    with fresh_database(stack.endpoints.database_url, "unmade") as url:
        bare = Endpoints(broker_url=stack.endpoints.broker_url, database_url=url,
                         result_backend=stack.endpoints.result_backend)

        def worker_starts() -> None:
            time.sleep(0.5)
            upgrade(url)
            announce(url, sleeper.pid)

        later = threading.Thread(target=worker_starts)
        later.start()
        try:
            wait_ready(bare, ["default"], 30.0, home=home)
        finally:
            later.join()
