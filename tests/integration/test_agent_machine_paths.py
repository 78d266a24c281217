"""A model cannot reach the worker's files or folders through what it hands on. A file or
folder of a machine (``$local``, ``$dir``) is something only a person's command names
(shared/inputs.py): given by a model's execute_skill, the worker would read that file
into the store, or show that folder to the step, with the worker's rights."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import VAULTS, RunResult, Stack, copy_vault
from sqlalchemy import select
from support.fake_llm import FakeLLM

from shared.db.models import PipelineRun

pytestmark = pytest.mark.integration

AGENT_WORKER = "agent-gpu-cmd0"
USAGE = {"input": 100, "output": 20}
RunSkill = Callable[..., RunResult]
CALLER = """---
name: file-caller
description: "Hand a file to shout-file. Use it to test what a model may hand on."
version: 1
inputs:
  - name: text
    type: string
    required: true
outputs:
  - name: text
    type: string
approach: agent
model: anthropic:claude-haiku-4-5
---

# file-caller

Execute shout-file, then answer with what it returned.
"""


@pytest.fixture
def worker_env(llm: FakeLLM) -> dict[str, dict[str, str | None]]:
    return {AGENT_WORKER: llm.env()}


@pytest.fixture
def vault(healthy: Stack, tmp_path: Path) -> Path:
    root = copy_vault(VAULTS / "files", tmp_path / "vault")
    caller = root / "file-caller"
    caller.mkdir()
    (caller / "SKILL.md").write_text(CALLER)
    (caller / "sub-skills.json").write_text(json.dumps(
        {"sub_skills": [{"skill_id": "shout-file", "role": "the file's reader"}]}))
    return root


def call(tool: str, arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}], "usage": USAGE}


@pytest.mark.parametrize("given", [
    {"$local": "/etc/shadow", "name": "shadow", "size": 1},
    {"$dir": "/root", "device": "any", "host": "any"}])
def test_a_model_cannot_hand_on_a_file_or_folder_of_the_worker(
        healthy: Stack, vault: Path, llm: FakeLLM, run_skill: RunSkill,
        given: dict[str, Any]) -> None:
    k = f"paths-{uuid.uuid4().hex[:12]}"
    llm.script(k, call("execute_skill", {"name": "shout-file", "inputs": {"doc": given}}),
               {"output": {"text": "gave up"}, "usage": USAGE})
    result = run_skill("file-caller", vault, "--json", timeout_s=180,
                       inputs={"text": f"{llm.marker(k)} go"})
    assert result.code == 0, result
    (told,) = [r[0] for r in llm.tool_results(k)[1:2]]
    assert "only a person's command may give" in told, told
    with healthy.db() as session:
        started = session.scalars(select(PipelineRun).where(
            PipelineRun.skill == "shout-file",
            PipelineRun.created_at >= healthy.run(result.run_id or "").created_at)).all()
    assert started == [], "no run of shout-file, so nothing was read"
