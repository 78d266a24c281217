"""requires.mcp (issue 41): SKILLQ_MCP_SERVERS parsed into typed servers, a bad value one
line naming the setting (never quoting it: it may hold a credential); the announcement
of names only; routing refusing a step no daemon has the server for; validation; and
the toolset against the MCP SDK's own server over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import SecretStr
from pydantic_ai import RunContext
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RunUsage
from support.mcp_calc_server import serving_http

from lifecycle.agent_routing import WorkerModels
from lifecycle.routing import NoRoute, OnlineDaemon, route
from shared.errors import ConfigError
from shared.manifest import Requires
from shared.mcp_servers import HttpServer, StdioServer, parse_servers, secret_names
from shared.skill import load_skill
from workers.agent.mcp_tools import McpUnavailable, toolsets_for
from workers.agent.tool_args import BadArguments
from workers.announce import declared_mcp_servers, detect_capabilities

TESTS = Path(__file__).parents[1]
SECRET = "s3cret-calc"


def test_servers_parse_into_typed_shapes() -> None:
    found = parse_servers(json.dumps({
        "rube": {"url": "https://rube.app/mcp",
                 "headers": {"Authorization": "Bearer ${secret:rube_token}"}},
        "files": {"command": ["npx", "server"], "env": {"T": "${secret:t}"}}}))
    assert isinstance(found["rube"], HttpServer) and isinstance(found["files"], StdioServer)
    assert secret_names(found["rube"]) == ["rube_token"]
    assert found["files"].command == ("npx", "server")
    assert parse_servers("") == {}


@pytest.mark.parametrize(("value", "said"), [
    ('{"rube": {"url": "https://x", "headers": {"A": "' + SECRET + '"}', "not valid JSON"),
    ('["rube"]', "must be a JSON object"),
    ('{"rube": {}}', "exactly one of \"command\" (stdio) or \"url\""),
    ('{"rube": {"url": "https://x", "command": ["y"]}}', "exactly one of"),
    ('{"rube": {"url": "ftp://x", "headers": {"A": "' + SECRET + '"}}}', "url"),
    ('{"rube": {"url": "https://x", "env": {"A": "' + SECRET + '"}}}', "env"),
    ('{"a b": {"url": "https://x"}}', "server name 'a b'"),
])
def test_a_bad_value_is_one_line_naming_the_setting(value: str, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_servers(value)
    message = str(caught.value)
    assert message.startswith("SKILLQ_MCP_SERVERS"), message
    assert said in message and "\n" not in message, message
    assert SECRET not in message  # a credential written in place is never echoed


def test_a_worker_announces_names_only() -> None:
    settings = SimpleNamespace(capabilities="", chromium_path=None, mcp_servers=SecretStr(
        json.dumps({"rube": {"url": "https://rube.app/mcp?key=" + SECRET}})))
    assert declared_mcp_servers(settings) == ["rube"]  # type: ignore[arg-type]
    caps = detect_capabilities(settings)  # type: ignore[arg-type]
    assert not any(SECRET in c or "rube.app" in c for c in caps)
    settings.mcp_servers = SecretStr("{not json")
    assert declared_mcp_servers(settings) == []  # type: ignore[arg-type]


def worker(name: str, queue: str, *servers: str) -> WorkerModels:
    return WorkerModels(frozenset({queue, f"{queue}@{name}"}), frozenset(), None,
                        frozenset(servers))


def daemon(name: str, *servers: str, others: tuple[WorkerModels, ...] = ()) -> OnlineDaemon:
    workers = (worker(name, "agent", *servers), *others)
    return OnlineDaemon(name, "agent", "dev", frozenset(q for w in workers for q in w.queues),
                        frozenset(), frozenset(), frozenset(), workers)


def test_routing_sends_the_step_where_the_server_is() -> None:
    needs = Requires(mcp=("rube",))
    found = route("agent", needs, [daemon("a"), daemon("b", "rube")])
    assert found.queues == ("agent@b",)


def test_a_worker_of_another_queue_without_the_server_does_not_hide_it() -> None:
    """The servers are each worker's own (its environment's): a code worker of the same
    daemon started without SKILLQ_MCP_SERVERS leaves the agent worker's standing."""
    code_worker = worker("b", "default")
    found = route("agent", Requires(mcp=("rube",)),
                  [daemon("a"), daemon("b", "rube", others=(code_worker,))])
    assert found.queues == ("agent@b",)


def test_every_worker_taking_the_queue_must_have_the_server() -> None:
    """A message on the daemon's queue goes to whichever of its workers is free."""
    keyless = worker("b", "agent")
    with pytest.raises(NoRoute) as caught:
        route("agent", Requires(mcp=("rube",)), [daemon("b", "rube", others=(keyless,))])
    assert "MCP server 'rube'" in str(caught.value)


def test_routing_refuses_naming_the_server_and_setting() -> None:
    with pytest.raises(NoRoute) as caught:
        route("agent", Requires(mcp=("rube",)), [daemon("a", "other")])
    assert "MCP server 'rube'" in str(caught.value)
    assert "SKILLQ_MCP_SERVERS" in str(caught.value)


