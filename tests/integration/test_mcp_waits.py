"""A run started over MCP that waits for a person (docs/waits.md), driven by the MCP SDK's
own client against the real `skillq mcp` over stdio and the test stack, with the
scripted model server (tests/support/fake_llm) behind the agent step:

- a client that shows forms is asked the question by elicitation, and its answer
  reaches the model; a declined form leaves the question open, and the answer tool
  answers it; both in the SDK's two protocol eras (a 2026-07-28 client is asked through
  run_skill's InputRequiredResult, a handshake-era one by a request mid-call);
- an approval's form shows what it asks, its inputs with their defaults, and takes yes
  (with an edited input, read by the next step) or no (with a reason: the run ends
  rejected);
- a client that shows none finds the approval with the inbox tool and approves it with
  the approve tool, its input read by the next step; a wrong decision is a tool error.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from conftest import VAULTS, Stack, copy_vault, skillq_argv
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext
from sqlalchemy import select
from support.fake_llm import FakeLLM

from shared.db.wait_models import Wait

pytestmark = pytest.mark.integration
AGENT_WORKER = "agent-gpu-cmd0"
USAGE = {"input": 100, "output": 20}
CLIENT = types.Implementation(name="waits-test-client", version="1.0")
SESSION_S = 180  # a whole client session, run and decisions included
Elicit = Callable[[ClientRequestContext, types.ElicitRequestParams],
                  Awaitable[types.ElicitResult | types.ErrorData]]
# The SDK's default negotiates 2026-07-28 with skillq's server; "legacy" the handshake.
ERAS = pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-07-28", "handshake"])


@pytest.fixture
def worker_env(llm: FakeLLM) -> dict[str, dict[str, str | None]]:
    return {AGENT_WORKER: llm.env()}


@pytest.fixture
def vault(healthy: Stack, tmp_path: Path) -> Path:
    return copy_vault(VAULTS / "waits", tmp_path / "vault")


def server(stack: Stack, vault: Path, cwd: Path) -> StdioServerParameters:
    argv = skillq_argv("mcp", "--vault", str(vault))
    return StdioServerParameters(command=argv[0], args=argv[1:], env=stack.cli_env,
                                 cwd=str(cwd))


def client(stack: Stack, vault: Path, cwd: Path, mode: str = "auto",
           elicit: Elicit | None = None) -> Client:
    return Client(server(stack, vault, cwd), mode=mode, read_timeout_seconds=120,
                  client_info=CLIENT, elicitation_callback=elicit)


def text_of(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def key() -> str:
    return f"mcpwait-{uuid.uuid4().hex[:12]}"


def ask_tone(llm: FakeLLM, k: str, line: str) -> None:
    """The model asks which tone, offering two choices only, then writes ``line``."""
    llm.script(k, {"tool_calls": [{"name": "ask_question", "arguments": {
        "question": "Which tone?", "choices": ["dry", "warm"]}}], "usage": USAGE},
               {"output": {"line": line}, "usage": USAGE})


def model_read(llm: FakeLLM, k: str) -> list[str]:
    """The tool results the model read after its question."""
    return [r[0] for r in llm.tool_results(k)[1:]]


def the_wait(stack: Stack, run_id: str) -> Wait:
    with stack.db() as session:
        found = session.scalars(select(Wait).where(Wait.run_id == run_id)).one()
        session.expunge(found)
        return found


async def open_waits(c: Client, run_id: str, *, timeout_s: float = 60
                     ) -> list[dict[str, Any]]:
    """The inbox tool's list for ``run_id``, once it lists something."""
    with anyio.fail_after(timeout_s):
        while True:
            listed = await c.call_tool("inbox", {"run_id": run_id})
            assert not listed.is_error, text_of(listed)
            found: list[dict[str, Any]] = json.loads(text_of(listed))["waits"]
            if found:
                return found
            await anyio.sleep(0.2)


async def new_run(stack: Stack, skill: str, before: set[str]) -> str:
    found: str = await anyio.to_thread.run_sync(stack.new_run, skill, before)
    return found


