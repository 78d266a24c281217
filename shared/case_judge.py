"""A test case's verdict (docs/testing.md): how a run of the case ended, judged against
its ``expected``. Pure: `skillq test` (orchestrator/testing.py) and a skill builder's
own runs of its draft's cases (workers/build/) judge alike."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from shared.diagnosis import first_line
from shared.output_schema import misfits
from shared.skillfiles import JudgeAssertion, SchemaAssertion, TestCase
from shared.states import RunState

REFUSED = "refused"  # a case's inputs were refused before any run was recorded


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one case's run ended, as the judge sees it."""

    state: str  # succeeded | failed | cancelled | refused
    outputs: Any = None
    error: str | None = None
    duration_ms: float | None = None
    run_id: str | None = None


@dataclass(frozen=True, slots=True)
class Check:
    """One assertion of a case, as a report names it, and whether one run met it: what
    an eval counts to find the assertions that never discriminate."""

    assertion: str  # "success", "output 'verdict'", "contains 'x'", "schema", "judge: …"
    passed: bool


@dataclass(frozen=True, slots=True)
class CaseResult:
    skill: str
    test_id: str
    name: str
    passed: bool
    problems: tuple[str, ...]  # why it failed; () when it passed
    outcome: Outcome
    # its judge and script assertions: a model's or a sandbox's to check, which a single
    # run's verdict does not do (named, so that nobody takes them for checked)
    unchecked: tuple[str, ...] = ()
    checks: tuple[Check, ...] = ()  # each assertion that was checked, met or not

    def with_checks(self, checks: Sequence[Check], problems: Sequence[str],
                    checked: str) -> CaseResult:
        """The verdict with more assertions checked (``checked``: their kind, no longer
        unchecked), failing if any of them did."""
        return replace(self, passed=self.passed and all(c.passed for c in checks),
                       problems=(*self.problems, *problems),
                       checks=(*self.checks, *checks),
                       unchecked=tuple(u for u in self.unchecked if u != checked))


def same_json(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but true is not 1 and "1" is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (str(k), *_strings(v))]
    return []


def output_has(outputs: Any, text: str) -> bool:
    if any(text in s for s in _strings(outputs)):
        return True
    dumped = json.dumps(outputs, ensure_ascii=False)
    return text in dumped or text in json.dumps(outputs, ensure_ascii=False,
                                                separators=(",", ":"))


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "…"


def judge(case: TestCase, outcome: Outcome, skill: str = "") -> CaseResult:
    """The verdict on one case: every expectation that does not hold, named."""
    exp = case.expected
    checks: list[Check] = []
    problems: list[str] = []

    def check(assertion: str, found: list[str]) -> None:
        checks.append(Check(assertion, not found))
        problems.extend(found)

    succeeded = outcome.state == RunState.SUCCEEDED
    first_error = first_line(outcome.error, 300)
    if exp.success and not succeeded:
        what = "was refused" if outcome.state == REFUSED else f"{outcome.state}"
        check("success", [f"expected success, but it {what}: {first_error or 'no error'}"])
    elif exp.success:
        check("success", [])
    else:
        check("failure", ["expected failure, but it succeeded"] if succeeded else [])
    if exp.error_contains is not None and not succeeded:
        check(f"error contains {exp.error_contains!r}",
              [] if exp.error_contains in (outcome.error or "") else
              [f"error does not contain {exp.error_contains!r}: {first_error or 'no error'}"])
    if succeeded:
        for text in exp.contains:
            check(f"contains {text!r}", [] if output_has(outcome.outputs, text)
                  else [f"outputs do not contain {text!r}"])
        outputs = outcome.outputs if isinstance(outcome.outputs, dict) else {}
        for name, want in exp.output_values.items():
            if name not in outputs:
                check(f"output '{name}'", [f"output '{name}' missing (expected {_short(want)})"])
            else:
                check(f"output '{name}'", [] if same_json(outputs[name], want) else
                      [f"output '{name}' is {_short(outputs[name])}, expected {_short(want)}"])
        for found in case.assertions:
            if isinstance(found, SchemaAssertion):
                check("schema", [f"outputs do not meet the schema: {m}"
                                 for m in misfits(outcome.outputs, found.json_schema)])
    if exp.max_duration_ms is not None and outcome.duration_ms is not None:
        check("max_duration_ms", [] if outcome.duration_ms <= exp.max_duration_ms else
              [f"took {outcome.duration_ms:.0f} ms, over max_duration_ms "
               f"{exp.max_duration_ms}"])
    unchecked = tuple("judge" if isinstance(a, JudgeAssertion) else "script"
                      for a in case.assertions if not isinstance(a, SchemaAssertion))
    return CaseResult(skill=skill, test_id=case.id, name=case.name, passed=not problems,
                      problems=tuple(problems), outcome=outcome, unchecked=unchecked,
                      checks=tuple(checks))
