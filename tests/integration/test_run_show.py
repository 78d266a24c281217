"""`skillq run-show` read back through the real CLI: the JSON a script parses (shape and
values against the records), the text view's outputs, versions and --logs, secrets
redacted everywhere, and a clear error for a run that does not exist."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import VAULTS, RunResult, Stack, copy_vault

from shared import secrets

pytestmark = pytest.mark.integration

RunSkill = Callable[..., RunResult]
RUN_KEYS = {"run_id", "skill", "version", "state", "inputs", "outputs", "outputs_ref",
            "error", "failed_step", "failed_item", "started_at", "finished_at",
            "duration_ms", "source", "triggered_by", "retry_of", "steps"}
STEP_KEYS = {"step", "item", "skill", "version", "state", "attempts", "child",
             "waits"}
ATTEMPT_KEYS = {"attempt", "state", "worker", "daemon", "route", "queue", "started_at",
                "finished_at", "duration_ms", "error", "error_kind", "exit_code",
                "cache_hit", "stdout_tail", "stderr_tail",
                "tokens", "cost_usd", "turns"}  # an agent step's (test_agent_records.py)
NO_USAGE = {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}


def utc(text: str | None) -> datetime:
    assert text is not None
    moment = datetime.fromisoformat(text)
    assert moment.utcoffset() == timedelta(0), text
    return moment


def show_json(stack: Stack, run_id: str, cwd: Path,
              env: dict[str, str] | None = None) -> dict[str, Any]:
    shown = stack.cli("run-show", run_id, "--json", cwd=cwd, env=env)
    assert shown.returncode == 0, shown.stderr
    document: dict[str, Any] = json.loads(shown.stdout)  # one object, nothing else
    return document


@dataclass
class Skipped:
    run_id: str
    cwd: Path


@pytest.fixture(scope="module")
def skipped(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Skipped:
    """One run of skip-failures over a, b, c with b failing (skipped), then its summary
    step: shared by the tests that only read it."""
    stack.ensure_standard_workers()
    cwd = tmp_path_factory.mktemp("run-show")
    vault_path = copy_vault(VAULTS / "pipes", cwd / "vault")
    before = stack.run_ids("skip-failures")
    proc = stack.cli("run", "skip-failures", "--vault", str(vault_path),
                     "--input", 'items=["a", "b", "c"]', "--input", 'fail=["b"]', cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    run_id = stack.created_run("skip-failures", before)
    assert run_id is not None
    return Skipped(run_id, cwd)


def test_json_is_the_whole_run_with_steps_items_and_attempts(stack: Stack,
                                                             skipped: Skipped) -> None:
    doc = show_json(stack, skipped.run_id, skipped.cwd)
    assert set(doc) == RUN_KEYS
    assert {k: doc[k] for k in ("run_id", "skill", "version", "state", "source",
                                "triggered_by", "error", "failed_step", "failed_item")} == {
        "run_id": skipped.run_id, "skill": "skip-failures", "version": 1,
        "state": "succeeded", "source": "production", "triggered_by": "cli", "error": None,
        "failed_step": None, "failed_item": None}
    assert doc["inputs"] == {"items": ["a", "b", "c"], "fail": ["b"]}
    assert (doc["outputs"], doc["outputs_ref"]) == ({"kept": ["a", "c"], "count": 2}, None)
    started, finished = utc(doc["started_at"]), utc(doc["finished_at"])
    run = stack.run(skipped.run_id)
    assert (started, finished) == (run.started_at, run.finished_at)
    assert doc["duration_ms"] == pytest.approx((finished - started).total_seconds() * 1000)

    steps = doc["steps"]
    assert all(set(s) == STEP_KEYS for s in steps)
    assert [(s["step"], s["item"], s["skill"], s["version"], s["state"]) for s in steps] == [
        ("each", 0, "fail-on", 1, "succeeded"), ("each", 1, "fail-on", 1, "skipped"),
        ("each", 2, "fail-on", 1, "succeeded"), ("summary", None, "stamp", 1, "succeeded")]
    assert all(s["child"] is None and s["waits"] == [] for s in steps)
    attempts = [a for s in steps for a in s["attempts"]]
    assert all(set(a) == ATTEMPT_KEYS for a in attempts)
    assert all((a["tokens"], a["cost_usd"], a["turns"]) == (NO_USAGE, 0.0, [])
               for a in attempts)  # no model in a script step
    assert len(attempts) == len(stack.steps(skipped.run_id))  # every attempt row, once
    rows = {(r.step_id, r.item_index, r.attempt): r for r in stack.steps(skipped.run_id)}
    for step in steps:
        for attempt in step["attempts"]:
            row = rows[(step["step"], -1 if step["item"] is None else step["item"],
                        attempt["attempt"])]
            assert (attempt["state"], attempt["worker"], attempt["daemon"], attempt["queue"],
                    attempt["exit_code"], attempt["cache_hit"]) == (
                row.state, row.worker, row.daemon, row.queue, row.exit_code, False)
            assert (utc(attempt["started_at"]), utc(attempt["finished_at"])) == (
                row.started_at, row.finished_at)
            assert attempt["duration_ms"] == row.duration_ms and row.duration_ms is not None

    [failed] = steps[1]["attempts"]
    assert (failed["attempt"], failed["state"], failed["exit_code"], failed["error_kind"]) == \
        (1, "skipped", 1, "failed")  # exit 1 is permanent: one attempt, no retry
    assert "boom: cannot handle item 'b'" in failed["error"]
    assert "boom: cannot handle item 'b'" in failed["stderr_tail"]
    assert "fail-on: handling item 'b'" in failed["stdout_tail"]
    [ok] = steps[0]["attempts"]
    assert (ok["error"], ok["error_kind"], ok["exit_code"]) == (None, None, 0)
    assert ok["worker"].startswith("default@")


def test_text_view_shows_outputs_versions_and_with_logs_the_tails(stack: Stack,
                                                                  skipped: Skipped) -> None:
    plain = stack.cli("run-show", skipped.run_id, cwd=skipped.cwd)
    assert plain.returncode == 0, plain.stderr
    text = plain.stdout
    assert text.splitlines()[0] == f"skip-failures v1 · succeeded · {skipped.run_id}"
    assert 'outputs: {"kept": ["a", "c"], "count": 2}' in text
    assert "each → fail-on v1 (queue default)" in text
    assert "summary → stamp v1 (queue default)" in text
    assert "fail-on: handling item" not in text  # tails only with --logs

    logs = stack.cli("run-show", skipped.run_id, "--logs", cwd=skipped.cwd)
    assert logs.returncode == 0, logs.stderr
    for item in ("a", "b", "c"):
        assert f"fail-on: handling item '{item}'" in logs.stdout
    item_b = logs.stdout.split("item 1", 1)[1].split("item 2", 1)[0]
    stdout, stderr = item_b.split("stdout:", 1)[1].split("stderr:", 1)
    assert "fail-on: handling item 'b'" in stdout
    assert "boom: cannot handle item 'b'" in stderr


def test_nested_runs_and_outputs_by_reference(stack: Stack, run_skill: RunSkill,
                                              vault: Path, tmp_path: Path) -> None:
    nested = run_skill("nested", vault, inputs={"words": ["x", "y"]})
    assert nested.code == 0 and nested.run_id is not None, nested
    doc = show_json(stack, nested.run_id, tmp_path)
    assert [s["step"] for s in doc["steps"]] == ["first", "child", "last"]
    child = doc["steps"][1]["child"]
    assert child is not None and set(child) == RUN_KEYS
    (row,) = stack.steps(nested.run_id, "child")
    assert (child["run_id"], child["skill"], child["state"]) == (
        row.child_run_id, "inner", "succeeded")
    assert child["outputs"] == {"words": ["x", "y"]} and child["triggered_by"] == "nested"
    assert [(s["step"], s["item"], s["state"]) for s in child["steps"]] == [
        ("shout", 0, "succeeded"), ("shout", 1, "succeeded")]

    size = 5000  # over the stack's 1024-byte inline limit: the run's outputs are a $ref
    big = run_skill("big-pipe", vault, inputs={"size": size})
    assert big.code == 0 and big.run_id is not None, big
    doc = show_json(stack, big.run_id, tmp_path)
    stored: Any = stack.run(big.run_id).outputs
    assert doc["outputs_ref"] == stored["$ref"]
    assert doc["outputs"]["length"] == size and len(doc["outputs"]["blob"]) == size
    assert doc["outputs"]["sha256"] == hashlib.sha256(doc["outputs"]["blob"].encode()
                                                      ).hexdigest()
    text = stack.cli("run-show", big.run_id, cwd=tmp_path).stdout
    line = next(ln for ln in text.splitlines() if ln.startswith("outputs: "))
    assert f"characters; --json shows them whole) (stored by reference {stored['$ref']})" \
        in line and len(line) < 500


def test_secret_values_appear_nowhere_in_what_run_show_prints(
        healthy: Stack, run_skill: RunSkill, vault: Path, tmp_path: Path) -> None:
    lifecycle = copy_vault(VAULTS / "lifecycle", tmp_path / "lifecycle")
    token = f"flop-{uuid.uuid4().hex}"
    secrets.store(healthy.home / secrets.SECRETS_FILE, "flop_token", token)
    flop = run_skill("flop", lifecycle, inputs={"note": f"key {token} here"})
    assert flop.code == 1 and flop.run_id is not None, flop
    # The run's inputs are recorded as given: hiding the value is run-show's job.
    recorded: Any = healthy.run(flop.run_id).inputs
    assert token in recorded["note"]

    shown = healthy.cli("run-show", flop.run_id, "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert token not in shown.stdout + shown.stderr
    doc = json.loads(shown.stdout)
    assert doc["inputs"] == {"note": "key *** here"}
    assert (doc["state"], doc["failed_step"]) == ("failed", "flop")
    [attempt] = doc["steps"][0]["attempts"]
    assert "flopped on key *** here" in attempt["stderr_tail"]
    text = healthy.cli("run-show", flop.run_id, "--logs", cwd=tmp_path)
    assert text.returncode == 0 and "flopped on key *** here" in text.stdout, text.stderr
    assert token not in text.stdout + text.stderr

    # A secret no step declares, known only to the reading machine: echo records it
    # as it was given, and run-show still hides it.
    other = f"other-{uuid.uuid4().hex}"
    echo = run_skill("echo", vault, inputs={"text": other})
    assert echo.code == 0 and echo.run_id is not None, echo
    env = {secrets.env_name("run_show_other"): other}
    doc = show_json(healthy, echo.run_id, tmp_path, env=env)
    assert (doc["inputs"]["text"], doc["outputs"]) == ("***", {"text": "***"})
    assert other not in json.dumps(doc)


def test_an_unknown_run_is_one_line_and_exit_1(stack: Stack, tmp_path: Path) -> None:
    for extra in ((), ("--json",), ("--logs",)):
        shown = stack.cli("run-show", "run-0000000000000000", *extra, cwd=tmp_path)
        assert shown.returncode == 1, shown
        assert shown.stdout == ""
        assert shown.stderr == \
            "error: no run run-0000000000000000; `skillq runs` lists them\n", shown.stderr
