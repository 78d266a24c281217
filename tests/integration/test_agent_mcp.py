"""requires.mcp through real workers (issue 41): an agent step whose scripted model
(tests/support/fake_llm) calls a tool of a real MCP server (the MCP SDK's own,
tests/support/mcp_calc_server.py) over stdio and over streamable HTTP, gets its result
and answers; the call is in the step's recorded turns; and a run needing a server no
daemon declares is refused before dispatch, naming the server and the setting.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import STANDARD_WORKERS, RunResult, Stack
from sqlalchemy import select
from support.fake_llm import FakeLLM
from support.mcp_calc_server import serving_http

from shared.db.agent_models import AgentTurn

pytestmark = pytest.mark.integration
AGENT_WORKER = "agent-gpu-cmd0"
TESTS = Path(__file__).parents[1]
SECRET = "s3cret-calc"
RunSkill = Callable[..., RunResult]

SKILL = """---
name: {name}
description: "Add two numbers with the calc MCP server. Use it to test requires.mcp."
inputs:
  - name: text
    type: string
    required: true
    description: "What to add."
approach: agent
model: anthropic:claude-haiku-4-5
model_override: true
requires:
  mcp: [{server}]
---

# {name}

Add the numbers with the calc tools.
"""


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture(scope="module")
def http_port() -> Iterator[int]:
    with serving_http() as port:
        yield port


@pytest.fixture
def worker_env(llm: FakeLLM, http_port: int) -> dict[str, dict[str, str | None]]:
    """The servers are the daemon's (its machine's settings), so every worker of the
    stack's one daemon declares them: capabilities are announced per daemon, and a worker
    without them would take mcp:calc off the daemon at its next heartbeat."""
    servers = {
        "calc": {"command": [sys.executable, "-m", "support.mcp_calc_server"],
                 "cwd": str(TESTS), "env": {"CALC_TOKEN": "${secret:calc_token}"}},
        "calchttp": {"url": f"http://127.0.0.1:{http_port}/mcp",
                     "headers": {"Authorization": "Bearer ${secret:calc_token}"}}}
    declared: dict[str, str | None] = {"SKILLQ_MCP_SERVERS": json.dumps(servers),
                                       "SKILLQ_SECRET_CALC_TOKEN": SECRET}
    return {spec.name: {**declared, **(llm.env() if spec.name == AGENT_WORKER else {})}
            for spec in STANDARD_WORKERS}


def vault_with(tmp_path: Path, name: str, server: str) -> Path:
    vault = tmp_path / "vault"
    (vault / name).mkdir(parents=True)
    (vault / name / "SKILL.md").write_text(SKILL.format(name=name, server=server))
    return vault


@pytest.mark.parametrize(("server", "said"), [("calc", "sum=5 (with a token)"),
                                              ("calchttp", "sum=5 (no token)")])
def test_the_model_calls_a_tool_of_the_server(healthy: Stack, llm: FakeLLM, tmp_path: Path,
                                              run_skill: RunSkill, server: str,
                                              said: str) -> None:
    k = f"mcp-{uuid.uuid4().hex[:12]}"
    llm.script(k, {"tool_calls": [{"name": f"{server}_add", "arguments": {"a": 2, "b": 3}}]},
               {"text": "the tool said: {{tool_results}}"})
    vault = vault_with(tmp_path, "mcp-add", server)
    result = run_skill("mcp-add", vault, "--json", timeout_s=180,
                       inputs={"text": f"{llm.marker(k)} add 2 and 3"})
    assert result.code == 0, result
    assert said in result.json()["answer"], result
    assert any(said in r for r in llm.tool_results(k)[1]), llm.tool_results(k)
    with healthy.db() as session:
        turns = session.scalars(select(AgentTurn).where(
            AgentTurn.run_id == result.run_id).order_by(AgentTurn.turn)).all()
    calls = [p for p in turns[0].response["parts"] if p.get("part_kind") == "tool-call"]
    # the arguments as the provider sent them: JSON text
    assert [(c["tool_name"], json.loads(c["args"])) for c in calls] == [
        (f"{server}_add", {"a": 2, "b": 3})]
    assert SECRET not in json.dumps([t.response for t in turns])


def test_no_daemon_has_the_server(healthy: Stack, tmp_path: Path,
                                  run_skill: RunSkill) -> None:
    vault = vault_with(tmp_path, "mcp-nowhere", "nowhere")
    result = run_skill("mcp-nowhere", vault, inputs={"text": "add"})
    assert result.code == 1, result
    assert result.run_id is None, "refused before anything was recorded"
    assert "MCP server 'nowhere'" in result.stderr, result
    assert "SKILLQ_MCP_SERVERS" in result.stderr, result


def test_a_test_case_runs_on_the_daemon_with_the_server(healthy: Stack, llm: FakeLLM,
                                                        tmp_path: Path) -> None:
    """The test window (`skillq test`) routes by the same declaration as a run."""
    k = f"mcp-{uuid.uuid4().hex[:12]}"
    llm.script(k, {"tool_calls": [{"name": "calc_add", "arguments": {"a": 2, "b": 3}}]},
               {"text": "the tool said: {{tool_results}}"})
    vault = vault_with(tmp_path, "mcp-case", "calc")
    (vault / "mcp-case" / "benchmarks.json").write_text(json.dumps({
        "skill": "mcp-case", "version": 1, "runs": [],
        "tests": [{"id": "adds", "name": "Adds with the tool",
                   "inputs": {"text": f"{llm.marker(k)} add 2 and 3"},
                   "expected": {"success": True, "output_contains": ["sum=5"]}}]}))
    result = healthy.cli("test", "mcp-case", "--vault", str(vault), cwd=tmp_path,
                         timeout_s=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 test case(s) passed" in result.stdout, result.stdout
