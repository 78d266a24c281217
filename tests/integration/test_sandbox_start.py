"""A sandbox's start (workers/sandbox/). The worker's process joins the sandbox's cgroup to
start bubblewrap in it, then goes back to its own: it used to stay, under its step's
memory and process limits, and ended by the group's kill when its sandbox closed.

A sandbox starts while the host's mounts change. bubblewrap binds / with every mount
under it, then remounts each read-only; a network namespace added or deleted in between
(`ip netns`, as test_daemons and container runtimes do) failed the remount, so a step
failed with a bwrap error (seen as a test_dom0 flake) and a worker's probe could find
"bubblewrap cannot run here" and start without namespaces."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.manifest import Limits
from shared.settings import Settings
from workers.sandbox import cgroups
from workers.sandbox.limits import StepLimits
from workers.sandbox.runner import Sandbox, Started, probe

pytestmark = pytest.mark.integration

CHURNERS = 4  # threads adding and deleting a namespace each: a start fails ~7% without tries


@pytest.fixture
def churning_namespaces(worker_id: str) -> Iterator[None]:
    if shutil.which("ip") is None:
        pytest.fail("these tests add network namespaces with `ip`: apt-get install iproute2")
    stop = threading.Event()
    names = [f"sqm{worker_id}{n}" for n in range(CHURNERS)]

    def churn(name: str) -> None:
        while not stop.is_set():
            subprocess.run(["ip", "netns", "add", name], capture_output=True, check=False)
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)

    threads = [threading.Thread(target=churn, args=(n,), daemon=True) for n in names]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
        for name in names:
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


def settings(tmp_path: Path) -> Settings:
    return Settings(_env_file=None, home=tmp_path / "home", vault=tmp_path / "vault",
                    sandbox="bwrap")


def run(sandbox: Sandbox, limits: StepLimits) -> int:
    started = sandbox.start(["sh", "-c", "exit 7"], sandbox.slot, {"PATH": "/usr/bin:/bin"},
                            limits, None, None)
    assert isinstance(started, Started)  # in bubblewrap
    try:
        return started.wait()
    finally:
        for pipe in (started.stdin, started.stdout, started.stderr):
            pipe.close()


# In a process of its own: with the old fault, the sandbox's close kills the process that
# stayed in its group, which would be pytest's.
IN_OWN_CGROUP = """
import json, os, sys
from pathlib import Path
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from test_sandbox_start import Limits, Sandbox, StepLimits, run, settings
own = Path("/proc/self/cgroup").read_text()
sandbox = Sandbox(settings(Path(sys.argv[3])), namespaces=True)
code = run(sandbox, StepLimits.resolve(Limits(), settings(Path(sys.argv[3]))))
seen = {"code": code, "own": Path("/proc/self/cgroup").read_text() == own,
        "in_group": os.getpid() in sandbox.cgroup.procs(), "launcher": sandbox.cgroup.procs()}
sandbox.close()
print(json.dumps(seen))
"""


def test_the_worker_is_back_in_its_own_cgroup_once_its_sandbox_started(
        tmp_path: Path) -> None:
    assert cgroups.available(), "the isolation tests run as root, as CI does"
    here = Path(__file__).parent
    done = subprocess.run([sys.executable, "-c", IN_OWN_CGROUP, str(here.parents[1]),
                           str(here), str(tmp_path)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])  # -9: killed
    seen = json.loads(done.stdout)
    assert seen["code"] == 7
    assert seen["own"] and not seen["in_group"]
    assert seen["launcher"]  # the launcher stays in the group


def test_the_probe_finds_bubblewrap_while_namespaces_come_and_go(
        churning_namespaces: None, tmp_path: Path) -> None:
    found = [probe(settings(tmp_path)) for _ in range(100)]
    assert [p for p in found if p is not None] == []


def test_steps_start_while_namespaces_come_and_go(churning_namespaces: None,
                                                 tmp_path: Path) -> None:
    limits = StepLimits.resolve(Limits(), settings(tmp_path))
    codes = []
    for _ in range(60):  # a new sandbox each time: a new bubblewrap, its mounts made anew
        sandbox = Sandbox(settings(tmp_path), namespaces=True)
        try:
            codes.append(run(sandbox, limits))
        finally:
            sandbox.close()
    assert codes == [7] * 60
