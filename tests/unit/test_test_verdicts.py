"""`skillq test`'s judge: a benchmarks.json case's expectations against a run's outcome."""

from __future__ import annotations

from typing import Any

import pytest

from shared.case_judge import REFUSED, Outcome, judge, output_has, same_json
from shared.skillfiles import TestCase


def case(**expected: Any) -> TestCase:
    return TestCase.model_validate({"id": "t1", "name": "n", "expected": expected})


OK = Outcome("succeeded", outputs={"title": "Hello World", "n": 3, "tags": ["a", "b"],
                                   "flag": True}, duration_ms=120.0, run_id="run-1")
FAILED = Outcome("failed", error="step 'x' failed: boom: no captions here",
                 duration_ms=50.0, run_id="run-2")


def test_passing_success_case_checks_every_field() -> None:
    result = judge(case(success=True, output_contains=["Hello", "World"], title="Hello World",
                        n=3.0, tags=["a", "b"], max_duration_ms=200), OK)
    assert result.passed, result.problems


@pytest.mark.parametrize(("expected", "problem"), [
    ({"success": False}, "expected failure, but it succeeded"),
    ({"output_contains": ["Goodbye"]}, "outputs do not contain 'Goodbye'"),
    ({"output_contains": "Goodbye"}, "outputs do not contain 'Goodbye'"),
    ({"title": "Hello"}, "output 'title' is \"Hello World\", expected \"Hello\""),
    ({"flag": 1}, "output 'flag' is true, expected 1"),
    ({"n": "3"}, "output 'n' is 3, expected \"3\""),
    ({"missing": 1}, "output 'missing' missing (expected 1)"),
    ({"max_duration_ms": 100}, "took 120 ms, over max_duration_ms 100"),
])
def test_each_failed_expectation_is_named(expected: dict[str, Any], problem: str) -> None:
    result = judge(case(**expected), OK)
    assert not result.passed
    assert problem in result.problems


def test_expected_failure_with_matching_error_passes() -> None:
    assert judge(case(success=False, error_contains="no captions"), FAILED).passed


def test_expected_failure_with_other_error_fails() -> None:
    result = judge(case(success=False, error_contains="rate limited"), FAILED)
    assert result.problems == ("error does not contain 'rate limited': step 'x' failed: "
                               "boom: no captions here",)


def test_unexpected_failure_quotes_the_error() -> None:
    result = judge(case(success=True), FAILED)
    assert result.problems == ("expected success, but it failed: step 'x' failed: boom: "
                               "no captions here",)


def test_refused_inputs_count_as_an_expected_failure() -> None:
    refused = Outcome(REFUSED, error="benchmarks.json: inputs.count: expected integer")
    assert judge(case(success=False, error_contains="inputs.count"), refused).passed
    result = judge(case(success=True), refused)
    assert result.problems[0].startswith("expected success, but it was refused: ")


def test_output_checks_are_skipped_on_an_expected_failure() -> None:
    assert judge(case(success=False, output_contains=["x"], title="y"), FAILED).passed


def test_output_has_searches_strings_and_json_text() -> None:
    outputs = {"report": "line one\n| api | 3 |", "totals": {"commits": 4}}
    assert output_has(outputs, "| api | 3 |")
    assert output_has(outputs, '"commits": 4') and output_has(outputs, '"commits":4')
    assert output_has(outputs, "totals")
    assert not output_has(outputs, "commits: 4")


def test_same_json_is_strict_about_types() -> None:
    assert same_json({"a": [1, 2.0]}, {"a": [1.0, 2]})
    assert not same_json(True, 1) and not same_json(0, False)
    assert not same_json("1", 1) and not same_json(None, 0)
    assert not same_json({"a": 1}, {"a": 1, "b": 2}) and not same_json([1], [1, 1])