@ERAS
def test_a_question_is_answered_through_the_clients_form(
        healthy: Stack, vault: Path, llm: FakeLLM, tmp_path: Path, mode: str) -> None:
    k = key()
    ask_tone(llm, k, "a warm line")
    asked: list[types.ElicitRequestFormParams] = []

    async def elicit(_: ClientRequestContext, params: types.ElicitRequestParams
                     ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        asked.append(params)
        return types.ElicitResult(action="accept", content={"answer": "warm"})

    async def session() -> Any:
        with anyio.fail_after(SESSION_S):
            async with client(healthy, vault, tmp_path, mode, elicit) as c:
                return await c.call_tool("run_skill", {
                    "name": "ask-tone", "inputs": {"topic": f"{llm.marker(k)} tea"}})

    ran = anyio.run(session)
    result = json.loads(text_of(ran))
    assert not ran.is_error and result["state"] == "succeeded", result
    assert result["outputs"] == {"line": "a warm line"}
    # asked once, with the question's words and only its choices to pick from
    (form,) = asked
    assert form.message.startswith("Which tone?") and "ask-tone" in form.message
    assert form.requested_schema["properties"]["answer"]["enum"] == ["dry", "warm"]
    assert form.requested_schema["required"] == ["answer"]
    # the model read the answer as its tool's result
    assert any('"warm"' in r for r in model_read(llm, k)), model_read(llm, k)
    wait = the_wait(healthy, result["run_id"])
    assert (wait.state, wait.answer, wait.decided_by) == (
        "answered", "warm", "mcp:waits-test-client")
    assert healthy.run(result["run_id"]).triggered_by == "mcp"


@ERAS
def test_a_declined_form_leaves_the_question_for_the_answer_tool(
        healthy: Stack, vault: Path, llm: FakeLLM, tmp_path: Path, mode: str) -> None:
    k = key()
    ask_tone(llm, k, "a dry line")
    asked: list[str] = []
    declined: list[anyio.Event] = []  # made in the session's event loop
    before = healthy.run_ids("ask-tone")

    async def elicit(_: ClientRequestContext, params: types.ElicitRequestParams
                     ) -> types.ElicitResult:
        asked.append(params.message)
        declined[0].set()
        return types.ElicitResult(action="decline")

    async def session() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        declined.append(anyio.Event())
        with anyio.fail_after(SESSION_S):
            async with client(healthy, vault, tmp_path, mode, elicit) as c:
                async def run() -> None:
                    seen["ran"] = await c.call_tool("run_skill", {
                        "name": "ask-tone", "inputs": {"topic": f"{llm.marker(k)} tea"}})

                async with anyio.create_task_group() as tg:
                    tg.start_soon(run)
                    run_id = await new_run(healthy, "ask-tone", before)
                    await declined[0].wait()
                    await anyio.sleep(1.5)  # past a look or two: it must not be asked again
                    seen["open"] = await open_waits(c, run_id)
                    seen["off"] = await c.call_tool("answer", {"run_id": run_id,
                                                               "text": "spicy"})
                    seen["answered"] = await c.call_tool("answer", {
                        "run_id": run_id, "choice": 1, "wait": seen["open"][0]["id"]})
        return seen

    seen = anyio.run(session)
    (still,) = seen["open"]
    assert (still["kind"], still["asks"], still["choices"]) == (
        "question", "Which tone?", ["dry", "warm"])
    # only its choices are taken, said in the tool's terms
    assert seen["off"].is_error and "answer with choice N" in text_of(seen["off"])
    assert "--choice" not in text_of(seen["off"])
    decided = json.loads(text_of(seen["answered"]))
    assert not seen["answered"].is_error and decided["value"] == "dry", decided
    result = json.loads(text_of(seen["ran"]))
    assert not seen["ran"].is_error and result["outputs"] == {"line": "a dry line"}, result
    assert len(asked) == 1, asked  # the declined form was not put again
    assert any('"dry"' in r for r in model_read(llm, k)), model_read(llm, k)
    wait = the_wait(healthy, result["run_id"])
    assert (wait.state, wait.decided_by) == ("answered", "mcp:waits-test-client")


def test_a_client_without_forms_approves_from_the_inbox(
        healthy: Stack, vault: Path, tmp_path: Path) -> None:
    before = healthy.run_ids("review-post")

    async def session() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        with anyio.fail_after(SESSION_S):
            async with client(healthy, vault, tmp_path) as c:
                async def run() -> None:
                    seen["ran"] = await c.call_tool("run_skill", {
                        "name": "review-post", "inputs": {"topic": "cats"}})

                async with anyio.create_task_group() as tg:
                    tg.start_soon(run)
                    run_id = await new_run(healthy, "review-post", before)
                    seen["open"] = await open_waits(c, run_id)
                    seen["everyone's"] = await c.call_tool("inbox", {})
                    seen["bad"] = await c.call_tool("approve", {
                        "run_id": run_id, "inputs": {"colour": "red"}})
                    seen["no question"] = await c.call_tool("answer", {
                        "run_id": run_id, "text": "yes"})
                    seen["no such run"] = await c.call_tool("inbox", {"run_id": "nope"})
                    seen["approved"] = await c.call_tool("approve", {
                        "run_id": run_id, "inputs": {"final_text": "Cats, edited"}})
        return seen

    seen = anyio.run(session)
    (asked,) = seen["open"]
    assert (asked["kind"], asked["step"], asked["asks"]) == (
        "approval", "review", "Publish the draft about cats?")
    assert asked["shown"] == {"draft": "Draft about cats"}
    assert {i["name"]: i.get("default") for i in asked["inputs"]} == {
        "final_text": "Draft about cats", "channel": "blog"}
    everyone = json.loads(text_of(seen["everyone's"]))["waits"]
    assert asked["id"] in [w["id"] for w in everyone]

    for refused in ("bad", "no question", "no such run"):
        said = text_of(seen[refused])
        assert seen[refused].is_error and "Traceback" not in said, (refused, said)
    assert "colour" in text_of(seen["bad"])
    assert "no open question" in text_of(seen["no question"])
    assert "the inbox tool lists" in text_of(seen["no question"])
    assert "nope" in text_of(seen["no such run"])

    decided = json.loads(text_of(seen["approved"]))
    assert decided["state"] == "approved" and decided["value"] == {
        "final_text": "Cats, edited", "channel": "blog"}, decided
    result = json.loads(text_of(seen["ran"]))
    assert not seen["ran"].is_error, result
    assert result["outputs"] == {"posted": "Cats, edited", "channel": "blog"}
    wait = the_wait(healthy, result["run_id"])
    assert (wait.state, wait.decided_by) == ("approved", "mcp:waits-test-client")


@pytest.mark.parametrize(("mode", "reply"), [
    ("auto", {"approve": True, "final_text": "Cats, from the form"}),
    ("legacy", {"approve": False, "reason": "off brand"}),
], ids=["2026-07-28-approves", "handshake-rejects"])
def test_an_approval_is_decided_through_the_clients_form(
        healthy: Stack, vault: Path, tmp_path: Path, mode: str, reply: dict[str, Any]
) -> None:
    asked: list[types.ElicitRequestFormParams] = []

    async def elicit(_: ClientRequestContext, params: types.ElicitRequestParams
                     ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        asked.append(params)
        return types.ElicitResult(action="accept", content=reply)

    async def session() -> Any:
        with anyio.fail_after(SESSION_S):
            async with client(healthy, vault, tmp_path, mode, elicit) as c:
                return await c.call_tool("run_skill", {"name": "review-post",
                                                       "inputs": {"topic": "cats"}})

    ran = anyio.run(session)
    result = json.loads(text_of(ran))
    (form,) = asked
    # what it asks and shows, then yes or no, its inputs with their defaults, and why
    assert form.message.startswith("Publish the draft about cats?")
    assert "draft: Draft about cats" in form.message
    props = form.requested_schema["properties"]
    assert list(props) == ["approve", "final_text", "channel", "reason"]
    assert props["approve"]["type"] == "boolean"
    assert (props["final_text"]["default"], props["channel"]["default"]) == (
        "Draft about cats", "blog")
    assert form.requested_schema["required"] == ["approve"]
    wait = the_wait(healthy, result["run_id"])
    assert wait.decided_by == "mcp:waits-test-client"
    if reply["approve"]:
        assert result["outputs"] == {"posted": "Cats, from the form", "channel": "blog"}
        assert wait.state == "approved"
    else:
        assert not ran.is_error and result["state"] == "rejected", result
        assert "off brand" in result["error"]
        assert (wait.state, wait.reason) == ("rejected", "off brand")
