"""Every end of a step attempt ends what it started; a dead pool process's step runs next.

Measured on d773015: a killed pool process's step waited behind the queue's backlog (it
ran again 41 s later), its script kept running and its scratch folder stayed; a
``setsid`` grandchild outlived a timeout with skillq's tag in its environment.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import (
    VAULTS,
    Stack,
    copy_vault,
    gone_or_zombie,
    kill_pids,
    step_processes,
    wait_until,
)
from test_recovery import read_pid, running_row

from workers.attempt_end import scratch_for
from workers.sandbox.runner import scratch_root

pytestmark = pytest.mark.integration
RERUN_BOUND_S = 10.0  # the bound: a pool death re-runs its step within this
CROWD = 30  # one-second items on two processes: a backlog far longer than the bound


@pytest.fixture
def faults(tmp_path: Path) -> Path:
    return copy_vault(VAULTS / "faults", tmp_path / "vault")


def scratch_of(stack: Stack, row_id: str) -> Path:
    """The attempt's scratch folder, in the slot of whichever pool process ran it."""
    root = scratch_root()
    found = list(root.glob(f"*/{scratch_for(row_id).name}"))
    assert len(found) == 1, f"{len(found)} scratch folders for {row_id} under {root}"
    return found[0]


def test_a_killed_pool_process_s_step_runs_again_ahead_of_the_backlog(
        healthy: Stack, faults: Path, tmp_path: Path) -> None:
    stack = healthy
    pid_dir, release = tmp_path / "pids", tmp_path / "release"
    pid_dir.mkdir()
    labels = json.dumps([f"c{i}" for i in range(CROWD)])
    proc = stack.cli("run", "backlog", "--vault", str(faults), "--input", f"labels={labels}",
                     "--input", "item_s=1", "--input", f"pid_dir={pid_dir}",
                     "--input", f"release={release}", "--detach", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()
    script = None
    try:
        row = running_row(stack, run_id, "held")
        script = read_pid(pid_dir / "held.pid")
        scratch = scratch_of(stack, row.id)
        assert scratch.is_dir()  # the attempt's own, named after it
        stack.tainted.add("default")
        kill_pids([row.worker_pid])
        killed_at = time.monotonic()
        again = running_row(stack, run_id, "held", other_than=row.worker_pid)
        took = time.monotonic() - killed_at
        waiting = [r for r in stack.steps(run_id, "crowd") if r.state == "pending"]
        # It jumped the queue: crowd items sent before it were still waiting.
        assert waiting, "the backlog had drained: the test did not test the queue's order"
        assert took <= RERUN_BOUND_S, f"the step ran again {took:.1f} s after the kill"
        assert again.attempt == 2
        lost = next(r for r in stack.steps(run_id, "held") if r.attempt == 1)
        # Its worker's main process records it (the pool process died); on a loaded
        # machine the watchdog (heartbeats older than SKILLQ_DEAD_AFTER_S=3) may be first.
        assert lost.state == "lost", (lost.state, lost.error)
        # The dead process's script and scratch folder were ended with its attempt.
        wait_until(lambda: gone_or_zombie(script), 5, "the killed attempt's script to end")
        # The main process kills first and removes the folder next (attempt_end.end):
        # the script's end can be seen between the two.
        wait_until(lambda: not scratch.exists(), 5, "the killed attempt's scratch folder "
                   "to be removed")
    finally:
        release.touch()
        final = stack.wait_run(run_id, timeout_s=120)
        if script:
            stack.kill_scripts([script])
    assert final.state == "succeeded", final.error
    held = stack.steps(run_id, "held")
    assert [r.state for r in held if r.state == "succeeded"] == ["succeeded"]


@pytest.mark.parametrize(("end", "state"), [("succeed", "succeeded"), ("fail", "failed"),
                                            ("hang", "failed")])
def test_nothing_an_attempt_started_outlives_it(healthy: Stack, faults: Path, tmp_path: Path,
                                                end: str, state: str) -> None:
    stack = healthy
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    before = stack.run_ids("escaper")
    proc = stack.cli("run", "escaper", "--vault", str(faults), "--input",
                     f"pid_dir={pid_dir}", "--input", f"end={end}", "--json", cwd=tmp_path)
    (run_id,) = [r for r in stack.run_ids("escaper") if r not in before]
    assert (pid_dir / "grandchild.pid").exists(), "the script did not start its grandchild"
    scratch = Path((pid_dir / "scratch").read_text())
    assert proc.returncode == (0 if state == "succeeded" else 1), proc.stderr
    if end == "hang":
        assert "timed out" in proc.stdout + proc.stderr
    # Out of the script's process group and session, the grandchild (which keeps the
    # attempt's tag in its environment) is still the attempt's: ended with it.
    (row,) = stack.steps(run_id)
    left = step_processes(row.id)
    try:
        assert left == [], f"processes {left} outlived their attempt"
        assert not scratch.exists(), f"{scratch} outlived its attempt"
    finally:
        kill_pids(left)
