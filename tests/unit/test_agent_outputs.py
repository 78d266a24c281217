"""Declared outputs as the typed answer of an agent step (workers/agent/outputs.py): the
same contract a script's outputs meet, shown to the model as a JSON schema."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from shared.manifest import Manifest
from shared.valuetypes import parse_type, type_error
from shared.vault import load_vault
from workers.agent.outputs import output_model, output_type, outputs_of

EXAMPLES = Path(__file__).parents[2] / "examples"


def manifest(*outputs: dict[str, Any]) -> Manifest:
    return Manifest.model_validate({"name": "probe", "description": "A probe skill.",
                                    "outputs": list(outputs)})


def one(vtype: str) -> type[BaseModel]:
    return output_model(manifest({"name": "value", "type": vtype}))


SAMPLES: dict[str, tuple[list[Any], list[Any]]] = {  # type: (valid, invalid)
    "string": (["", "text", "3"], [3, None, True, ["a"], {"a": 1}]),
    "number": ([0, 3, -2.5, 1e300], [True, "3", None, math.nan, math.inf, [1]]),
    "integer": ([0, -7, 2**40], [3.0, 2.5, True, "3", None]),
    "boolean": ([True, False], [1, 0, "true", None]),
    "object": ([{}, {"a": [1, {"b": None}]}], [[], "x", None, 1]),
    "string[]": ([[], ["a", "b"]], ["a", ["a", 1], None, [None]]),
    "integer[][]": ([[], [[1, 2], []]], [[1], [[1.5]], [["1"]]]),
    "object[]": ([[{}], []], [[1], {}, [[]]]),
}
CASES = [(t, v, ok) for t, (good, bad) in SAMPLES.items()
         for ok, values in ((True, good), (False, bad)) for v in values]


@pytest.mark.parametrize(("vtype", "value", "valid"), CASES,
                         ids=[f"{t}-{json.dumps(v, default=str)}" for t, v, _ in CASES])
def test_each_type_accepts_exactly_its_values(vtype: str, value: Any, valid: bool) -> None:
    model = one(vtype)
    if valid:
        assert outputs_of(model.model_validate({"value": value})) == {"value": value}
    else:
        with pytest.raises(ValidationError):
            model.model_validate({"value": value})
    # The same verdict a script's outputs get (shared/valuetypes.py).
    assert (type_error(value, parse_type(vtype)) is None) == valid


def test_json_answers_validate_the_same_way() -> None:
    model = one("integer")
    assert outputs_of(model.model_validate_json('{"value": 3}')) == {"value": 3}
    for text in ('{"value": 3.5}', '{"value": "3"}', '{"value": true}'):
        with pytest.raises(ValidationError):
            model.model_validate_json(text)
    with pytest.raises(ValidationError):
        one("number").model_validate_json('{"value": NaN}')


def test_a_number_keeps_an_integer_an_integer() -> None:
    """3 stays 3, so a number output can feed an integer input, as a script's would."""
    answer = outputs_of(one("number").model_validate({"value": 3}))
    assert answer == {"value": 3} and type(answer["value"]) is int


def test_every_output_is_required_and_nothing_else_is_allowed() -> None:
    model = output_model(manifest({"name": "a", "type": "string"},
                                  {"name": "b", "type": "integer"}))
    with pytest.raises(ValidationError, match="b"):
        model.model_validate({"a": "x"})
    with pytest.raises(ValidationError, match="extra"):
        model.model_validate({"a": "x", "b": 1, "c": 2})


def test_an_answer_is_frozen() -> None:
    answer = one("string").model_validate({"value": "x"})
    with pytest.raises(ValidationError):
        answer.value = "y"  # type: ignore[attr-defined]


