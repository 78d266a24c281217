"""A planning pass routes by its process's recent read of the daemon registry
(lifecycle/routing.py ``recent_daemons``, SKILLQ_ROUTING_REUSE_S), and reads it again
before it refuses a step: an earlier read spares a round trip, it never fails a run.

A PostgreSQL database of the test's own, daemons announced by hand, and the real planner
launching a run's first step as `skillq run` does."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import Stack
from support.databases import fresh_database

from lifecycle.planner import advance
from lifecycle.routing import recent_daemons
from lifecycle.submit import create_run
from shared.db.daemon_models import Daemon, DaemonWorker
from shared.db.migrate import upgrade
from shared.db.models import PipelineRun
from shared.db.session import transaction
from shared.settings import Settings
from shared.states import RunState
from shared.vault import Vault, load_vault

pytestmark = pytest.mark.integration

PINNED = """---
name: {name}
description: "Print ok. A leaf pinned to one daemon, for the routing tests."
version: 1
outputs:
  - name: ok
    type: boolean
    description: "Always true."
approach: code
requires:
  daemon: {daemon}
run:
  command: "true"
  timeout: 30
---
# {name}

Pinned to {daemon}.
"""


@pytest.fixture
def url(stack: Stack) -> Iterator[str]:
    with fresh_database(stack.endpoints.database_url, "routing") as url:
        upgrade(url)
        yield url


@pytest.fixture
def vault(tmp_path: Path) -> Vault:
    for name, daemon in (("on-late", "late-box"), ("on-none", "no-such-box")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "SKILL.md").write_text(PINNED.format(name=name, daemon=daemon))
    loaded = load_vault(tmp_path)
    assert not loaded.problems, loaded.problems
    return loaded


def announce(url: str, daemon: str) -> None:
    now = datetime.now(UTC)
    with transaction(url) as session:
        session.merge(Daemon(name=daemon, device_id=daemon, platform="linux", role="agent",
                             capabilities=[], software={}, skills={}, started_at=now,
                             heartbeat_at=now))
        session.flush()
        # as `skillq worker --daemon NAME` consumes them (workers/main.py daemon_queues)
        queues = ["default", "control", f"default@{daemon}", f"control@{daemon}"]
        session.merge(DaemonWorker(node=f"default@{daemon}", daemon=daemon, queues=queues,
                                   pid=1, heartbeat_at=now))


def names(url: str, reuse_s: float) -> tuple[set[str], bool]:
    with transaction(url) as session:
        daemons, earlier = recent_daemons(session, 30.0, reuse_s)
    return {d.name for d in daemons}, earlier


def test_a_recent_read_is_reused_and_a_fresh_one_replaces_it(url: str) -> None:
    announce(url, "first-box")
    assert names(url, 60.0) == ({"first-box"}, False)  # nothing read before: read now
    announce(url, "late-box")
    assert names(url, 60.0) == ({"first-box"}, True)  # the earlier read, no query
    assert names(url, 0.0) == ({"first-box", "late-box"}, False)
    assert names(url, 60.0) == ({"first-box", "late-box"}, True)  # the fresh one kept


def launched(url: str, vault: Vault, skill: str, settings: Settings) -> tuple[str, list[str]]:
    """A run of ``skill`` recorded and its first step planned in one transaction, as
    `skillq run` launches it: the run's state and the queues its step went to."""
    with transaction(url) as session:
        run_id = create_run(session, vault, vault.get(skill), {}, source="test",
                            triggered_by=f"test-{uuid.uuid4().hex[:6]}")
        out = advance(session, run_id, settings)
    with transaction(url) as session:
        run = session.get(PipelineRun, run_id)
        assert run is not None
        return run.state, [d.queue for d in out.dispatch]


def test_a_step_refused_by_an_earlier_read_is_routed_by_a_fresh_one(
        url: str, vault: Vault, tmp_path: Path) -> None:
    settings = Settings(_env_file=None, home=tmp_path / "home", routing_reuse_s=60.0)
    announce(url, "first-box")
    assert names(url, 0.0) == ({"first-box"}, False)  # this process's read: no late-box
    announce(url, "late-box")  # comes online after it
    state, queues = launched(url, vault, "on-late", settings)
    assert (state, queues) == (RunState.RUNNING, ["default@late-box"])


def test_a_step_no_daemon_can_run_still_fails_its_run(
        url: str, vault: Vault, tmp_path: Path) -> None:
    settings = Settings(_env_file=None, home=tmp_path / "home", routing_reuse_s=60.0)
    announce(url, "first-box")
    state, queues = launched(url, vault, "on-none", settings)
    assert (state, queues) == (RunState.FAILED, [])
    with transaction(url) as session:
        failed = session.query(PipelineRun).one()
        assert failed.error is not None and "no-such-box" in failed.error
