"""`skillq test` for real: benchmarks.json cases through the queues of the embedded stack
(tests/integration/conftest.py), checked on the exit code, the table, and the records
(pipeline_runs with source test_window, one test_results row per case)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import EXAMPLES, VAULTS, Stack, copy_vault
from sqlalchemy import select

from orchestrator.testing import last_results
from shared.db.models import PipelineRun

pytestmark = pytest.mark.integration


@pytest.fixture
def lifecycle(tmp_path: Path) -> Path:
    return copy_vault(VAULTS / "lifecycle", tmp_path / "vault")


def test_passing_cases_exit_0_and_are_recorded(healthy: Stack, lifecycle: Path,
                                               tmp_path: Path) -> None:
    before = healthy.run_ids("greet")  # other tests here run greet's cases too
    result = healthy.cli("test", "greet", "--vault", str(lifecycle), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "3 test case(s) passed" in result.stdout
    for test_id in ("hello", "refuses", "no-name"):
        assert test_id in result.stdout
    with healthy.db() as session:
        runs = {r.triggered_by: r for r in session.scalars(
            select(PipelineRun).where(PipelineRun.skill == "greet",
                                      PipelineRun.source == "test_window",
                                      PipelineRun.id.not_in(before)))}
        results = last_results(session, "greet")
        assert {k: (results[k].passed, results[k].run_id)
                for k in ("hello", "refuses", "no-name")} == {
            "hello": (True, runs["test:hello"].id), "refuses": (True, runs["test:refuses"].id),
            "no-name": (True, None)}  # refused before anything was recorded
    assert runs["test:hello"].state == "succeeded" and runs["test:refuses"].state == "failed"
    assert "test:no-name" not in runs


def test_a_failing_case_fails_the_command(healthy: Stack, lifecycle: Path,
                                          tmp_path: Path) -> None:
    bench = lifecycle / "greet" / "benchmarks.json"
    data = json.loads(bench.read_text())
    data["tests"].append({"id": "wrong", "name": "Expects another greeting",
                          "inputs": {"name": "Cy"}, "expected": {"greeting": "Hi, Cy!"}})
    bench.write_text(json.dumps(data))

    failing = healthy.cli("test", "greet", "--vault", str(lifecycle), cwd=tmp_path)
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "Traceback" not in failing.stderr
    assert "output 'greeting' is \"Hello, Cy!\", expected \"Hi, Cy!\"" in failing.stdout, \
        failing.stdout[-3000:]
    assert "1 of 4 test case(s) failed: greet/wrong" in failing.stderr
    with healthy.db() as session:
        assert not last_results(session, "greet")["wrong"].passed

    one = healthy.cli("test", "greet", "--test", "hello", "--vault", str(lifecycle),
                      cwd=tmp_path)
    assert one.returncode == 0, one.stdout + one.stderr
    assert "1 test case(s) passed" in one.stdout

    unknown = healthy.cli("test", "greet", "--test", "nope", "--vault", str(lifecycle),
                          cwd=tmp_path)
    assert unknown.returncode == 2
    assert "no test case 'nope' (it has: hello, refuses, no-name, wrong)" in unknown.stderr


def test_the_example_vault_passes(healthy: Stack, tmp_path: Path) -> None:
    vault = copy_vault(EXAMPLES / "git-digest", tmp_path / "git-digest")
    result = healthy.cli("test", "--all", "--vault", str(vault), cwd=tmp_path,
                         timeout_s=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAIL" not in result.stdout
