"""A tool call's arguments checked against the tool's own JSON schema
(workers/agent/tool_args.py): what the model is told for each kind of misfit, on every
tool skillq offers, and the check working inside a real Pydantic AI run against the
fake model server (tests/support/fake_llm), over both wire formats (Anthropic sends
arguments as an object, OpenAI Chat Completions as JSON text)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, Tool
from pydantic_ai.exceptions import UnexpectedModelBehavior
from support.fake_llm import FakeLLM, marker

from shared.agent_prompt.tools_spec import (
    BASH_TOOL,
    EXECUTE_SKILL_TOOL,
    IMPROVEMENT_NOTE_TOOL,
    SKILL_TOOL,
)
from shared.skill import load_skill
from workers.agent import resource_tool
from workers.agent.executor import TOOL_RETRIES
from workers.agent.resource_tool import ResourceTool
from workers.agent.tool_args import (
    BadArguments,
    ToolArguments,
    UnreadableSchema,
    check_arguments,
    readable,
)

SCHEMAS: dict[str, Mapping[str, Any]] = {
    SKILL_TOOL.name: SKILL_TOOL.parameters,
    EXECUTE_SKILL_TOOL.name: EXECUTE_SKILL_TOOL.parameters,
    IMPROVEMENT_NOTE_TOOL.name: IMPROVEMENT_NOTE_TOOL.parameters,
    BASH_TOOL.name: BASH_TOOL.parameters,
    resource_tool.NAME: resource_tool.SCHEMA,
}
NOTE = {"skill_name": "style-guide", "error": "e", "diagnosis": "d", "suggested_fix": "f"}


def refusal(tool: str, args: Any) -> str:
    with pytest.raises(BadArguments) as refused:
        check_arguments(tool, SCHEMAS[tool], args)
    return refused.value.message


@pytest.mark.parametrize("tool", sorted(SCHEMAS))
def test_every_tool_skillq_offers_has_a_schema_the_check_reads(tool: str) -> None:
    readable(SCHEMAS[tool], tool)


def test_a_schema_the_check_would_half_read_is_refused() -> None:
    schema = {"type": "object", "properties": {"n": {"anyOf": [{"type": "string"}]}}}
    with pytest.raises(UnreadableSchema, match="anyOf at n"):
        check_arguments("t", schema, {"n": "x"})


# Each tool: an unknown argument, a missing field, a wrong type; and the text the model reads.
@pytest.mark.parametrize(("tool", "args", "said"), [
    ("skill", {"nam": "x"}, ["argument 'nam' is not one it takes (did you mean 'name'?)",
                             "argument 'name' is required (a string: The skill's name"]),
    ("skill", {"name": 123}, ["argument 'name' must be a string (The skill's name",
                              "not an integer: 123"]),
    ("skill", {}, ["argument 'name' is required"]),
    ("skill_resource", {"answer": 1}, ["argument 'answer' is not one it takes; it takes "
                                       "'skill', 'path'",
                                       "argument 'skill' is required (a string",
                                       "argument 'path' is required (a string"]),
    ("skill_resource", {"skill": "big-brief", "path": ["a.md"]},
     ["argument 'path' must be a string (The path as listed), not an array: [\"a.md\"]"]),
    ("execute_skill", {"skill": "relay-leaf"}, ["argument 'skill' is not one it takes; it "
                                                "takes 'name', 'inputs', 'model'",
                                                "argument 'name' is required (a string: "
                                                "Skill name)"]),
    ("execute_skill", {"name": "relay-leaf", "inputs": "{\"text\": \"go\"}"},
     ["argument 'inputs' must be an object (Typed input parameters), not a string"]),
    ("execute_skill", {"name": "relay-leaf", "model": None},
     ["argument 'model' must be a string (Optional model override), not null"]),
    ("skill_improvement_note", {"skill_name": "style-guide", "error": "e"},
     ["argument 'diagnosis' is required (a string: Root cause analysis)",
      "argument 'suggested_fix' is required (a string: How to fix this)"]),
    ("skill_improvement_note", {**NOTE, "error": {"message": "x"}},
     ["argument 'error' must be a string (Error message or description), not an object"]),
    ("skill_improvement_note", {**NOTE, "skil_name": "x"},
     ["argument 'skil_name' is not one it takes (did you mean 'skill_name'?)"]),
    ("bash", {"cmd": "ls"}, ["argument 'cmd' is not one it takes",
                             "argument 'command' is required (a string: The command line"]),
    ("bash", {"command": True}, ["argument 'command' must be a string", "not a boolean: true"]),
    ("bash", '["ls"]', ["the arguments must be one JSON object, not an array: [\"ls\"]"]),
    ("bash", '{"command": "ls"', ["the arguments are not valid JSON (Expecting"]),
])
def test_a_misfit_is_refused_naming_each_argument_and_what_is_wrong(
        tool: str, args: Any, said: list[str]) -> None:
    message = refusal(tool, args)
    assert message.startswith(f"{tool} was not run: its arguments do not fit.\n"), message
    for part in said:
        assert part in message, message
    assert f"{tool} takes one JSON object: {{" in message  # what a good call looks like


def test_a_long_wrong_value_is_cut_when_quoted_back() -> None:
    message = refusal("bash", {"command": ["x" * 500]})
    assert "x" * 70 in message and "x" * 100 not in message


@pytest.mark.parametrize(("tool", "args"), [
    ("skill", {"name": "style-guide"}),
    ("skill", '{"name": "/style-guide"}'),
    ("execute_skill", {"name": "relay-leaf", "inputs": {"text": "go"}, "model": "a:b"}),
    ("skill_improvement_note", {**NOTE, "step": "2", "inputs": {"a": [1]}}),
    ("skill_resource", {"skill": "big-brief", "path": "references/facts.md"}),
    ("bash", {"command": "ls"}),
])
def test_a_good_call_passes_as_a_dict(tool: str, args: Any) -> None:
    assert check_arguments(tool, SCHEMAS[tool], args) == (
        json.loads(args) if isinstance(args, str) else args)


def test_no_arguments_at_all_are_an_empty_object() -> None:
    assert check_arguments("t", {"type": "object", "properties": {}}, "") == {}
    assert "argument 'command' is required" in refusal("bash", "")


def test_types_are_json_s_not_python_s() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"},
                                               "x": {"type": "number"},
                                               "e": {"enum": ["a", "b"]},
                                               "l": {"type": "array",
                                                     "items": {"type": "string"}}}}
    assert check_arguments("t", schema, {"n": 2, "x": 1.5, "e": "a", "l": ["s"]})
    assert check_arguments("t", schema, {"n": 2.0})  # JSON Schema: 2.0 is an integer
    with pytest.raises(BadArguments, match="argument 'n' must be an integer, not a boolean"):
        check_arguments("t", schema, {"n": True})
    with pytest.raises(BadArguments, match="argument 'x' must be a number, not a boolean"):
        check_arguments("t", schema, {"x": False})
    with pytest.raises(BadArguments, match="argument 'e' must be one of \"a\", \"b\""):
        check_arguments("t", schema, {"e": "c"})
    with pytest.raises(BadArguments, match=re.escape("argument 'l[1]' must be a string")):
        check_arguments("t", schema, {"l": ["s", 1]})


# -- in a real run: Pydantic AI, the real SDKs, the fake model server ---------------------

MODELS = ("anthropic:claude-haiku-4-5", "openai-chat:llama3")


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture
def env(llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> FakeLLM:
    for name, value in llm.env().items():
        monkeypatch.setenv(name, value)
    return llm


@pytest.fixture
def key(request: pytest.FixtureRequest) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name)


@pytest.fixture
def resource(tmp_path: Path) -> Tool[None]:
    """skillq's own skill_resource tool (built with Tool.from_schema) over a real skill."""
    folder = tmp_path / "brief"
    (folder / "references").mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: brief\ndescription: Answers from its "
                                     "facts. Use it in tests.\n---\nRead the facts.\n",
                                     encoding="utf-8")
    (folder / "references" / "facts.md").write_text("The answer is 42.\n", encoding="utf-8")
    skill, problems = load_skill(folder)
    assert skill is not None, problems
    return ResourceTool({"brief": skill}).tool()