def test_the_schema_carries_names_and_descriptions() -> None:
    model = output_model(manifest(
        {"name": "summary", "type": "string", "description": "120-200 words of prose"},
        {"name": "tags", "type": "string[]"}))
    schema = model.model_json_schema()
    assert schema["required"] == ["summary", "tags"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["summary"]["description"] == "120-200 words of prose"
    assert "description" not in schema["properties"]["tags"]
    assert schema["properties"]["tags"]["items"] == {"type": "string"}
    assert "probe" in schema["description"]


def test_outputs_named_like_basemodel_attributes_keep_their_names() -> None:
    outputs = [{"name": n, "type": "string"} for n in ("json", "model_fields", "copy", "_x")]
    model = output_model(manifest(*outputs))
    names = ["json", "model_fields", "copy", "_x"]
    assert list(model.model_json_schema()["properties"]) == names
    values = {n: n.upper() for n in names}
    assert outputs_of(model.model_validate(values)) == values


def test_no_outputs_means_a_text_answer_that_is_its_one_output() -> None:
    plain = manifest()
    assert output_type(plain) is str
    assert outputs_of("Done: the report is in the chat.") == {
        "answer": "Done: the report is in the chat."}
    assert output_model(plain).model_json_schema()["properties"] == {}
    # what a run returns, what run-show and MCP describe, what a later step may reference
    assert plain.answers_in_text
    assert [(o.name, o.type) for o in plain.result_outputs] == [("answer", "string")]
    assert plain.output("answer") is not None


def test_only_an_agent_leaf_without_outputs_answers_in_text() -> None:
    def made(**fields: Any) -> Manifest:
        return Manifest.model_validate({"name": "probe", "description": "A probe.", **fields})

    declared = made(outputs=[{"name": "summary", "type": "string"}])
    script = made(run={"command": "python3 main.py"})
    flow = made(steps=[{"id": "a", "skill": "other"}])
    for m in (declared, script, flow):
        assert not m.answers_in_text
        assert m.output("answer") is None
    assert [o.name for o in declared.result_outputs] == ["summary"]
    assert made(approach="agent").answers_in_text


def test_the_youtube_agent_skills_outputs() -> None:
    vault = load_vault(EXAMPLES / "youtube")
    expected = {"content-analyzer": {"analysis": "object", "summary": "string"},
                "blog-post-writer": {"blog_post": "string", "path": "string"},
                "text-summarizer": {"summary": "string"}}
    for name, fields in expected.items():
        kind = output_type(vault.skills[name].manifest)
        assert isinstance(kind, type) and issubclass(kind, BaseModel)
        props = kind.model_json_schema()["properties"]
        assert {k: v["type"] for k, v in props.items()} == fields
        assert all(v.get("description") for v in props.values())


PLAIN_ANSWER = Path(__file__).parents[1] / "integration" / "vaults" / "plain-answer"


def test_a_later_step_may_take_a_plain_skill_s_answer(tmp_path: Path) -> None:
    assert load_vault(PLAIN_ANSWER).problems == ()  # ${steps.style.outputs.answer}
    vault = Path(shutil.copytree(PLAIN_ANSWER, tmp_path / "vault"))
    flow = vault / "styled-shout" / "SKILL.md"
    flow.write_text(flow.read_text(encoding="utf-8").replace(
        "text: ${steps.style.outputs.answer}", "text: ${steps.style.outputs.answr}"),
        encoding="utf-8")
    problems = [p.message for p in load_vault(vault).problems]
    assert problems == ["${steps.style.outputs.answr}: 'house-style' has no output 'answr'; "
                        "did you mean 'answer'?"], problems


def test_an_answer_the_record_cannot_hold_is_a_misfit_and_text_is_cleaned() -> None:
    """A model's NUL or lone surrogate never reaches PostgreSQL: in declared outputs it is
    a misfit the model is asked to correct; in a text answer it becomes U+FFFD."""
    manifest = Manifest.model_validate({
        "name": "nul", "description": "Answer. Use it for tests.",
        "outputs": [{"name": "title", "type": "string"}, {"name": "meta", "type": "object"}]})
    model = output_model(manifest)
    for bad in ({"title": "a\x00b", "meta": {}}, {"title": "ok", "meta": {"k\x00": 1}},
                {"title": "ok", "meta": {"k": ["\ud800"]}}):
        with pytest.raises(ValidationError, match="cannot be stored"):
            model.model_validate(bad)
    assert outputs_of("a\x00b\ud800c") == {"answer": "a\ufffdb\ufffdc"}
