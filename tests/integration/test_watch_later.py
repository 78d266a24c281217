"""A `skillq run` that waits sends its run's watchdog message only once the run outlasts
the first wait (orchestrator/launch.py ``launch(waiting=True)``): a run that ends sooner
never needed one, and one that goes on is watched as before."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import VAULTS, RunResult, Stack, copy_vault, wait_until


def held_watches(stack: Stack, run_id: str) -> list[dict[str, Any]]:
    """The watch messages for ``run_id`` that some worker holds until they are due."""
    replies = stack.app.control.inspect(timeout=1).scheduled() or {}
    return [t for held in replies.values() for t in held
            if t["request"]["name"] == "skillq.watch" and t["request"]["args"] == [run_id]]


def test_a_run_ended_within_the_first_wait_sends_no_watch(
        healthy: Stack, vault: Path, run_skill: Callable[..., RunResult]) -> None:
    warm = run_skill("token", vault, "--json", inputs={"key": "watch-later"})
    assert warm.code == 0, warm
    quick = []  # cache hits: most end in a few ms, far within the first wait (0.25 s)
    for _ in range(3):
        hit = run_skill("token", vault, "--json", inputs={"key": "watch-later"})
        assert hit.code == 0 and hit.run_id is not None, hit
        # The CLI has exited: a watch it sent (due 1.5 s after the launch, the suite's
        # dead_after_s / 2) is still in its worker's memory now.
        held = held_watches(healthy, hit.run_id)
        run = healthy.run(hit.run_id)
        assert run.finished_at is not None and run.started_at is not None
        if (run.finished_at - run.started_at).total_seconds() < 0.1:
            quick.append((hit.run_id, held))
    assert quick, "no cache hit ended within 0.1 s: nothing here to check"
    assert all(not held for _, held in quick), quick


def test_a_run_outlasting_the_first_wait_is_watched(
        healthy: Stack, tmp_path: Path) -> None:
    faults = copy_vault(VAULTS / "faults", tmp_path / "faults")
    before = healthy.run_ids("hold")
    proc = healthy.cli_popen("run", "hold", "--vault", str(faults), "--input", "label=w",
                             "--input", "hold_s=4", cwd=tmp_path)
    try:
        run_id = healthy.new_run("hold", before)
        seen = set()
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            run = healthy.run(run_id)
            if run.watch_at is not None:
                seen.add(run.watch_at)
            time.sleep(0.1)
        _, stderr = proc.communicate(timeout=30)
        assert proc.returncode == 0, stderr
    finally:
        if proc.poll() is None:
            proc.kill()
    # Armed at launch, then re-armed by each watch that fired (every 1.5 s here): a
    # client that never sent the first would leave it as the launch set it.
    assert len(seen) >= 2, f"watch_at never moved while the run held: {seen}"
    wait_until(lambda: healthy.run(run_id).watch_at is None, 10, "the ended run's watch")
