"""requires.mcp through real workers (issue 41): an agent step whose scripted model
(tests/support/fake_llm) calls a tool of a real MCP server (the MCP SDK's own,
tests/support/mcp_calc_server.py) over stdio and over streamable HTTP, gets its result
and answers; the call is in the step's recorded turns; and a run needing a server no
daemon declares is refused before dispatch, naming the server and the setting.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import HEARTBEAT_S, RunResult, Stack, copy_vault
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
def http_port() -> Iterator[int]:
    with serving_http() as port:
        yield port


@pytest.fixture
def worker_env(llm: FakeLLM, http_port: int) -> dict[str, dict[str, str | None]]:
    """Only the agent worker declares the servers, as a user sets them where that worker
    reads its environment: the daemon's other workers, heartbeating without them, leave
    them standing (each worker announces its own)."""
    servers = {
        "calc": {"command": [sys.executable, "-m", "support.mcp_calc_server"],
                 "cwd": str(TESTS), "env": {"CALC_TOKEN": "${secret:calc_token}"}},
        # the name Composio's skills require (vaults/composio), served by the same server
        "rube": {"command": [sys.executable, "-m", "support.mcp_calc_server"],
                 "cwd": str(TESTS)},
        "calchttp": {"url": f"http://127.0.0.1:{http_port}/mcp",
                     "headers": {"Authorization": "Bearer ${secret:calc_token}"}}}
    declared: dict[str, str | None] = {"SKILLQ_MCP_SERVERS": json.dumps(servers),
                                       "SKILLQ_SECRET_CALC_TOKEN": SECRET,
                                       # a plain folder names no model: the default serves it
                                       "SKILLQ_AGENT_MODEL": "anthropic:claude-haiku-4-5"}
    return {AGENT_WORKER: {**declared, **llm.env()}}


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


def test_an_ask_invoking_the_skill_gets_the_servers_tools(healthy: Stack, llm: FakeLLM,
                                                          tmp_path: Path) -> None:
    """`skillq ask "/skill ..."`: the invoked skill's instructions become the ask's own, so
    its step is routed by the skill's requires.mcp and given those servers' tools."""
    k = f"mcp-{uuid.uuid4().hex[:12]}"
    llm.script(k, {"tool_calls": [{"name": "calc_add", "arguments": {"a": 2, "b": 3}}]},
               {"text": "the tool said: {{tool_results}}"})
    vault = vault_with(tmp_path, "mcp-asked", "calc")
    shown = healthy.cli("ask", "--dry-run", f"/mcp-asked {llm.marker(k)} add 2 and 3",
                        "--vault", str(vault), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "tools of MCP server(s) calc" in shown.stdout, shown.stdout
    result = healthy.cli("ask", "--json", f"/mcp-asked {llm.marker(k)} add 2 and 3",
                         "--vault", str(vault), "--model", "anthropic:claude-haiku-4-5",
                         cwd=tmp_path, timeout_s=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "sum=5 (with a token)" in json.loads(result.stdout)["answer"], result.stdout


def test_an_ask_invoking_a_skill_no_daemon_can_serve_is_refused(healthy: Stack,
                                                               tmp_path: Path) -> None:
    vault = vault_with(tmp_path, "mcp-asked-nowhere", "nowhere")
    result = healthy.cli("ask", "/mcp-asked-nowhere add 2 and 3", "--vault", str(vault),
                         "--model", "anthropic:claude-haiku-4-5", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "MCP server 'nowhere'" in result.stderr, result.stderr
    assert "SKILLQ_MCP_SERVERS" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_a_server_answering_with_its_credentials_is_redacted(healthy: Stack, llm: FakeLLM,
                                                             tmp_path: Path,
                                                             run_skill: RunSkill) -> None:
    """A careless server's answer holding the secret it was given reaches neither the
    model nor the run's outputs: the secret never lands in a transcript or a record."""
    k = f"mcp-{uuid.uuid4().hex[:12]}"
    llm.script(k, {"tool_calls": [{"name": "calc_token", "arguments": {}}]},
               {"text": "the tool said: {{tool_results}}"})
    vault = vault_with(tmp_path, "mcp-token", "calc")
    result = run_skill("mcp-token", vault, "--json", timeout_s=180,
                       inputs={"text": f"{llm.marker(k)} what is your token?"})
    assert result.code == 0, result
    assert "my token is ***" in result.json()["answer"], result
    assert not any(SECRET in r for r in llm.tool_results(k)[1]), llm.tool_results(k)
    assert SECRET not in result.stdout + result.stderr


def test_the_daemon_keeps_the_servers_its_other_workers_lack(healthy: Stack,
                                                             tmp_path: Path) -> None:
    """The stack's code, browser and control workers beat without SKILLQ_MCP_SERVERS;
    after several of their heartbeats the daemon still lists the agent worker's."""
    time.sleep(4 * HEARTBEAT_S)
    shown = healthy.cli("daemons", "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    (daemon,) = [d for d in json.loads(shown.stdout) if d["online"]]
    assert daemon["mcp_servers"] == ["calc", "calchttp", "rube"], daemon
    assert SECRET not in shown.stdout and "127.0.0.1" not in shown.stdout


def test_a_composio_shaped_folder_runs_with_its_server(healthy: Stack, llm: FakeLLM,
                                                       tmp_path: Path,
                                                       run_skill: RunSkill) -> None:
    """A folder as Composio writes them (no inputs, outputs or model; requires.mcp as a
    flow list) runs as written where the server is, and its answer is `answer`."""
    vault = copy_vault(TESTS / "integration" / "vaults" / "composio", tmp_path / "vault")
    k = f"mcp-{uuid.uuid4().hex[:12]}"
    skill_md = vault / "sum-automation" / "SKILL.md"
    # the conversation key in the body: a plain skill has no inputs to carry it
    skill_md.write_text(skill_md.read_text(encoding="utf-8") + f"\n{llm.marker(k)}\n",
                        encoding="utf-8")
    llm.script(k, {"tool_calls": [{"name": "rube_add", "arguments": {"a": 40, "b": 2}}]},
               {"text": "the tool said: {{tool_results}}"})
    result = run_skill("sum-automation", vault, "--json", timeout_s=180)
    assert result.code == 0, result
    assert list(result.json()) == ["answer"], result
    assert "sum=42 (no token)" in result.json()["answer"], result
