"""benchmarks.json's assertions beyond `expected` (issue 45): a judge's statement, a JSON
Schema, a checker script, typed and validated on the file and field at fault; and the
trigger queries a description is tried against."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from shared.output_schema import misfits, schema_problem
from shared.skillfiles import (
    Benchmarks,
    JudgeAssertion,
    SchemaAssertion,
    ScriptAssertion,
    TestCase,
)
from shared.vault import load_vault

SKILL_MD = """---
name: greet
description: Greet someone by name. Use it when a message needs a greeting.
version: 1
inputs:
  - {name: who, type: string, required: true}
outputs:
  - {name: line, type: string}
run: {command: python3 main.py, timeout: 30, retries: 0}
---

Greets.
"""


def vault_with(tmp_path: Path, assertions: list[Any]) -> list[str]:
    folder = tmp_path / "greet"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL_MD)
    (folder / "main.py").write_text("print('hi')\n")
    (folder / "check_line.py").write_text("import sys\n")
    (folder / "benchmarks.json").write_text(json.dumps({
        "skill": "greet", "version": 1, "runs": [],
        "tests": [{"id": "greets", "inputs": {"who": "Ada"}, "assertions": assertions}],
        "triggers": [{"query": "say hello to Ada", "should_trigger": True},
                     {"query": "count words", "should_trigger": False}]}))
    return [f"{p.field}: {p.message}" for p in load_vault(tmp_path).problems]


def test_each_kind_is_told_apart_by_its_key() -> None:
    case = TestCase.model_validate({"id": "a", "assertions": [
        {"judge": "the line greets Ada by name", "model": "anthropic:claude-haiku-4-5"},
        {"schema": {"type": "object", "required": ["line"]}},
        {"script": "check_line.py"}]})
    assert [type(a) for a in case.assertions] == [JudgeAssertion, SchemaAssertion,
                                                  ScriptAssertion]
    assert case.model_dump(mode="json", by_alias=True)["assertions"][1] == {
        "schema": {"type": "object", "required": ["line"]}}


def test_an_unknown_kind_is_named_once() -> None:
    with pytest.raises(ValidationError) as caught:
        TestCase.model_validate({"id": "a", "assertions": [{"jugde": "typo"}]})
    assert caught.value.error_count() == 1
    assert "one of judge, schema or script" in str(caught.value)


def test_a_sound_file_validates_with_its_triggers(tmp_path: Path) -> None:
    assert vault_with(tmp_path, [{"judge": "it greets"}, {"script": "check_line.py"},
                                 {"schema": {"type": "object"}}]) == []
    bench = load_vault(tmp_path).skills["greet"].benchmarks
    assert isinstance(bench, Benchmarks)
    assert [(t.query, t.should_trigger) for t in bench.triggers] == [
        ("say hello to Ada", True), ("count words", False)]


@pytest.mark.parametrize(("assertion", "field", "says"), [
    ({"schema": {"type": "objekt"}}, "tests[0].assertions[0].schema", "not a JSON Schema"),
    ({"script": "missing.py"}, "tests[0].assertions[0].script", "no file 'missing.py'"),
    ({"script": "../outside.py"}, "tests[0].assertions[0].script", "outside the skill's"),
])
def test_a_broken_assertion_names_its_field(tmp_path: Path, assertion: dict[str, Any],
                                            field: str, says: str) -> None:
    (problem,) = vault_with(tmp_path, [assertion])
    assert problem.startswith(f"{field}: ") and says in problem


def test_misfits_name_the_path_and_why() -> None:
    schema = {"type": "object", "required": ["line"],
              "properties": {"line": {"type": "string", "minLength": 3},
                             "n": {"type": "integer"}}}
    assert misfits({"line": "hello", "n": 2}, schema) == []
    assert misfits({"line": "hi", "n": "2"}, schema) == [
        "line: 'hi' is too short", "n: '2' is not of type 'integer'"]
    assert misfits({}, schema) == ["outputs: 'line' is a required property"]
    assert schema_problem({"type": "object"}) is None


def test_a_cases_verdict_checks_its_schema_and_names_what_it_leaves() -> None:
    from shared.case_judge import Outcome, judge

    case = TestCase.model_validate({"id": "greets", "assertions": [
        {"schema": {"type": "object", "properties": {"line": {"maxLength": 5}}}},
        {"judge": "it greets Ada"}, {"script": "check_line.py"}]})
    fits = judge(case, Outcome("succeeded", outputs={"line": "hi"}))
    assert fits.passed and fits.unchecked == ("judge", "script")
    long = judge(case, Outcome("succeeded", outputs={"line": "hello Ada"}))
    assert long.problems == ("outputs do not meet the schema: line: 'hello Ada' is too long",)
