"""Run operations on the real stack: `skillq cancel`, Ctrl-C on `skillq run`, `--detach`
and `skillq wait`, `skillq retry`, and `skillq run --json`'s result objects.

A cancelled run's running steps must really stop (their processes gone, found by the pid
their script wrote), its pending steps must never start (no pid file, no start time), and
it must be recorded cancelled in PostgreSQL and in benchmarks.json. A retry must not run
again what succeeded: the fixture step counts its invocations in a file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    RunResult,
    Stack,
    gone_or_zombie,
    host_pid,
    wait_until,
)
from sqlalchemy import text

pytestmark = pytest.mark.integration

HOLD_S = 60  # a held step's cap: far beyond any wait here, so only a cancel ends it
STOP_S = 10.0  # a cancelled step's processes are gone well within this (a hang guard)

HOLD_FAN = """---
name: hold-fan
description: "Fan out stamps holding until a file exists, then one more. Use it to test cancels."
version: 1
inputs:
  - name: labels
    type: string[]
    required: true
    description: "One stamp per label."
  - name: pid_dir
    type: string
    required: true
    description: "Where each stamp writes <label>.pid."
  - name: release
    type: string
    required: true
    description: "The stamps hold until this file exists."
outputs:
  - name: text
    type: string
    description: Mapped from a step.
    from: ${steps.then.outputs.label}
steps:
  - id: each
    skill: stamp
    for_each: ${inputs.labels}
    with:
      label: ${item}
      hold_s: HOLD_S
      pid_dir: ${inputs.pid_dir}
      until_file: ${inputs.release}
  - id: then
    skill: stamp
    with:
      label: then
      texts: ${steps.each.outputs.label}
---

# hold-fan

Fans out stamps that hold, then stamps once more.
""".replace("HOLD_S", str(HOLD_S))

COUNTER = """---
name: counter
description: "Count its runs per label in a file, failing on request. Use it to test retries."
version: 1
inputs:
  - name: label
    type: string
    required: true
    description: "What is counted."
  - name: counter_dir
    type: string
    required: true
    description: "Where <label>.count is kept."
  - name: fail_label
    type: string
    required: false
    default: ""
    description: "The label that fails while fail_flag exists."
  - name: fail_flag
    type: string
    required: false
    default: ""
    description: "A file: while it exists, fail_label fails."
  - name: after
    type: string
    required: false
    default: ""
    description: "Ignored: orders this step after another."
outputs:
  - name: label
    type: string
    description: "The label."
  - name: count
    type: integer
    description: "How many times this label has run, this one included."
approach: code
run:
  command: python3 counter.py
  timeout: 30
  retries: 0
---

# counter

Counts its runs per label; fails on request.
"""

COUNTER_PY = '''"""counter: count runs per label in a file; fail while fail_flag exists."""

import json
import os
import sys
from pathlib import Path

inputs = json.loads(Path(os.environ["SKILL_INPUTS"]).read_text(encoding="utf-8"))
label = inputs["label"]
path = Path(inputs["counter_dir"]) / f"{label}.count"
count = int(path.read_text()) + 1 if path.exists() else 1
partial = path.with_name(path.name + ".partial")
partial.write_text(str(count))
partial.replace(path)
if label == inputs.get("fail_label") and inputs.get("fail_flag") \\
        and Path(inputs["fail_flag"]).exists():
    print(f"counter: {label} fails while {inputs['fail_flag']} exists", file=sys.stderr)
    sys.exit(1)
Path(os.environ["SKILL_OUTPUT"]).write_text(json.dumps({"label": label, "count": count}))
'''

RETRY_FAN = """---
name: retry-fan
description: "A counted first step, a counted fan-out, then a stamp. Use it to test retries."
version: 1
inputs:
  - name: items
    type: string[]
    required: true
    description: "One counted step per item."
  - name: counter_dir
    type: string
    required: true
    description: "Where the counts are kept."
  - name: fail_label
    type: string
    required: false
    default: ""
    description: "The item that fails while fail_flag exists."
  - name: fail_flag
    type: string
    required: false
    default: ""
    description: "A file: while it exists, fail_label fails."
outputs:
  - name: labels
    type: string[]
    description: Mapped from a step.
    from: ${steps.each.outputs.label}
  - name: last
    type: string
    description: Mapped from a step.
    from: ${steps.last.outputs.label}
