"""The fake LLM (tests/support/fake_llm) speaks the providers' real wire formats: the real
anthropic and openai SDKs, and Pydantic AI on top of them, run against it unchanged.

No skillq service is involved; the fake is a local HTTP server on 127.0.0.1. One server
serves the whole module; each test scripts its own conversation keys.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlsplit

import anthropic
import openai
import pytest
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelHTTPError, ModelRateLimitError
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider
from support.fake_llm import FakeLLM, FakeLLMProcess, marker

# model string -> the endpoint Pydantic AI sends it to, and the cost genai-prices gives a
# 3-request loop at 1,000 in / 200 out tokens per request (None: a local model, unpriced).
MODELS = {
    "anthropic:claude-haiku-4-5": ("/v1/messages", Decimal("0.006")),
    "openai:gpt-4.1-mini": ("/v1/responses", Decimal("0.00216")),
    "openai-chat:llama3": ("/v1/chat/completions", None),
}
ENV_NAMES = ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_KEY")


class City(BaseModel):
    name: str
    population: int


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture
def key(request: pytest.FixtureRequest) -> str:
    """A conversation key of this test's own (its node name, made marker-safe)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name)


@pytest.fixture
def env(llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> FakeLLM:
    """Point model strings (``anthropic:...``, ``openai:...``) at the fake via the environment."""
    for name, value in llm.env().items():
        monkeypatch.setenv(name, value)
    return llm


def paths(llm: FakeLLM, key: str) -> list[str]:
    return [urlsplit(entry["path"]).path for entry in llm.requests(key)]


# -- the SDKs, directly -----------------------------------------------------------------------


def test_anthropic_sdk_message_with_cache_usage(llm: FakeLLM, key: str) -> None:
    usage = {"input": 1000, "output": 100, "cache_read": 600, "cache_write": 200}
    llm.script(key, {"text": "Hello from the fake.", "usage": usage})
    client = anthropic.Anthropic(base_url=llm.anthropic_base_url, api_key="sk-ant-fake")
    message = client.messages.create(
        model="claude-haiku-4-5",
        max_tokens=100,
        system=f"You are terse. {marker(key)}",
        messages=[{"role": "user", "content": "hi"}],
    )
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == "Hello from the fake."
    assert message.stop_reason == "end_turn"
    assert message.model == "claude-haiku-4-5"
    # Anthropic's input_tokens excludes the cached parts; the three add up to the scripted input.
    assert message.usage.input_tokens == 200
    assert message.usage.cache_read_input_tokens == 600
    assert message.usage.cache_creation_input_tokens == 200
    assert message.usage.output_tokens == 100
    [seen] = llm.requests(key)
    assert (seen["method"], seen["api"], seen["stream"]) == ("POST", "anthropic", False)
    assert seen["body"]["messages"] == [{"role": "user", "content": "hi"}]


def test_anthropic_sdk_streams_text_and_tool_use(llm: FakeLLM, key: str) -> None:
    call = {"name": "lookup", "arguments": {"city": "Paris", "fields": ["population"]}}
    llm.script(key, {"text": "Let me look that up.", "tool_calls": [call]})
    client = anthropic.Anthropic(base_url=llm.anthropic_base_url, api_key="sk-ant-fake")
    with client.messages.stream(
        model="claude-haiku-4-5",
        max_tokens=100,
        messages=[{"role": "user", "content": f"{marker(key)} population of Paris?"}],
    ) as stream:
        events = list(stream)
        final = stream.get_final_message()
    kinds = [event.type for event in events if not event.type.startswith(("text", "input_json"))]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.count("content_block_start") == kinds.count("content_block_stop") == 2
    deltas = [event.delta.type for event in events if event.type == "content_block_delta"]
    assert {"text_delta", "input_json_delta"} == set(deltas) and len(deltas) > 2
    assert final.stop_reason == "tool_use"
    assert final.content[0].text == "Let me look that up."
    assert (final.content[1].name, final.content[1].input) == ("lookup", call["arguments"])


def test_openai_chat_sdk_tool_calls_and_stream(llm: FakeLLM, key: str) -> None:
    usage = {"input": 1000, "output": 50, "cache_read": 600}
    llm.script(
        key,
        {"tool_calls": [{"name": "lookup", "arguments": {"city": "Paris"}}], "usage": usage},
        {"text": "Paris has about two million people."},
    )
    client = openai.OpenAI(base_url=llm.openai_base_url, api_key="sk-fake")
    messages = [{"role": "system", "content": marker(key)}, {"role": "user", "content": "Paris?"}]
    completion = client.chat.completions.create(model="llama3", messages=messages)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    [tool_call] = choice.message.tool_calls
    assert tool_call.function.name == "lookup"
    assert json.loads(tool_call.function.arguments) == {"city": "Paris"}
    assert completion.usage.prompt_tokens == 1000
    assert completion.usage.completion_tokens == 50
    assert completion.usage.prompt_tokens_details.cached_tokens == 600

    chunks = list(
        client.chat.completions.create(
            model="llama3",
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Paris has about two million people."
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.prompt_tokens == 10


def test_openai_responses_sdk_function_call_and_stream(llm: FakeLLM, key: str) -> None:
    llm.script(
        key,
        {
            "tool_calls": [{"name": "lookup", "arguments": {"city": "Paris"}}],
            "usage": {"input": 300, "output": 20, "cache_read": 100},
        },
        {"text": "About two million."},
    )
    client = openai.OpenAI(base_url=llm.openai_base_url, api_key="sk-fake")
    response = client.responses.create(
        model="gpt-4.1-mini", instructions=marker(key), input="Paris?"
    )
    [item] = response.output
    assert (item.type, item.name, json.loads(item.arguments)) == (
        "function_call",
        "lookup",
        {"city": "Paris"},
    )
    assert response.usage.input_tokens == 300
    assert response.usage.output_tokens == 20
    assert response.usage.input_tokens_details.cached_tokens == 100

    events = list(
        client.responses.create(
            model="gpt-4.1-mini", instructions=marker(key), input="Paris?", stream=True
        )
    )
    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == "About two million."
    assert events[-1].response.output_text == "About two million."


def test_models_list_answers_both_sdks(llm: FakeLLM) -> None:
    anthropic_ids = [m.id for m in anthropic.Anthropic(base_url=llm.url, api_key="x").models.list()]
    openai_ids = [
        m.id for m in openai.OpenAI(base_url=llm.openai_base_url, api_key="x").models.list()
    ]
    assert "claude-haiku-4-5" in anthropic_ids and "gpt-4.1-mini" in openai_ids


def test_error_turns_raise_the_sdk_error_classes(llm: FakeLLM, key: str) -> None:
    llm.script(
        key,
        {"error": {"status": 400, "message": "prompt is too long"}},
        {"error": {"status": 500}},
        {"error": {"status": 429, "message": "slow down"}},
    )
    claude = anthropic.Anthropic(base_url=llm.url, api_key="x", max_retries=0)
    gpt = openai.OpenAI(base_url=llm.openai_base_url, api_key="x", max_retries=0)
    messages = [{"role": "user", "content": marker(key)}]
    with pytest.raises(anthropic.BadRequestError, match="prompt is too long") as bad:
        claude.messages.create(model="claude-haiku-4-5", max_tokens=5, messages=messages)
    assert bad.value.body["error"]["type"] == "invalid_request_error"
    with pytest.raises(anthropic.InternalServerError):
        claude.messages.create(model="claude-haiku-4-5", max_tokens=5, messages=messages)
    with pytest.raises(openai.RateLimitError, match="slow down"):
        gpt.chat.completions.create(model="llama3", messages=messages)
    # Nothing left to answer: a 400 naming the key.
    with pytest.raises(openai.BadRequestError, match=f"no scripted turn left for key '{key}'"):
        gpt.responses.create(model="gpt-4.1-mini", input=marker(key))


# -- Pydantic AI, by model string (ANTHROPIC_BASE_URL / OPENAI_BASE_URL) ----------------------

models = pytest.mark.parametrize("model", list(MODELS))


@models
def test_agent_plain_text(env: FakeLLM, key: str, model: str) -> None:
    env.script(key, {"text": "Bonjour."})
    result = Agent(model, system_prompt=f"Answer in French. {marker(key)}").run_sync("Hello")
    assert result.output == "Bonjour."
    assert paths(env, key) == [MODELS[model][0]]


@models
def test_agent_tool_loop_usage_and_cost(env: FakeLLM, key: str, model: str) -> None:
    usage = {"input": 1000, "output": 200}
    env.script(
        key,
        {"tool_calls": [{"name": "population", "arguments": {"city": "Paris"}}], "usage": usage},
        {"tool_calls": [{"name": "population", "arguments": {"city": "Lyon"}}], "usage": usage},
        {"text": "Together: {{tool_results}}", "usage": usage, "expect_tool_result": "522250"},
    )
    agent = Agent(model, system_prompt=marker(key))
    calls = []

    @agent.tool_plain
    def population(city: str) -> int:
        """The population of a French city."""
        calls.append(city)
        return {"Paris": 2102650, "Lyon": 522250}[city]

    result = agent.run_sync("How many people live in Paris and Lyon?")
    assert calls == ["Paris", "Lyon"]
    assert result.output == "Together: 522250"
    # The tool's result went back to the model in the next request.
    assert env.tool_results(key) == [[], ["2102650"], ["522250"]]
    assert paths(env, key) == [MODELS[model][0]] * 3
    run_usage = result.usage
    assert (run_usage.requests, run_usage.tool_calls) == (3, 2)
    assert (run_usage.input_tokens, run_usage.output_tokens) == (3000, 600)
    assert run_usage.cost == MODELS[model][1]


@models
def test_agent_structured_output(env: FakeLLM, key: str, model: str) -> None:
    env.script(key, {"output": {"name": "Paris", "population": 2102650}})
    agent = Agent(model, system_prompt=marker(key), output_type=City)
    result = agent.run_sync("The biggest French city?")
    assert result.output == City(name="Paris", population=2102650)
    # Pydantic AI asks for structured output through a tool named final_result.
    body = env.bodies(key)[0]
    names = [tool.get("name") or tool["function"]["name"] for tool in body["tools"]]
    assert names == ["final_result"]


@models
def test_agent_streams(env: FakeLLM, key: str, model: str) -> None:
    env.script(
        key,
        {"tool_calls": [{"name": "shout", "arguments": {"word": "hi"}}]},
        {"text": "The tool said {{tool_results}} and that is all."},
    )
    agent = Agent(model, system_prompt=marker(key))

    @agent.tool_plain
    def shout(word: str) -> str:
        return word.upper()

    async def run() -> tuple[list[str], int]:
        async with agent.run_stream("Say hi loudly.") as stream:
            outputs = [text async for text in stream.stream_output(debounce_by=None)]
            return outputs, stream.usage.requests

    outputs, requests = asyncio.run(run())
    assert outputs[-1] == "The tool said HI and that is all."
    assert len(set(outputs)) > 1  # arrived in pieces
    assert requests == 2
    assert [entry["stream"] for entry in env.requests(key)][-1] is True


@models
def test_agent_errors_and_retries(env: FakeLLM, key: str, model: str) -> None:
    env.script(
        key,
        {"error": {"status": 500, "retry_after": 0.01}},  # the SDK retries this one
        {"text": "Recovered."},
        {"error": {"status": 400, "message": "bad tool schema"}},
        {"error": {"status": 429, "message": "rate limited"}},
    )
    agent = Agent(model, system_prompt=marker(key))
    assert agent.run_sync("Hello").output == "Recovered."
    assert len(env.requests(key)) == 2
    with pytest.raises(ModelHTTPError, match="bad tool schema") as failed:
        agent.run_sync("Hello")
    assert failed.value.status_code == 400
    with pytest.raises(ModelRateLimitError):
        agent.run_sync("Hello", model_settings={"max_retries": 0})
    assert env.remaining().get(key) is None


@models
def test_agent_cache_usage(env: FakeLLM, key: str, model: str) -> None:
    usage = {"input": 1000, "output": 100, "cache_read": 600, "cache_write": 200}
    env.script(key, {"text": "Cached.", "usage": usage})
    run_usage = Agent(model, system_prompt=marker(key)).run_sync("Hello").usage
    assert (run_usage.input_tokens, run_usage.output_tokens) == (1000, 100)
    assert (run_usage.cache_read_tokens, run_usage.cache_write_tokens) == (600, 200)
    if model.startswith("anthropic:"):
        # 200 uncached at $1/M, 600 read at $0.10/M, 200 written at $1.25/M, 100 out at $5/M.
        assert run_usage.cost == Decimal("0.00101")


def test_agent_with_explicit_providers(
    llm: FakeLLM, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    claude = AnthropicModel(
        "claude-haiku-4-5", provider=AnthropicProvider(base_url=llm.url, api_key="x")
    )
    openai_provider = OpenAIProvider(base_url=llm.openai_base_url, api_key="x")
    gpt = OpenAIResponsesModel("gpt-4.1-mini", provider=openai_provider)
    llama = OpenAIChatModel("llama3", provider=openai_provider)
    llm.script(key, {"text": "one"}, {"text": "two"}, {"text": "three"})
    outputs = [
        Agent(model, system_prompt=marker(key)).run_sync("count").output
        for model in (claude, gpt, llama)
    ]
    assert outputs == ["one", "two", "three"]
    assert paths(llm, key) == ["/v1/messages", "/v1/responses", "/v1/chat/completions"]


def test_interleaved_keys_do_not_mix(env: FakeLLM, key: str) -> None:
    first, second = f"{key}-a", f"{key}-b"
    for name in (first, second):
        env.script(
            name,
            {"tool_calls": [{"name": "echo", "arguments": {"text": name}}]},
            {"text": f"done {name}: {{{{tool_results}}}}"},
        )

    def agent(model: str, name: str) -> Agent:
        made = Agent(model, system_prompt=f"Conversation {marker(name)}")

        @made.tool_plain
        async def echo(text: str) -> str:
            await asyncio.sleep(0.05)  # let the other conversation's request in between
            return f"echo {text}"

        return made

    async def both() -> list[str]:
        runs = [
            agent("anthropic:claude-haiku-4-5", first).run("go"),
            agent("openai-chat:llama3", second).run("go"),
        ]
        return [result.output for result in await asyncio.gather(*runs)]

    assert asyncio.run(both()) == [f"done {first}: echo {first}", f"done {second}: echo {second}"]
    for name, other in ((first, second), (second, first)):
        bodies = json.dumps(env.bodies(name))
        assert len(env.requests(name)) == 2
        assert marker(name) in bodies and marker(other) not in bodies


def test_expected_tool_result_missing_is_a_clear_error(llm: FakeLLM, key: str) -> None:
    llm.script(key, {"text": "never", "expect_tool_result": "42"})
    client = anthropic.Anthropic(base_url=llm.url, api_key="x", max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match="expected a tool result containing '42'"):
        client.messages.create(
            model="claude-haiku-4-5",
            max_tokens=5,
            messages=[{"role": "user", "content": marker(key)}],
        )


def test_script_control_endpoints() -> None:
    with FakeLLM({"default": [{"text": "from the constructor"}]}) as llm:
        with pytest.raises(ValueError, match="a turn has one of"):
            llm.script("k", {"text": "a", "output": {}})
        assert llm.remaining() == {"default": 1}
        client = openai.OpenAI(base_url=llm.openai_base_url, api_key="x")
        # No marker anywhere: the "default" key.
        answer = client.chat.completions.create(
            model="llama3", messages=[{"role": "user", "content": "hi"}]
        )
        assert answer.choices[0].message.content == "from the constructor"
        assert [entry["key"] for entry in llm.requests()] == ["default"]
        llm.script("k", {"text": "later"})
        llm.reset()
        assert llm.remaining() == {} and llm.requests() == []


def test_standalone_process_serves_other_processes(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"worker": [{"text": "hello from the script file"}]}))
    child = (
        "from pydantic_ai import Agent\n"
        "print(Agent('anthropic:claude-haiku-4-5', system_prompt='[[fake:worker]]')"
        ".run_sync('hi').output)\n"
    )
    with FakeLLMProcess(script) as llm:
        done = subprocess.run(
            [sys.executable, "-c", child],
            env={**os.environ, **llm.env()},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "hello from the script file"
        assert [entry["api"] for entry in llm.requests("worker")] == ["anthropic"]
    assert llm.process is not None and llm.process.returncode is not None