COMPOSIO = """---
name: {name}
description: Post to Slack through Rube. Use when asked to post to Slack.
{extra}requires:
  mcp: [rube]
---

# {name}

Use the rube tools.
"""


def test_a_composio_folder_is_valid(tmp_path: Path) -> None:
    folder = tmp_path / "slack-post"
    folder.mkdir()
    (folder / "SKILL.md").write_text(COMPOSIO.format(name="slack-post", extra=""))
    skill, problems = load_skill(folder)
    assert skill is not None and not problems, problems
    assert skill.manifest.requires.mcp == ("rube",)


def test_requires_mcp_is_for_agent_steps_only(tmp_path: Path) -> None:
    folder = tmp_path / "scripted"
    folder.mkdir()
    (folder / "SKILL.md").write_text(COMPOSIO.format(
        name="scripted", extra="run:\n  command: echo hi\n"))
    _, problems = load_skill(folder)
    assert any("only an agent step" in str(p) and "requires" in str(p) for p in problems), \
        problems


def calc_setting(**server: object) -> str:
    return json.dumps({"calc": server})


def run_context() -> RunContext[None]:
    """What an agent run hands a toolset; no model is asked anything here (TestModel only
    fills the field)."""
    return RunContext(deps=None, model=TestModel(), usage=RunUsage())


async def call(setting: str, tool: str, args: dict[str, object]) -> object:
    (toolset,) = toolsets_for(["calc"], setting, timeout_s=30, retries=3)
    ctx = run_context()
    async with toolset:
        tools = await toolset.get_tools(ctx)
        assert tools[tool].tool_def.metadata
        assert tools[tool].tool_def.metadata["mcp_server"] == "calc"
        return await toolset.call_tool(tool, args, ctx, tools[tool])


async def call_add(setting: str) -> object:
    return await call(setting, "calc_add", {"a": 2, "b": 3})


def test_a_stdio_server_gets_its_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLQ_SECRET_CALC_TOKEN", SECRET)
    setting = calc_setting(command=[sys.executable, "-m", "support.mcp_calc_server"],
                           cwd=str(TESTS), env={"CALC_TOKEN": "${secret:calc_token}"})
    assert asyncio.run(call_add(setting)) == "sum=5 (with a token)"


def test_what_a_server_answers_is_cleared_of_its_secrets(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A careless server quoting the credential it was given, in an answer or in an
    error (a failed tool result the model reads), never hands it on."""
    monkeypatch.setenv("SKILLQ_SECRET_CALC_TOKEN", SECRET)
    setting = calc_setting(command=[sys.executable, "-m", "support.mcp_calc_server"],
                           cwd=str(TESTS), env={"CALC_TOKEN": "${secret:calc_token}"})
    assert asyncio.run(call(setting, "calc_token", {})) == "my token is ***"
    with pytest.raises(ToolFailed) as caught:
        asyncio.run(call(setting, "calc_refuse", {}))
    assert "refused for token ***" in str(caught.value)
    assert SECRET not in str(caught.value)


def test_a_missing_secret_or_server_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SKILLQ_SECRET_CALC_TOKEN", raising=False)
    monkeypatch.setenv("SKILLQ_SECRETS_FILE", "/nonexistent/secrets.toml")
    setting = calc_setting(command=["x"], env={"CALC_TOKEN": "${secret:calc_token}"})
    with pytest.raises(McpUnavailable, match=r"MCP server 'calc' \(SKILLQ_MCP_SERVERS\).*"
                       r"calc_token \(set SKILLQ_SECRET_CALC_TOKEN"):
        toolsets_for(["calc"], setting, timeout_s=5, retries=1)
    with pytest.raises(McpUnavailable, match="MCP server 'rube' is not declared on this "
                       "worker; add it to SKILLQ_MCP_SERVERS"):
        toolsets_for(["rube"], setting, timeout_s=5, retries=1)


def test_an_unreachable_server_names_itself_not_its_headers() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    setting = calc_setting(url=f"http://127.0.0.1:{port}/mcp", headers={"X-Key": SECRET})
    with pytest.raises(McpUnavailable) as caught:
        asyncio.run(call_add(setting))
    assert "MCP server 'calc' (SKILLQ_MCP_SERVERS) could not be opened" in str(caught.value)
    assert SECRET not in str(caught.value)


def test_a_streamable_http_server() -> None:
    with serving_http() as port:
        setting = calc_setting(url=f"http://127.0.0.1:{port}/mcp")
        assert asyncio.run(call_add(setting)) == "sum=5 (no token)"


def test_a_schema_skillq_does_not_read_is_checked_in_full() -> None:
    from workers.agent.mcp_tools import _check_in_full

    schema = {"type": "object", "properties": {"n": {"anyOf": [{"type": "integer"},
                                                               {"type": "null"}]}},
              "required": ["n"]}
    assert _check_in_full("calc_x", schema, '{"n": null}') == {"n": None}
    with pytest.raises(BadArguments, match="argument 'n'"):
        _check_in_full("calc_x", schema, {"n": "two"})