def agent(model: str, key: str, tool: Tool[None]) -> Agent[None, str]:
    return Agent(model, system_prompt=marker(key), tools=[tool],
                 capabilities=[ToolArguments()], retries={"tools": TOOL_RETRIES})


def said(result: str) -> str:
    """A tool result's text: Chat Completions carries a retry as ``{"error": "..."}``."""
    try:
        found = json.loads(result)
    except ValueError:
        return result
    return str(found["error"]) if isinstance(found, dict) and "error" in found else result


def call(**arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": "skill_resource", "arguments": arguments}]}


@pytest.mark.parametrize("model", MODELS)
def test_misfit_calls_go_back_to_the_model_and_a_good_call_then_runs(
        env: FakeLLM, key: str, model: str, resource: Tool[None]) -> None:
    env.script(key, call(answer=1),  # an unknown argument, and both required ones missing
               call(skill="brief"),  # a missing field
               call(skill="brief", path=7),  # a wrong type
               call(skill="brief", path="references/facts.md"),
               {"text": "Done: {{tool_results}}", "expect_tool_result": "The answer is 42."})
    result = agent(model, key, resource).run_sync("What is the answer?")
    assert result.output == "Done: The answer is 42.\n"
    results = [said(r[0]) for r in env.tool_results(key)[1:]]
    assert "argument 'answer' is not one it takes; it takes 'skill', 'path'" in results[0]
    assert "argument 'path' is required (a string: The path as listed)" in results[1]
    assert "argument 'path' must be a string (The path as listed), not an integer: 7" in \
        results[2]
    assert all(r.startswith("skill_resource was not run") for r in results[:3]), results
    assert results[3] == "The answer is 42.\n"


def test_arguments_that_are_not_an_object_are_a_misfit_too(
        env: FakeLLM, key: str, resource: Tool[None]) -> None:
    # Chat Completions carries arguments as JSON text: here a JSON array
    env.script(key, {"tool_calls": [{"name": "skill_resource", "arguments": ["brief"]}]},
               {"text": "Gave up."})
    result = agent("openai-chat:llama3", key, resource).run_sync("What is the answer?")
    assert result.output == "Gave up."
    (result,) = env.tool_results(key)[1]
    assert "the arguments must be one JSON object, not an array: [\"brief\"]" in said(result)


def test_one_misfit_more_than_the_retries_ends_the_run_with_the_last_refusal(
        env: FakeLLM, key: str, resource: Tool[None]) -> None:
    env.script(key, *[call(skill="brief", path=n) for n in range(TOOL_RETRIES + 1)])
    with pytest.raises(UnexpectedModelBehavior) as ended:
        agent("anthropic:claude-haiku-4-5", key, resource).run_sync("What is the answer?")
    cause = ended.value.__cause__
    assert isinstance(cause, BadArguments) and cause.tool == "skill_resource"
    assert cause.problems == [f"argument 'path' must be a string (The path as listed), not "
                              f"an integer: {TOOL_RETRIES}"]
    assert len(env.requests(key)) == TOOL_RETRIES + 1
