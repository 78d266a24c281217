"""A skill an agent step ran with ``execute_skill`` names its caller in benchmarks.json.

PostgreSQL records the run as triggered by the calling skill (workers/agent/calls.py);
the sub-skill's benchmarks.json, the window a user reads in its folder, used to leave
``triggered_by`` empty for it, while a step of an orchestrator's run names that
orchestrator. Real workers; the model is tests/support/fake_llm's local server, as in
test_agent_steps.py.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import VAULTS, RunResult, Stack, copy_vault, wait_until
from sqlalchemy import select
from support.fake_llm import FakeLLM

from shared.db.models import PipelineRun

pytestmark = pytest.mark.integration
RunSkill = Callable[..., RunResult]
AGENT_WORKER = "agent-gpu-cmd0"  # serves the agent queue (conftest.STANDARD_WORKERS)
USAGE = {"input": 1000, "output": 200}


@pytest.fixture
def worker_env(llm: FakeLLM) -> dict[str, dict[str, str | None]]:
    """The agent worker talks to the fake model (``healthy`` restarts it so)."""
    return {AGENT_WORKER: {**llm.env()}}


def test_a_skill_run_by_execute_skill_names_its_caller_in_benchmarks_json(
        healthy: Stack, llm: FakeLLM, run_skill: RunSkill, tmp_path: Path) -> None:
    agents = copy_vault(VAULTS / "agents", tmp_path / "vault")
    mid, leaf = f"agent-{uuid.uuid4().hex[:12]}", f"agent-{uuid.uuid4().hex[:12]}"
    llm.script(mid, {"tool_calls": [{"name": "execute_skill", "arguments": {
        "name": "relay-leaf", "inputs": {"text": f"{llm.marker(leaf)} go"}}}],
        "usage": USAGE}, {"output": {"text": "mid done"}, "usage": USAGE})
    llm.script(leaf, {"output": {"text": "leaf done"}, "usage": USAGE})
    result = run_skill("relay-mid", agents, "--json", timeout_s=180,
                       inputs={"text": f"{llm.marker(mid)} go"})
    assert result.code == 0, result
    assert result.json() == {"text": "mid done"}
    with healthy.db() as session:
        called = session.scalars(select(PipelineRun).where(
            PipelineRun.skill == "relay-leaf",
            PipelineRun.created_at >= healthy.run(result.run_id or "").created_at)).one()
    assert (called.triggered_by, called.state) == ("relay-mid", "succeeded")

    (attempt,) = healthy.steps(called.id)

    def listed() -> dict[str, Any] | None:
        # The sub-run's window is written once its end commits, by its own worker: the
        # caller's client waits for the caller's files only.
        path = agents / "relay-leaf" / "benchmarks.json"
        runs = json.loads(path.read_text())["runs"] if path.exists() else []
        return next((r for r in runs if r["run_id"] == attempt.id), None)

    entry = wait_until(listed, 30, "relay-leaf's benchmarks.json to list its run",
                       every_s=0.2)
    assert (entry["triggered_by"], entry["success"]) == ("relay-mid", True), entry
