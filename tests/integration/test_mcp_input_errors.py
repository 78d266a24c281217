"""An MCP client told its inputs do not fit reads it in run_skill's terms: the problem
named by the argument it gave (``inputs.text``), never the CLI's ``--input`` flag it does
not have. The real `skillq mcp` over stdio, driven by the MCP SDK's client, against the
test stack (as test_mcp.py)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import VAULTS, Stack, skillq_argv
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.integration


def test_run_skill_names_the_input_argument_that_does_not_fit(
        healthy: Stack, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    shutil.copytree(VAULTS / "pipes" / "echo", vault / "echo",
                    ignore=shutil.ignore_patterns("__pycache__"))
    argv = skillq_argv("mcp", "--vault", str(vault))
    server = StdioServerParameters(command=argv[0], args=argv[1:], env=healthy.cli_env,
                                   cwd=str(tmp_path))
    before = healthy.run_ids("echo")

    async def session() -> dict[str, Any]:
        async with Client(server, read_timeout_seconds=120) as client:
            return {
                "missing": await client.call_tool("run_skill", {"name": "echo",
                                                                "inputs": {}}),
                "typed": await client.call_tool("run_skill", {"name": "echo", "inputs": {
                    "text": "hi", "delay_s": "soon"}}),
            }

    seen = anyio.run(session)
    assert all(r.is_error for r in seen.values()), seen
    # The SDK puts its own "Error executing tool run_skill: " before a tool's error.
    said = {k: "\n".join(getattr(b, "text", "") for b in r.content).removeprefix(
        "Error executing tool run_skill: ") for k, r in seen.items()}
    assert said["missing"] == ("inputs.text: required input is missing (string): give it "
                               "in run_skill's inputs"), said
    assert said["typed"] == 'inputs.delay_s: expected number, got "soon"', said
    assert healthy.run_ids("echo") == before  # nothing ran