steps:
  - id: first
    skill: counter
    with:
      label: first
      counter_dir: ${inputs.counter_dir}
  - id: each
    skill: counter
    for_each: ${inputs.items}
    with:
      label: ${item}
      counter_dir: ${inputs.counter_dir}
      fail_label: ${inputs.fail_label}
      fail_flag: ${inputs.fail_flag}
      after: ${steps.first.outputs.label}
  - id: last
    skill: stamp
    with:
      label: last
      texts: ${steps.each.outputs.label}
---

# retry-fan

A counted first step, a counted fan-out, then a stamp.
"""


def _skill(vault: Path, name: str, manifest: str, subs: list[str],
           files: dict[str, str] | None = None) -> None:
    folder = vault / name
    folder.mkdir()
    (folder / "SKILL.md").write_text(manifest)
    (folder / "sub-skills.json").write_text(json.dumps(
        {"sub_skills": [{"skill_id": s, "role": "step"} for s in subs]}))
    (folder / "benchmarks.json").write_text(json.dumps(
        {"skill": name, "version": 1, "tests": [], "runs": []}))
    for file, content in (files or {}).items():
        (folder / file).write_text(content)


@pytest.fixture
def ops_vault(vault: Path) -> Path:
    """The pipes fixture vault, plus hold-fan, counter and retry-fan."""
    _skill(vault, "hold-fan", HOLD_FAN, ["stamp"])
    _skill(vault, "counter", COUNTER, [], {"counter.py": COUNTER_PY})
    _skill(vault, "retry-fan", RETRY_FAN, ["counter", "stamp"])
    return vault


def read_pid(path: Path) -> int:
    """The pid a step's script wrote, as this process sees it (conftest.host_pid)."""
    written = int(wait_until(lambda: path.exists() and path.read_text(), 30, f"{path}"))
    return int(wait_until(lambda: host_pid(written, str(path.parent)), 10,
                          f"the process that wrote {path}"))


def benchmark_runs(vault: Path, skill: str) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = json.loads((vault / skill / "benchmarks.json").read_text()
                                            )["runs"]
    return runs


def detach(stack: Stack, cwd: Path, *argv: str) -> str:
    started = stack.cli(*argv, "--detach", cwd=cwd)
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    assert run_id.startswith("run-"), started.stdout
    assert f"run {run_id}" in started.stderr  # the id is always on stderr too
    return run_id


def test_cancel_stops_running_steps_and_pending_ones_never_start(
        healthy: Stack, ops_vault: Path, tmp_path: Path) -> None:
    stack = healthy
    pid_dir, release = tmp_path / "pids", tmp_path / "release"
    pid_dir.mkdir()
    labels = ["a", "b", "c", "d"]  # the default worker runs two at a time: two wait
    run_id = detach(stack, tmp_path, "run", "hold-fan", "--vault", str(ops_vault),
                    "--input", f"labels={json.dumps(labels)}", "--input", f"pid_dir={pid_dir}",
                    "--input", f"release={release}")
    try:
        wait_until(lambda: len(list(pid_dir.glob("*.pid"))) >= 2, 30, "two stamps to run")
        started = sorted(p.stem for p in pid_dir.glob("*.pid"))
        scripts = {label: read_pid(pid_dir / f"{label}.pid") for label in started}
        assert all(not gone_or_zombie(pid) for pid in scripts.values())

        cancelled = stack.cli("cancel", run_id, cwd=tmp_path)
        assert cancelled.returncode == 0, cancelled.stderr
        assert f"run {run_id} cancelled; {len(started)} running step(s) stopped" \
            in cancelled.stderr

        # The running steps' processes are ended by their workers, not left to finish.
        wait_until(lambda: all(gone_or_zombie(p) for p in scripts.values()), STOP_S,
                   f"the cancelled steps' scripts {sorted(scripts.values())} to end")
        time.sleep(1.5)  # time for a wrongly started pending step to write its pid file
    finally:
        release.touch()  # whatever still holds lets go
    assert sorted(p.stem for p in pid_dir.glob("*.pid")) == started  # no other started

    run = stack.run(run_id)
    assert run.state == "cancelled"
    assert run.error == "cancelled by `skillq cancel`"
    rows = stack.steps(run_id)
    assert {r.step_id for r in rows} == {"each"}  # the step after the fan-out never launched
    assert [(r.item_index, r.attempt, r.state) for r in rows] == \
        [(i, 1, "cancelled") for i in range(len(labels))]  # no second attempt either
    ran = {labels[r.item_index] for r in rows if r.started_at is not None}
    assert ran == set(started)  # claimed ones were running; the rest never started
    assert all(r.error_kind == "cancelled" for r in rows)

    # benchmarks.json: the run (orchestrator) and its stopped steps (stamp), as cancelled.
    entry = next(e for e in benchmark_runs(ops_vault, "hold-fan") if e["run_id"] == run_id)
    assert (entry["success"], entry["notes"]) == (False, "cancelled")
    assert "cancelled" in entry["error"]
    stamps = [e for e in benchmark_runs(ops_vault, "stamp")
              if e["run_id"].startswith(f"{run_id}/")]
    assert len(stamps) == len(started)
    assert all((e["success"], e["notes"]) == (False, "cancelled") for e in stamps)

    again = stack.cli("cancel", run_id, cwd=tmp_path)
    assert again.returncode == 1
    assert f"run {run_id} had already ended (cancelled); nothing to cancel" in again.stderr
    assert "Traceback" not in again.stderr

    waited = stack.cli("wait", run_id, "--json", cwd=tmp_path)
    assert waited.returncode == 1, waited.stderr
    assert json.loads(waited.stdout) == {"run_id": run_id, "state": "cancelled",
                                         "error": "cancelled by `skillq cancel`",
                                         "step": None, "item": None}


