"""Many machines on one host: two daemons with their own SKILLQ_HOME and PATH.

``alpha`` has a program on its PATH (``sqtool-alpha``) that no other daemon has; ``beta``
is where the ``on-beta`` skill is pinned. Both are real worker processes
(``python -m workers.main --daemon NAME``) on the test stack's broker and database, beside
the stack's standard workers (the host's own daemon). The fixture vault is
tests/integration/vaults/daemons.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import VAULTS, RunResult, Stack, copy_vault, kill_pids, skillq_argv, wait_until
from support.netns import NamespacedDaemon, namespaced_daemon

from shared.db.daemon_models import DaemonWorker

RunSkill = Callable[..., RunResult]
OFFLINE_AFTER_S = 2.0  # how soon a silent daemon is shown offline, in these tests
FAST = {"SKILLQ_DAEMON_OFFLINE_AFTER_S": str(OFFLINE_AFTER_S)}


@dataclass
class Daemon:
    name: str
    proc: subprocess.Popen[bytes]
    home: Path

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, 9)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)


def start_daemon(stack: Stack, root: Path, name: str, tools: list[str], *,
                 threads: bool = False) -> Daemon:
    """A daemon's worker: ``python -m workers.main``, or with ``threads`` the user's own
    command, ``skillq worker --pool threads`` (which becomes that same process)."""
    home = root / f"{name}-home"
    home.mkdir(parents=True)
    # Beside its SKILLQ_HOME, not in it: steps never see a daemon's home (its sandbox).
    bin_dir = root / f"{name}-bin"
    bin_dir.mkdir(parents=True, mode=0o755)
    for tool in tools:  # a program only this machine has
        path = bin_dir / tool
        path.write_text("#!/bin/sh\necho ok\n")
        path.chmod(0o755)
    env = {**stack.env, **FAST, "SKILLQ_HOME": str(home),
           "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    log = (home / "worker.log").open("ab")
    options = ["--queues", "default", "--concurrency", "1", "--name", "d", "--daemon", name]
    argv = skillq_argv("worker", *options, "--pool", "threads") if threads else \
        [sys.executable, "-m", "workers.main", *options]
    proc = subprocess.Popen(argv, env=env, cwd=home, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    return Daemon(name, proc, home)


def announced(stack: Stack, node: str) -> bool:
    with stack.db() as session:
        return session.get(DaemonWorker, node) is not None


@pytest.fixture(scope="module")
def daemons(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Daemon]]:
    root = tmp_path_factory.mktemp("daemons")
    for folder in (root.parent, root):  # the sandboxed step account walks to the tools
        folder.chmod(folder.stat().st_mode | 0o111)
    started = {"alpha": start_daemon(stack, root, "alpha", ["sqtool-alpha"]),
               "beta": start_daemon(stack, root, "beta", [], threads=True)}
    try:
        for d in started.values():
            wait_until(lambda d=d: announced(stack, f"d@{d.name}"), 60,
                       f"daemon {d.name} to announce itself")
        yield started
    finally:
        for d in started.values():
            d.stop()


def steps_by_id(stack: Stack, run_id: str) -> dict[str, list]:
    return {sid: stack.steps(run_id, sid) for sid in ("tool", "pinned", "free")}


def test_each_step_runs_on_the_daemon_its_requirements_demand(
        healthy: Stack, daemons: dict[str, Daemon], run_skill: RunSkill,
        tmp_path: Path) -> None:
    vault = copy_vault(VAULTS / "daemons", tmp_path / "vault")
    result = run_skill("two-daemons", vault, "--json", env=FAST)
    assert result.code == 0, result
    assert result.json()["found"].endswith("alpha-bin/sqtool-alpha")
    assert result.run_id is not None
    steps = steps_by_id(healthy, result.run_id)
    (tool,), (pinned,), (free,) = steps["tool"], steps["pinned"], steps["free"]
    assert (tool.daemon, tool.queue) == ("alpha", "default@alpha")
    assert tool.route is not None and "alpha has what it requires" in tool.route
    assert (pinned.daemon, pinned.queue) == ("beta", "default@beta")
    assert pinned.route == "pinned to beta"
    # beta is `skillq worker --pool threads`: the step ran in the worker's own process
    # (the CLI exec()s the worker, so that is the process the test started), no pool child.
    assert pinned.worker_pid == daemons["beta"].proc.pid
    assert tool.worker_pid != daemons["alpha"].proc.pid  # prefork: a pool process
    assert free.queue == "default" and free.daemon is not None
    shown = healthy.cli("run-show", result.run_id, cwd=tmp_path)
    assert "routed to default@alpha" in shown.stdout and "(daemon beta)" in shown.stdout


def test_a_stopped_daemon_is_offline_and_only_runs_needing_it_are_refused(
        healthy: Stack, daemons: dict[str, Daemon], run_skill: RunSkill,
        tmp_path: Path) -> None:
    vault = copy_vault(VAULTS / "daemons", tmp_path / "vault")
    beta = daemons["beta"]
    kill_pids([beta.proc.pid])  # the whole machine gone: no goodbye
    beta.stop()

    def beta_state() -> str:
        listing = healthy.cli("daemons", "--json", cwd=tmp_path, env=FAST)
        shown = {d["daemon"]: d for d in json.loads(listing.stdout)}
        return "online" if shown["beta"]["online"] else "offline"

    wait_until(lambda: beta_state() == "offline", 3 * OFFLINE_AFTER_S + 5,
               "beta to be shown offline")
    before = len(healthy.runs_of("two-daemons"))
    refused = run_skill("two-daemons", vault, env=FAST)
    assert refused.code == 1, refused
    message = " ".join(refused.stderr.split())
    assert "step 'pinned' (on-beta)" in message and "daemon 'beta', which is offline" \
        in message, message
    assert len(healthy.runs_of("two-daemons")) == before  # refused before anything ran

    still = run_skill("alpha-only", vault, "--json", env=FAST)
    assert still.code == 0, still
    assert still.run_id is not None
    (tool,) = healthy.steps(still.run_id, "tool")
    assert tool.daemon == "alpha"


def test_software_no_daemon_has_is_named_with_who_lacks_it(
        healthy: Stack, daemons: dict[str, Daemon], run_skill: RunSkill,
        tmp_path: Path) -> None:
    vault = copy_vault(VAULTS / "daemons", tmp_path / "vault")
    manifest = vault / "needs-alpha-tool" / "SKILL.md"
    manifest.write_text(manifest.read_text().replace("[sqtool-alpha]", "[sqtool-nowhere]"))
    result = run_skill("alpha-only", vault, env=FAST)
    assert result.code == 1, result
    message = " ".join(result.stderr.split())
    assert "no online daemon serving 'default' has what it requires" in message, message
    assert "alpha lacks software 'sqtool-nowhere'" in message
    assert result.run_id is None


# -- a daemon behind its own network namespace ------------------------------------------

@pytest.fixture(scope="module")
def namespaced(stack: Stack, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[NamespacedDaemon]:
    """Daemon ``gamma`` in network namespace of its own, reaching the broker and the
    database only over a veth link (support/netns.py)."""
    with namespaced_daemon(stack, tmp_path_factory.mktemp("gamma-home"), "gamma",
                           queues="default", env=FAST) as daemon:
        yield daemon


def test_a_daemon_in_its_own_network_namespace_runs_its_pinned_step(
        healthy: Stack, namespaced: NamespacedDaemon, run_skill: RunSkill, tmp_path: Path) -> None:
    vault = copy_vault(VAULTS / "daemons", tmp_path / "vault")
    manifest = vault / "on-beta" / "SKILL.md"
    manifest.write_text(manifest.read_text().replace("daemon: beta", "daemon: gamma"))
    result = run_skill("on-beta", vault, "--json", env=FAST)
    assert result.code == 0, result
    assert result.run_id is not None
    (step,) = healthy.steps(result.run_id, "on-beta")
    assert (step.daemon, step.queue, step.state) == ("gamma", "default@gamma", "succeeded")
    # The step's own record came back over the veth link: its worker saw no loopback
    # database (netns loopback has nothing listening).
    assert step.worker == "d@gamma"
