"""`skillq mcp` driven by the official MCP SDK's own client, over stdio and streamable
HTTP, against the real test stack: the catalog leaves a disabled skill out, a skill's
instructions load, a run goes through the queues and comes back with its typed outputs
(recorded, triggered by `mcp`), bad inputs and unknown skills are tool errors, a note is
filed, each enabled skill is a prompt; over HTTP a foreign Host header is refused."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import VAULTS, Stack, free_port, skillq_argv, tail, wait_until
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.integration


@pytest.fixture
def vault(healthy: Stack, tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    for name in ("echo", "stamp"):
        shutil.copytree(VAULTS / "pipes" / name, root / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    off = healthy.cli("disable", "stamp", "--vault", str(root), cwd=tmp_path)
    assert off.returncode == 0, off.stderr
    return root


def stdio(healthy: Stack, vault: Path, cwd: Path) -> StdioServerParameters:
    argv = skillq_argv("mcp", "--vault", str(vault))
    return StdioServerParameters(command=argv[0], args=argv[1:], env=healthy.cli_env,
                                 cwd=str(cwd))


def text_of(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def test_a_client_lists_loads_and_runs_skills_and_files_a_note(
        healthy: Stack, vault: Path, tmp_path: Path) -> None:
    async def session() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with Client(stdio(healthy, vault, tmp_path), read_timeout_seconds=120) as c:
            seen["tools"] = {t.name for t in (await c.list_tools()).tools}
            seen["listed"] = await c.call_tool("list_skills", {})
            seen["loaded"] = await c.call_tool("load_skill", {"name": "/echo"})
            seen["ran"] = await c.call_tool("run_skill", {"name": "echo",
                                                          "inputs": {"text": "via mcp"}})
            seen["bad"] = await c.call_tool("run_skill", {"name": "echo", "inputs": {}})
            seen["off"] = await c.call_tool("run_skill", {"name": "stamp",
                                                          "inputs": {"label": "x"}})
            seen["unknown"] = await c.call_tool("load_skill", {"name": "ecko"})
            seen["note"] = await c.call_tool("improvement_note", {
                "skill": "echo", "error": "it echoed nothing", "diagnosis": "empty text",
                "suggested_fix": "refuse an empty text"})
            seen["prompts"] = {p.name for p in (await c.list_prompts()).prompts}
            seen["prompt"] = await c.get_prompt("echo")
        return seen

    seen = anyio.run(session)
    assert seen["tools"] == {"list_skills", "load_skill", "run_skill", "improvement_note",
                             "inbox", "answer", "approve", "reject"}
    listed = json.loads(text_of(seen["listed"]))["skills"]
    assert seen["listed"].structured_content == {"skills": listed}
    assert [s["name"] for s in listed] == ["echo"], listed  # stamp is disabled
    assert listed[0]["inputs"][0] == {"name": "text", "type": "string", "required": True,
                                      "description": "The text to return."}
    loaded = text_of(seen["loaded"])
    assert loaded.startswith('<skill_content name="echo">') and "- text (string" in loaded

    ran = json.loads(text_of(seen["ran"]))
    assert not seen["ran"].is_error and ran["state"] == "succeeded", ran
    assert ran["outputs"] == {"text": "via mcp"}
    record = healthy.run(ran["run_id"])
    assert (record.state, record.triggered_by, record.source) == (
        "succeeded", "mcp", "production")

    assert seen["bad"].is_error and "text" in text_of(seen["bad"]), text_of(seen["bad"])
    assert seen["off"].is_error and "skillq enable stamp" in text_of(seen["off"])
    assert seen["unknown"].is_error and "did you mean 'echo'" in text_of(seen["unknown"])
    assert not seen["note"].is_error and "filed improvement note" in text_of(seen["note"])
    notes = healthy.cli("notes", "echo", "--json", cwd=tmp_path)
    assert any(n["summary"] == "empty text" for n in json.loads(notes.stdout)), notes.stdout

    assert seen["prompts"] == {"echo"}
    messages = seen["prompt"].messages
    assert "An integration-test fixture" in messages[0].content.text


def test_over_http_a_client_runs_a_skill_and_a_foreign_host_is_refused(
        healthy: Stack, vault: Path, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "mcp.log"
    with log.open("ab") as fh:
        proc = subprocess.Popen(skillq_argv("mcp", "--http", "--port", str(port), "--vault",
                                            str(vault)), env=healthy.cli_env, cwd=tmp_path,
                                stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        def up() -> bool:
            assert proc.poll() is None, f"skillq mcp exited:\n{tail(log)}"
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        wait_until(up, 60, f"skillq mcp to listen:\n{tail(log)}", every_s=0.2)

        async def session() -> Any:
            async with Client(url, read_timeout_seconds=120) as client:
                return await client.call_tool("run_skill", {"name": "echo",
                                                            "inputs": {"text": "http"}})

        ran = anyio.run(session)
        assert json.loads(text_of(ran))["outputs"] == {"text": "http"}, text_of(ran)

        forged = urllib.request.Request(url, data=b"{}", method="POST", headers={
            "Host": "attacker.example", "Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(forged, timeout=10)
        assert refused.value.code == 421
        assert "attacker.example" in refused.value.read().decode()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_it_will_not_listen_beyond_loopback_without_credentials(
        healthy: Stack, vault: Path, tmp_path: Path) -> None:
    refused = healthy.cli("mcp", "--http", "--host", "0.0.0.0", "--vault", str(vault),
                          cwd=tmp_path, timeout_s=30)
    assert refused.returncode != 0 and "SKILLQ_DASHBOARD_AUTH" in refused.stderr, refused
    assert "Traceback" not in refused.stderr