def _lock_run(stack: Stack, run_id: str) -> Any:
    """Hold the run's row lock in an open transaction (the cancel waits behind it)."""
    from sqlalchemy import create_engine

    engine = create_engine(stack.endpoints.database_url)
    conn = engine.connect()
    conn.execute(text("SELECT id FROM pipeline_runs WHERE id = :id FOR UPDATE"), {"id": run_id})
    return engine, conn


def test_ctrl_c_cancels_an_attached_run_and_a_second_one_exits_at_once(
        healthy: Stack, vault: Path, tmp_path: Path) -> None:
    stack = healthy
    pid_dir, release = tmp_path / "pids", tmp_path / "release"
    pid_dir.mkdir()

    def attached() -> tuple[subprocess.Popen[str], str, int]:
        for old in pid_dir.glob("*.pid"):
            old.unlink()
        before = stack.run_ids("slow-chain")
        cli = stack.cli_popen("run", "slow-chain", "--vault", str(vault), "--input",
                              f"hold_s={HOLD_S}", "--input", f"pid_dir={pid_dir}",
                              "--input", f"release={release}", "--json", cwd=tmp_path)
        return cli, stack.new_run("slow-chain", before), read_pid(pid_dir / "slow.pid")

    cli, run_id, script = attached()
    try:
        cli.send_signal(signal.SIGINT)
        stdout, stderr = cli.communicate(timeout=30)
        assert cli.returncode == 130, stderr
        assert f"run {run_id}" in stderr
        assert f"cancelling run {run_id} (Ctrl-C again to exit at once)" in stderr
        assert f"run {run_id} cancelled; 1 running step(s) stopped" in stderr
        assert "Traceback" not in stderr
        assert json.loads(stdout)["state"] == "cancelled"
        wait_until(lambda: gone_or_zombie(script), STOP_S, "the cancelled step's script")
        assert stack.run(run_id).state == "cancelled"
        assert [r.state for r in stack.steps(run_id)] == ["cancelled"]

        # A second Ctrl-C while the cancel is held up (the run's row locked here) exits at
        # once, and says the run may go on: it does.
        cli, run_id, script = attached()
        engine, lock = _lock_run(stack, run_id)
        try:
            cli.send_signal(signal.SIGINT)
            wait_until(lambda: "cancelling run" in _peek(cli), 10, "the first Ctrl-C's word")
            cli.send_signal(signal.SIGINT)
            started = time.monotonic()
            _, stderr = cli.communicate(timeout=10)
            assert time.monotonic() - started < 5
            assert cli.returncode == 130
            assert f"exiting; run {run_id} may still be running" in stderr
        finally:
            lock.rollback()
            lock.close()
            engine.dispose()
        assert stack.run(run_id).state == "running"
        assert not gone_or_zombie(script)
        assert stack.cli("cancel", run_id, cwd=tmp_path).returncode == 0
        wait_until(lambda: gone_or_zombie(script), STOP_S, "the second run's script")
    finally:
        release.touch()
        if cli.poll() is None:
            cli.kill()


_seen: dict[int, str] = {}


