"""Pipelines run for real: `skillq run` against the embedded Redis and PostgreSQL and real
Celery workers (tests/integration/conftest.py), checked on the CLI's exit code and output
AND on the records in PostgreSQL.

The skills are the fixture vault tests/integration/vaults/pipes (copied per test, since
workers write benchmarks.json into the run's vault) and the offline example
examples/git-digest.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    EXAMPLES,
    HOST,
    INLINE_OUTPUT_BYTES,
    RUN_TIMEOUT_S,
    VAULTS,
    RunResult,
    Stack,
    children_of,
    copy_vault,
    proc_stat,
    skillq_argv,
    step_processes,
    wait_until,
)
from sqlalchemy import func, select, text

from lifecycle.step_counts import state_counts
from shared.db.models import Artifact, CacheEntry, PipelineRun, StepRun
from shared.store import canonical_json, is_ref, unpack

pytestmark = pytest.mark.integration

RunSkill = Callable[..., RunResult]


def by_item(rows: list[StepRun]) -> dict[int, list[StepRun]]:
    found: dict[int, list[StepRun]] = {}
    for row in rows:
        found.setdefault(row.item_index, []).append(row)
    return found


def outputs_of(stack: Stack, row: StepRun) -> Any:
    with stack.db() as session:
        return unpack(session, row.outputs)


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


# -- fan-out, branches, on_failure ----------------------------------------------------------

def test_fan_out_then_parallel_branches_keep_item_order(stack: Stack, run_skill: RunSkill,
                                                         vault: Path) -> None:
    # Item 0 sleeps longest, so the items finish out of order; the outputs must not.
    items = [{"text": "a", "delay_s": 0.8}, {"text": "b", "delay_s": 0.3},
             {"text": "c", "delay_s": 0}]
    result = run_skill("branches", vault, "--json", inputs={"items": items})
    assert result.code == 0, result
    assert result.json() == {"collected": ["a", "b", "c"], "left_texts": ["a", "b", "c"],
                             "right_texts": ["a", "b", "c"]}

    assert result.run_id is not None
    run = stack.run(result.run_id)
    assert run.state == "succeeded" and run.error is None
    fan = stack.steps(run.id, "fan")
    assert [(r.item_index, r.attempt, r.state) for r in fan] == \
        [(0, 1, "succeeded"), (1, 1, "succeeded"), (2, 1, "succeeded")]
    assert [outputs_of(stack, r) for r in fan] == [{"text": "a"}, {"text": "b"}, {"text": "c"}]
    assert fan[0].finished_at and fan[2].finished_at
    assert fan[0].finished_at > fan[2].finished_at, "the items did not finish out of order"

    fan_done = max(r.finished_at for r in fan if r.finished_at)
    (left,), (right,) = stack.steps(run.id, "left"), stack.steps(run.id, "right")
    for branch in (left, right):
        assert branch.state == "succeeded"
        assert branch.created_at >= fan_done - timedelta(milliseconds=50)  # after the fan-in
    # Both launched by the same planner pass: neither waited for the other.
    assert abs((left.created_at - right.created_at).total_seconds()) < 0.5
    spans = []
    for branch in (left, right):
        out = outputs_of(stack, branch)
        spans.append((out["start"], out["end"]))
    assert overlap(spans[0], spans[1]), f"the branches ran one after the other: {spans}"


def test_quick_items_go_in_batches_yet_each_keeps_its_own_record(
        stack: Stack, run_skill: RunSkill, vault: Path) -> None:
    # The first run gives echo a history; with it, the planner sends echo's items several
    # to a message (lifecycle/planner.py), claimed in one statement. The fan step is
    # the run's first, so the client plans it: its settings size the batches, generously
    # here so that a loaded machine's slow python3 still makes batches.
    texts = [f"t{i}" for i in range(24)]
    for _ in range(2):
        result = run_skill("empty-fan", vault, "--json", inputs={"items": texts},
                           env={"SKILLQ_BATCH_TARGET_MS": "5000"})
        assert result.code == 0, result
        assert result.json() == {"texts": texts, "count": 24}
    assert result.run_id is not None
    fan = stack.steps(result.run_id, "fan")
    assert [(r.item_index, r.attempt, r.state) for r in fan] == \
        [(i, 1, "succeeded") for i in range(24)]
    assert [outputs_of(stack, r) for r in fan] == [{"text": t} for t in texts]
    claims = {r.started_at for r in fan}  # a batch's items are claimed at one instant
    assert len(claims) < len(fan), "every item went in a message of its own"
    assert all(r.worker and r.duration_ms is not None for r in fan)


def test_on_failure_skip_drops_the_failed_item(stack: Stack, run_skill: RunSkill,
                                               vault: Path) -> None:
    result = run_skill("skip-failures", vault, "--json",
                       inputs={"items": ["a", "b", "c"], "fail": ["b"]})
    assert result.code == 0, result
    assert result.json() == {"kept": ["a", "c"], "count": 2}

    assert result.run_id is not None
    assert stack.run(result.run_id).state == "succeeded"
    items = by_item(stack.steps(result.run_id, "each"))
    assert [[r.state for r in items[i]] for i in range(3)] == \
        [["succeeded"], ["skipped"], ["succeeded"]]  # exit 1 is permanent: no retry
    skipped = items[1][0]
    assert skipped.exit_code == 1 and skipped.error_kind == "failed"
    assert "boom: cannot handle item 'b'" in (skipped.error or "")
    (summary,) = stack.steps(result.run_id, "summary")
    assert summary.state == "succeeded" and outputs_of(stack, summary)["texts"] == ["a", "c"]


LONG_ITEM = "item-" + "x" * 90  # its error line is longer than an 80-column terminal


@dataclass
class Aborted:
    result: RunResult
    cwd: Path


@pytest.fixture(scope="module")
def aborted(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Aborted:
    """One run of abort-on-failure whose item 1 fails, shared by the tests reading it."""
    stack.ensure_standard_workers()
    cwd = tmp_path_factory.mktemp("aborted")
    vault_path = copy_vault(VAULTS / "pipes", cwd / "vault")
    before = stack.run_ids("abort-on-failure")
    proc = stack.cli("run", "abort-on-failure", "--vault", str(vault_path),
                     "--input", f"items={json.dumps(['a', LONG_ITEM, 'c'])}",
                     "--input", f"fail={json.dumps([LONG_ITEM])}", cwd=cwd)
    return Aborted(RunResult(proc, stack.created_run("abort-on-failure", before)), cwd)


def test_on_failure_abort_exits_1_naming_step_item_and_error(stack: Stack,
                                                             aborted: Aborted) -> None:
    result = aborted.result
    assert result.code == 1, result
    assert result.stdout == ""
    message = " ".join(result.stderr.split())
    assert f"step 'each' item 1 failed: boom: cannot handle item '{LONG_ITEM}'" in message

    assert result.run_id is not None
    run = stack.run(result.run_id)
    assert run.state == "failed" and run.finished_at is not None
    assert (run.failed_step, run.failed_item) == ("each", 1)
    assert run.error and "boom" in run.error and run.id in message
    states = {i: [r.state for r in rows] for i, rows in by_item(stack.steps(run.id,
                                                                            "each")).items()}
    assert states == {0: ["succeeded"], 1: ["failed"], 2: ["succeeded"]}
    assert stack.steps(run.id, "after") == []  # nothing after the aborted step ran


def test_every_item_failing_aborts_even_with_skip(stack: Stack, run_skill: RunSkill,
                                                  vault: Path) -> None:
    result = run_skill("skip-failures", vault,
                       inputs={"items": ["p", "q"], "fail": ["p", "q"]})
    assert result.code == 1, result
    message = " ".join(result.stderr.split())
    assert "step 'each' item 0 failed: every one of its 2 items failed; the first: " \
        "boom: cannot handle item 'p'" in message

    assert result.run_id is not None
    run = stack.run(result.run_id)
    assert (run.state, run.failed_step, run.failed_item) == ("failed", "each", 0)
    assert [r.state for r in stack.steps(run.id, "each")] == ["failed", "failed"]
    assert stack.steps(run.id, "summary") == []


def test_empty_list_continues_at_once(stack: Stack, run_skill: RunSkill, vault: Path) -> None:
    result = run_skill("empty-fan", vault, "--json", inputs={"items": []})
    assert result.code == 0, result
    assert result.json() == {"texts": [], "count": 0}

    assert result.run_id is not None
    run = stack.run(result.run_id)
    assert run.state == "succeeded"
    assert run.progress["fan"] == {"state": "done", "items": 0}
    assert stack.steps(run.id, "fan") == []  # no step rows, no empty chord waiting
    (after,) = stack.steps(run.id, "after")
    assert after.state == "succeeded"
    assert run.started_at is not None
    # launched by the run's first planner pass, not after some timeout
    assert (after.created_at - run.started_at).total_seconds() < 1.0


@pytest.fixture(scope="module")
def side_runs(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunResult]:
    """Three small runs started at once (the workers interleave them): on_failure continue
    over a fan-out and on a single step, and a fan-out whose item lacks a field."""
    stack.ensure_standard_workers()
    cwd = tmp_path_factory.mktemp("side")
    vault_path = copy_vault(VAULTS / "pipes", cwd / "vault")
    calls = {
        "continue-failures": ["--input", 'items=["a","b","c"]', "--input", 'fail=["b"]'],
        "continue-single": ["--input", 'fail=["solo"]'],
        "branches": ["--input", 'items=[{"text": "a", "delay_s": 0}, {"nope": 1}]'],
    }
    before = {name: stack.run_ids(name) for name in calls}
    procs = {name: stack.cli_popen("run", name, "--vault", str(vault_path), *args, "--json",
                                   cwd=cwd) for name, args in calls.items()}
    results = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=120)
        done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
        results[name] = RunResult(done, stack.created_run(name, before[name]))
    return results


def test_on_failure_continue_keeps_the_failed_item_as_null(
        stack: Stack, side_runs: dict[str, RunResult]) -> None:
    result = side_runs["continue-failures"]
    assert result.code == 0, result
    assert result.json()["results"] == [{"item": "a"}, None, {"item": "c"}]
    assert result.run_id is not None
    assert stack.run(result.run_id).state == "succeeded"
    states = [r.state for r in stack.steps(result.run_id, "each")]
    assert states == ["succeeded", "failed", "succeeded"]  # recorded as failed, not skipped


# Regression (bug at 03fc86d): the failed items were dropped from the output list
# (shared/resolve.py skipped None items), contrary to docs/running.md.
def test_on_failure_continue_keeps_null_in_an_output_list(
        side_runs: dict[str, RunResult]) -> None:
    result = side_runs["continue-failures"]
    assert result.code == 0, result
    assert result.json()["kept"] == ["a", None, "c"]


# Regression (bug at 03fc86d): the run failed with "step 'outputs' failed: ...
# no field 'item' in null" instead of continuing with null.
def test_single_step_on_failure_continue_continues_with_null(
        stack: Stack, side_runs: dict[str, RunResult]) -> None:
    result = side_runs["continue-single"]
    assert result.run_id is not None
    assert [r.state for r in stack.steps(result.run_id, "one")] == ["failed"]
    assert [r.state for r in stack.steps(result.run_id, "after")] == ["succeeded"]
    assert result.code == 0, result
    assert result.json() == {"got": None, "after": "after"}


def _launch_failed(stack: Stack, side_runs: dict[str, RunResult]) -> PipelineRun:
    result = side_runs["branches"]
    assert result.code == 1, result
    assert "step 'fan'" in result.stderr and "no field 'text'" in result.stderr
    assert result.run_id is not None
    run = stack.run(result.run_id)
    assert (run.state, run.failed_step) == ("failed", "fan")
    return run


# Regression (bug at 03fc86d): the items before the failing one were committed and
# dispatched, then refused by the worker, and stayed 'pending' forever.
def test_a_launch_failure_leaves_no_step_pending(stack: Stack,
                                                 side_runs: dict[str, RunResult]) -> None:
    run = _launch_failed(stack, side_runs)
    time.sleep(0.5)  # whatever was dispatched has been delivered and refused by now
    assert [(r.id, r.state) for r in stack.steps(run.id) if r.state == "pending"] == []


# Regression (bug at 03fc86d): failed_item was NULL and the message named no item.
def test_a_launch_failure_names_the_item(stack: Stack,
                                         side_runs: dict[str, RunResult]) -> None:
    run = _launch_failed(stack, side_runs)
    assert run.failed_item == 1
    assert "step 'fan' item 1 failed" in (run.error or "")


def test_a_run_no_worker_serves_exits_1_and_creates_nothing(healthy: Stack, vault: Path,
                                                            tmp_path: Path) -> None:
    healthy.consumer("dom0", "dom0", on=False)
    try:
        before = len(healthy.runs_of("dom0-five"))
        proc = healthy.cli("run", "dom0-five", "--vault", str(vault), "--input",
                           'labels=["x"]', cwd=tmp_path)
    finally:
        healthy.consumer("dom0", "dom0", on=True)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    message = " ".join(proc.stderr.split())
    assert "no online worker can run what this run needs: step 'each' (dom0-stamp) needs " \
        "queue 'dom0': no online daemon serves queue 'dom0'" in message, message
    assert "skillq worker --queues dom0" in message
    assert len(healthy.runs_of("dom0-five")) == before


# -- nested orchestrators -----------------------------------------------------------------

def _child_run(stack: Stack, parent_run_id: str) -> PipelineRun:
    def find() -> PipelineRun | None:
        with stack.db() as session:
            child = session.scalars(select(PipelineRun).where(
                PipelineRun.parent_step_run_id == f"{parent_run_id}/child/-1/1")).first()
            if child is not None:
                session.expunge(child)
            return child

    found: PipelineRun = wait_until(find, 30, "the nested child run row")
    return found


# Regression (bug at 03fc86d): the child run was created but never advanced (the worker
# only nudged the parent run), so it stayed 'pending' and the parent hung forever.
def test_nested_orchestrator_runs_the_child_and_gets_its_outputs(
        stack: Stack, run_skill: RunSkill, vault: Path, tmp_path: Path) -> None:
    result = run_skill("nested", vault, "--json", inputs={"words": ["x", "y"]},
                       timeout_s=RUN_TIMEOUT_S)
    assert result.code == 0, result
    assert result.json() == {"words": ["x", "y"], "count": 2}

    assert result.run_id is not None
    parent_id = result.run_id
    assert stack.run(parent_id).state == "succeeded"
    child = _child_run(stack, parent_id)
    assert child.state == "succeeded" and child.skill == "inner"
    assert child.triggered_by == "nested"
    shout = stack.steps(child.id, "shout")
    assert [(r.item_index, r.state) for r in shout] == [(0, "succeeded"), (1, "succeeded")]
    (step,) = stack.steps(parent_id, "child")
    assert step.state == "succeeded" and step.child_run_id == child.id
    assert step.queue == "control"
    assert outputs_of(stack, step) == {"words": ["x", "y"]}
    with stack.db() as session:
        assert unpack(session, child.outputs) == {"words": ["x", "y"]}
    (first,), (last,) = stack.steps(parent_id, "first"), stack.steps(parent_id, "last")
    assert first.finished_at is not None and child.created_at >= first.finished_at
    assert outputs_of(stack, last)["texts"] == ["x", "y"]
    assert stack.runs_of("inner") and all(r.parent_step_run_id for r in stack.runs_of("inner"))

    show = stack.cli("run-show", parent_id, cwd=tmp_path)
    assert show.returncode == 0, show.stderr
    assert child.id in show.stdout and "inner" in show.stdout and "shout" in show.stdout
    listing = stack.cli("runs", cwd=tmp_path)
    assert parent_id in listing.stdout and child.id not in listing.stdout  # top-level only


# -- retries, timeouts --------------------------------------------------------------------

def test_transient_exit_is_retried_until_success(stack: Stack, run_skill: RunSkill,
                                                 vault: Path, tmp_path: Path) -> None:
    counter_dir = tmp_path / "counter"
    counter_dir.mkdir()
    result = run_skill("flaky", vault, "--json",
                       inputs={"counter_dir": str(counter_dir), "succeed_on": 3})
    assert result.code == 0, result
    assert result.json() == {"attempts": 3}
    assert (counter_dir / "count").read_text() == "3"

    assert result.run_id is not None
    rows = stack.steps(result.run_id)
    assert [(r.attempt, r.state, r.exit_code) for r in rows] == \
        [(1, "retrying", 75), (2, "retrying", 75), (3, "succeeded", 0)]
    assert [r.id for r in rows] == [f"{result.run_id}/flaky/-1/{n}" for n in (1, 2, 3)]
    for failed, retry in itertools.pairwise(rows):
        assert failed.error_kind == "transient" and "not yet" in (failed.error or "")
        assert failed.not_before is not None and retry.started_at is not None
        assert retry.started_at >= failed.not_before - timedelta(milliseconds=50)  # backoff
    assert stack.run(result.run_id).state == "succeeded"


def test_hanging_script_is_killed_at_its_timeout(stack: Stack, run_skill: RunSkill,
                                                 vault: Path, tmp_path: Path) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    result = run_skill("hang", vault, inputs={"pid_dir": str(pid_dir)})
    assert result.code == 1, result
    assert "step 'hang' failed: timed out after 1 s" in " ".join(result.stderr.split())

    assert all((pid_dir / f"{name}.pid").exists() for name in ("script", "grandchild"))
    assert result.run_id is not None
    (row,) = stack.steps(result.run_id)  # a timeout is not retried
    # The grandchild ignored SIGTERM: SIGKILL got it, and the script, by their tag.
    wait_until(lambda: not step_processes(row.id), 5, "the script and its grandchild to die")
    assert (row.state, row.error_kind) == ("failed", "timeout")
    assert row.duration_ms is not None and 900 <= row.duration_ms < 10_000


# -- cache, references --------------------------------------------------------------------

def test_second_identical_run_is_a_cache_hit(stack: Stack, run_skill: RunSkill,
                                             vault: Path) -> None:
    key = uuid.uuid4().hex
    first = run_skill("token", vault, "--json", inputs={"key": key})
    second = run_skill("token", vault, "--json", inputs={"key": key})
    for result in (first, second):
        assert result.code == 0, result
        assert len(result.stdout.splitlines()) == 1  # --json: one line of JSON, nothing else
    token = first.json()["token"]
    assert first.json() == second.json() == {"key": key, "token": token}

    assert first.run_id and second.run_id and first.run_id != second.run_id
    (miss,), (hit,) = stack.steps(first.run_id), stack.steps(second.run_id)
    assert (miss.state, miss.cache_hit) == ("succeeded", False)
    assert (hit.state, hit.cache_hit) == ("succeeded", True)
    assert outputs_of(stack, hit) == {"key": key, "token": token}
    with stack.db() as session:
        entries = session.scalars(select(CacheEntry).where(CacheEntry.skill == "token",
                                                           CacheEntry.step_run_id == miss.id)
                                  ).all()
        assert [e.outputs for e in entries] == [{"key": key, "token": token}]
        # A hit is claimed, recorded and its run ended in one transaction: its records
        # are those of any attempt (claimed by a worker, counted once, benchmarks.json
        # showing it by the time `skillq run` returned).
        assert hit.worker and hit.started_at and hit.finished_at and hit.duration_ms == 0.0
        assert state_counts(session, [second.run_id]) == {"succeeded": 1}
    assert bench_runs(vault, "token")[-1]["run_id"] == hit.id
    assert bench_runs(vault, "token")[-1]["cache_hit"] is True


def test_a_default_left_out_or_given_finds_one_cache_entry(stack: Stack, run_skill: RunSkill,
                                                            vault: Path) -> None:
    """Keyed by the inputs the script sees, defaults applied: a run that gives the salt's
    default hits the entry of one that left it out (its claim's key is that of the inputs
    as given, so the worker looks the entry up itself), and the other way round."""
    key = uuid.uuid4().hex
    left_out = run_skill("token-salted", vault, "--json", inputs={"key": key})
    given = run_skill("token-salted", vault, "--json", inputs={"key": key, "salt": "pepper"})
    again = run_skill("token-salted", vault, "--json", inputs={"key": key})
    other = run_skill("token-salted", vault, "--json", inputs={"key": key, "salt": "salt"})
    for result in (left_out, given, again, other):
        assert result.code == 0, result
    token = left_out.json()["token"]
    assert left_out.json() == given.json() == again.json() == {
        "key": key, "salt": "pepper", "token": token}
    assert other.json()["salt"] == "salt" and other.json()["token"] != token
    hits = [stack.steps(r.run_id)[0].cache_hit for r in (left_out, given, again, other)
            if r.run_id]
    assert hits == [False, True, True, False]


def blob(size: int) -> str:
    return "".join(chr(97 + (i * 7) % 26) for i in range(size))  # as big.py makes it


def test_large_outputs_travel_by_reference(stack: Stack, run_skill: RunSkill,
                                           vault: Path) -> None:
    size = 5000
    expected = blob(size)
    result = run_skill("big-pipe", vault, "--json", inputs={"size": size})
    assert result.code == 0, result
    # The run's outputs are a reference too: the CLI prints the whole value.
    assert result.json() == {"length": size, "blob": expected,
                             "sha256": hashlib.sha256(expected.encode()).hexdigest()}

    assert result.run_id is not None
    (make,), (check,) = stack.steps(result.run_id, "make"), stack.steps(result.run_id, "check")
    assert is_ref(make.outputs), make.outputs  # over SKILLQ_INLINE_OUTPUT_BYTES
    assert is_ref(check.inputs), check.inputs  # handed on by reference too
    key = make.outputs["$ref"]
    assert key == "sha256:" + hashlib.sha256(canonical_json({"blob": expected})).hexdigest()
    with stack.db() as session:
        artifact = session.get(Artifact, key)
        assert artifact is not None and artifact.size > INLINE_OUTPUT_BYTES
        assert json.loads(artifact.content) == {"blob": expected}
        assert unpack(session, check.inputs) == {"blob": expected}  # the full value
        run = session.get(PipelineRun, result.run_id)
        assert run is not None and is_ref(run.outputs)


# -- bad input ------------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "message"), [
    (["flaky", "--input", "counter_dir=/tmp"],
     "flaky.succeed_on: required input is missing (integer)"),
    (["flaky", "--input", "counter_dir=/tmp", "--input", "succeed_on=abc"],
     "succeed_on: expected integer, got 'abc' (declared type integer)"),
    (["flaky", "--input", "counter_dir=/tmp", "--input", "succeed_on=2", "--input", "bogus=1"],
     "flaky.bogus: unknown input; flaky takes: counter_dir, succeed_on"),
    (["no-such-skill"], "no skill named 'no-such-skill' in vault"),
], ids=["missing-required", "wrong-type", "unknown-input", "unknown-skill"])
def test_bad_input_exits_2_and_creates_no_run(healthy: Stack, vault: Path, tmp_path: Path,
                                              args: list[str], message: str) -> None:
    def count() -> int:
        with healthy.db() as session:
            return int(session.scalar(select(func.count()).select_from(PipelineRun)) or 0)

    before = count()
    proc = healthy.cli("run", *args[:1], "--vault", str(vault), *args[1:], cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert message in " ".join(proc.stderr.split())
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert count() == before


# -- dom0 -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dom0_run(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    """dom0-five: five dom0 items launched at once (shared by the dom0 tests)."""
    stack.ensure_standard_workers()
    cwd = tmp_path_factory.mktemp("dom0")
    vault_path = copy_vault(VAULTS / "pipes", cwd / "vault")
    labels = [f"d{i}" for i in range(5)]
    before = stack.run_ids("dom0-five")
    proc = stack.cli("run", "dom0-five", "--vault", str(vault_path), "--input",
                     f"labels={json.dumps(labels)}", "--input", "hold_s=0.3", "--json",
                     cwd=cwd)
    return RunResult(proc, stack.created_run("dom0-five", before))


def test_dom0_items_run_one_at_a_time_on_the_dom0_worker(stack: Stack,
                                                         dom0_run: RunResult) -> None:
    assert dom0_run.code == 0, dom0_run
    out = dom0_run.json()
    assert out["labels"] == [f"d{i}" for i in range(5)]
    assert dom0_run.run_id is not None
    rows = stack.steps(dom0_run.run_id, "each")
    assert [(r.item_index, r.state, r.queue) for r in rows] == \
        [(i, "succeeded", "dom0") for i in range(5)]
    assert rows[0].created_at == rows[4].created_at  # launched at once (one transaction)

    # Regression (bug at 03fc86d): the worker column held only the host name.
    assert {r.worker for r in rows} == {f"dom0@{HOST}"}
    dom0 = stack.workers["dom0"]
    pool = set(dom0.pool())
    for row in rows:  # taken by the dom0 worker's pool process, by no other worker
        assert row.worker_pid in pool, (row.worker_pid, pool, dom0.pid)
        fields = proc_stat(row.worker_pid) if row.worker_pid else None
        assert fields is not None and int(fields[1]) == dom0.pid
    others = {pid for name, w in stack.workers.items() if name != "dom0"
              for pid in children_of(w.pid)}
    assert not pool & others

    spans = sorted(zip(out["starts"], out["ends"], strict=True))
    for earlier, later in itertools.pairwise(spans):
        assert earlier[1] <= later[0], f"dom0 scripts overlapped: {spans}"
    recorded = sorted((r.started_at, r.finished_at) for r in rows)
    for earlier, later in itertools.pairwise(recorded):
        assert earlier[1] is not None and later[0] is not None and earlier[1] <= later[0]


# -- the example pipeline -------------------------------------------------------------------

def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={**os.environ, **(env or {})})


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    authors = [("Ada Lovelace", "ada@example.com"), ("Alan Turing", "alan@example.com"),
               ("Ada Lovelace", "ada@example.com")]
    for n, (name, email) in enumerate(authors):
        (repo / f"file{n}.txt").write_text("line\n" * (n + 1))
        git(repo, "add", ".")
        git(repo, "-c", f"user.name={name}", "-c", f"user.email={email}", "commit", "-q",
            "-m", f"change {n}")
    return repo


def bench_runs(vault_path: Path, skill: str) -> list[dict[str, Any]]:
    data = json.loads((vault_path / skill / "benchmarks.json").read_text())
    runs: list[dict[str, Any]] = data["runs"]
    return runs


GIT_DIGEST_SKILLS = ("git-digest", "git-recent-commits", "commit-stats", "svg-bar-chart",
                     "markdown-report")


def test_git_digest_example_runs_end_to_end(stack: Stack, run_skill: RunSkill,
                                            tmp_path: Path, git_repo: Path) -> None:
    vault_path = copy_vault(EXAMPLES / "git-digest", tmp_path / "git-digest")
    assert {s: bench_runs(vault_path, s) for s in GIT_DIGEST_SKILLS} == \
        {skill: [] for skill in GIT_DIGEST_SKILLS}
    out_dir = tmp_path / "digest"
    not_a_repo = tmp_path / "not-a-repo"  # its item fails and is skipped
    not_a_repo.mkdir()
    result = run_skill("git-digest", vault_path, "--json",
                       inputs={"repos": [str(git_repo), str(not_a_repo)],
                               "output_dir": str(out_dir), "title": "Weekly"})
    assert result.code == 0, result
    out = result.json()
    assert out["totals"]["commits"] == 3 and out["totals"]["authors"] == 2
    assert out["totals"]["repos"] == 1
    assert out["report_path"] == str(out_dir / "digest.md")
    report = (out_dir / "digest.md").read_text()
    assert report == out["markdown"] and report.startswith("# Weekly")
    assert (out_dir / "commits.svg").read_text().lstrip().startswith("<svg")

    assert result.run_id is not None
    run = stack.run(result.run_id)
    assert run.state == "succeeded" and run.vault == str(vault_path)
    commits = by_item(stack.steps(run.id, "commits"))
    assert [r.state for r in commits[0]] == ["succeeded"]
    assert [r.state for r in commits[1]] == ["skipped"]  # the missing path, on_failure: skip
    assert "not a git repository" in (commits[1][0].error or "")
    for step in ("stats", "chart", "report"):
        assert [r.state for r in stack.steps(run.id, step)] == ["succeeded"], step

    expected = {"git-digest": 1, "git-recent-commits": 2, "commit-stats": 1,
                "svg-bar-chart": 1, "markdown-report": 1}

    def counted() -> dict[str, int]:
        return {s: len(bench_runs(vault_path, s)) for s in GIT_DIGEST_SKILLS}

    # Written in the transaction that settles each step and the run: already there when
    # the CLI returns.
    assert counted() == expected
    for skill, ran in expected.items():  # aggregates over the whole history, this run in
        totals = json.loads((vault_path / skill / "benchmarks.json").read_text())["aggregates"]
        assert totals["total_runs"] >= ran and 0 <= totals["success_rate"] <= 1, skill
    # The running totals behind them equal a count over the records.
    with stack.db() as session:
        for skill in GIT_DIGEST_SKILLS:
            kind = "pipeline" if skill == "git-digest" else "step"
            table = "pipeline_runs" if kind == "pipeline" else "step_runs"
            final = "('succeeded', 'failed')" if kind == "pipeline" else \
                "('succeeded', 'failed', 'skipped')"
            row = session.execute(text(  # one statement: one snapshot
                f"SELECT (SELECT count(*) FROM {table} WHERE skill = :s AND state IN "
                f"{final}), (SELECT count(*) FROM {table} WHERE skill = :s AND state = "
                "'succeeded'), (SELECT runs FROM skill_stats WHERE skill = :s AND kind = :k), "
                "(SELECT successes FROM skill_stats WHERE skill = :s AND kind = :k)"),
                {"s": skill, "k": kind}).one()
            assert (row[0], row[1]) == (row[2], row[3]), skill
    pipeline = bench_runs(vault_path, "git-digest")[0]
    assert pipeline["run_id"] == run.id and pipeline["success"] is True
    leaf = {r["run_id"]: r for r in bench_runs(vault_path, "git-recent-commits")}
    assert leaf[commits[1][0].id]["success"] is False
    assert leaf[commits[0][0].id]["triggered_by"] == "git-digest"


# -- the CLI around runs ------------------------------------------------------------------

def test_runs_and_run_show_show_the_run(stack: Stack, aborted: Aborted) -> None:
    run_id = aborted.result.run_id
    assert run_id is not None
    wide = {"COLUMNS": "250"}
    listing = stack.cli("runs", cwd=aborted.cwd, env=wide)
    assert listing.returncode == 0, listing.stderr
    line = next((ln for ln in listing.stdout.splitlines() if run_id in ln), None)
    assert line is not None, listing.stdout
    assert "abort-on-failure" in line and "failed" in line and "step 'each' item 1" in line

    show = stack.cli("run-show", run_id, cwd=aborted.cwd, env=wide)
    assert show.returncode == 0, show.stderr
    text = show.stdout
    assert text.splitlines()[0] == f"abort-on-failure v1 · failed · {run_id}"
    assert f"step 'each' item 1 failed: boom: cannot handle item '{LONG_ITEM}'" in text
    assert "each → fail-on v1 (queue default)" in text
    for item in ("item 0", "item 1", "item 2"):
        assert item in text
    assert text.count("succeeded · attempt 1") == 2 and text.count("failed · attempt 1") == 1
    assert f"on default@{HOST}" in text  # the worker column
    assert f"boom: cannot handle item '{LONG_ITEM}'" in text.split("item 1", 1)[1]

    nothing = stack.cli("run-show", "run-0000000000000000", cwd=aborted.cwd)
    assert nothing.returncode == 1 and "no run run-0000000000000000" in nothing.stderr


# Regression (bug at 03fc86d): piped, run-show cropped every line at 80 columns.
def test_run_show_in_a_pipe_keeps_the_whole_error(stack: Stack, aborted: Aborted) -> None:
    assert aborted.result.run_id is not None
    env = {k: v for k, v in stack.cli_env.items() if k not in ("COLUMNS", "LINES")}
    show = subprocess.run(skillq_argv("run-show", aborted.result.run_id), env=env,
                          cwd=aborted.cwd, capture_output=True, text=True, timeout=60,
                          check=False)
    assert show.returncode == 0, show.stderr
    assert LONG_ITEM in " ".join(show.stdout.split()), show.stdout


def test_detach_prints_the_run_id_and_returns_before_completion(
        stack: Stack, run_skill: RunSkill, vault: Path) -> None:
    result = run_skill("stamp", vault, "--detach", inputs={"label": "bg", "hold_s": 2})
    assert result.code == 0, result
    assert result.run_id is not None
    assert result.stdout == f"{result.run_id}\n"
    assert stack.run(result.run_id).state in ("pending", "running")  # not waited for
    run = stack.wait_run(result.run_id)
    assert run.state == "succeeded"
    (row,) = stack.steps(run.id)
    assert row.state == "succeeded" and outputs_of(stack, row)["label"] == "bg"


# Regression (bug at 03fc86d): the relative path was stored as is and resolved by the
# workers against their own working directory.
def test_relative_vault_path_runs(run_skill: RunSkill, vault: Path, tmp_path: Path) -> None:
    assert vault.parent == tmp_path  # the CLI runs in tmp_path: "vault" names the copy
    result = run_skill("echo", Path("vault"), "--json", inputs={"text": "hi"})
    assert result.code == 0, result
    assert result.json() == {"text": "hi"}