def _peek(proc: subprocess.Popen[str]) -> str:
    """What a running CLI wrote to stderr so far (non-blocking reads, kept per process)."""
    assert proc.stderr is not None
    fd = proc.stderr.fileno()
    os.set_blocking(fd, False)
    try:
        chunk = os.read(fd, 65536)
    except BlockingIOError:
        chunk = b""
    _seen[proc.pid] = _seen.get(proc.pid, "") + chunk.decode(errors="replace")
    return _seen[proc.pid]


def test_detached_run_goes_on_and_wait_follows_it(healthy: Stack, vault: Path,
                                                  tmp_path: Path) -> None:
    run_id = detach(healthy, tmp_path, "run", "echo", "--vault", str(vault),
                    "--input", "text=later", "--input", "delay_s=1")
    assert healthy.run(run_id).state in ("pending", "running")  # the CLI did not wait
    waited = healthy.cli("wait", run_id, "--json", cwd=tmp_path)
    assert waited.returncode == 0, waited.stderr
    assert f"run {run_id}" in waited.stderr
    assert json.loads(waited.stdout) == {"run_id": run_id, "state": "succeeded",
                                         "outputs": {"text": "later"}}
    plain = healthy.cli("wait", run_id, cwd=tmp_path)  # an ended run: reported at once
    assert plain.returncode == 0
    assert json.loads(plain.stdout) == {"text": "later"}

    missing = healthy.cli("wait", "run-nosuchrun", cwd=tmp_path)
    assert missing.returncode == 1
    assert "no run run-nosuchrun; `skillq runs` lists them" in missing.stderr


def test_run_json_reports_success_and_failure(run_skill: Callable[..., RunResult],
                                              vault: Path) -> None:
    ok = run_skill("echo", vault, "--json", inputs={"text": "hi"})
    assert ok.code == 0, ok
    assert json.loads(ok.stdout) == {"run_id": ok.run_id, "state": "succeeded",
                                     "outputs": {"text": "hi"}}
    assert f"run {ok.run_id}" in ok.stderr

    bad = run_skill("abort-on-failure", vault, "--json",
                    inputs={"items": ["x", "y"], "fail": ["y"]})
    assert bad.code == 1, bad
    doc = json.loads(bad.stdout)
    assert doc == {"run_id": bad.run_id, "state": "failed", "error": doc["error"],
                   "step": "each", "item": 1}
    assert "boom" in doc["error"]
    assert f"run {bad.run_id}" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_retry_runs_the_failed_steps_and_reuses_the_rest(
        healthy: Stack, ops_vault: Path, tmp_path: Path,
        run_skill: Callable[..., RunResult]) -> None:
    counts, flag = tmp_path / "counts", tmp_path / "fail-now"
    counts.mkdir()
    flag.touch()
    items = ["a", "b", "c"]
    failed = run_skill("retry-fan", ops_vault, "--json", inputs={
        "items": items, "counter_dir": str(counts), "fail_label": "b",
        "fail_flag": str(flag)})
    assert failed.code == 1, failed
    assert json.loads(failed.stdout)["step"] == "each"
    assert json.loads(failed.stdout)["item"] == 1

    def count(label: str) -> int:
        path = counts / f"{label}.count"
        return int(path.read_text()) if path.exists() else 0

    flag.unlink()  # the fix: b succeeds from now on
    retried = healthy.cli("retry", str(failed.run_id), "--json", cwd=tmp_path)
    assert retried.returncode == 0, retried.stderr
    doc = json.loads(retried.stdout)
    new_id = doc["run_id"]
    assert f"retrying run {failed.run_id} as run {new_id}" in retried.stderr
    assert doc["state"] == "succeeded"
    assert doc["outputs"]["labels"] == items
    # first ran once (reused); b ran twice (failed, then retried); a and c ran once
    # whichever way the first run left them (succeeded: reused; not run: run now).
    assert {label: count(label) for label in ["first", *items]} == \
        {"first": 1, "a": 1, "b": 2, "c": 1}

    new, old = healthy.run(new_id), healthy.run(str(failed.run_id))
    assert (new.retry_of, new.triggered_by, new.skill) == (old.id, "retry", "retry-fan")
    assert old.state == "failed"  # the retried run is left as it ended
    first = healthy.steps(new_id, "first")
    assert [r.state for r in first] == ["succeeded"]
    assert (first[0].route or "").startswith(f"reused from {old.id}/first/-1/")

    again = healthy.cli("retry", new_id, cwd=tmp_path)
    assert again.returncode == 1
    assert f"run {new_id} succeeded: nothing to retry" in again.stderr
