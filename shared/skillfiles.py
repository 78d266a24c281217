"""benchmarks.json and sub-skills.json as frozen, typed data."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any

from pydantic import ConfigDict, Discriminator, Field, StrictBool, StrictInt, Tag

from shared.manifest import Frozen

RUN_WINDOW = 20  # benchmarks.json keeps the last 20 runs; PostgreSQL keeps them all


class RunSource(StrEnum):
    BUILD = "build"
    TEST_WINDOW = "test_window"
    PRODUCTION = "production"
    ASK = "ask"  # `skillq ask` and the dashboard's Ask page (docs/ask.md)
    EVAL = "eval"  # `skillq eval`: a case run many times, never a production figure


class Expected(Frozen):
    """What a test case expects; any further key is an exact expected output value."""

    model_config = ConfigDict(frozen=True, extra="allow")

    success: StrictBool = True
    output_contains: tuple[str, ...] | str = ()
    error_contains: str | None = None
    max_duration_ms: StrictInt | None = Field(default=None, gt=0)

    @property
    def output_values(self) -> Mapping[str, Any]:
        return dict(self.model_extra or {})

    @property
    def contains(self) -> tuple[str, ...]:
        oc = self.output_contains
        return (oc,) if isinstance(oc, str) else oc


class JudgeAssertion(Frozen):
    """A statement a model checks against the outputs, answering pass or fail with the
    evidence it quoted (its cost kept apart from the skill's)."""

    judge: str = Field(min_length=1)
    model: str | None = None  # else the vault's judge model


class SchemaAssertion(Frozen):
    """A JSON Schema the outputs must meet."""

    json_schema: Mapping[str, Any] = Field(alias="schema")


class ScriptAssertion(Frozen):
    """A checker script in the skill's folder, run in the sandbox on the outputs: exit 0
    passes, anything else fails with what it printed."""

    script: str = Field(min_length=1)


ASSERTION_KINDS = {"judge": JudgeAssertion, "schema": SchemaAssertion,
                   "script": ScriptAssertion}


def _assertion_kind(value: Any) -> str | None:
    if isinstance(value, Mapping):
        return next((key for key in ASSERTION_KINDS if key in value), None)
    return next((k for k, cls in ASSERTION_KINDS.items() if isinstance(value, cls)), None)


# Checks beyond ``expected``'s, for what a single exact answer cannot pin down (an agent
# step's): one of these objects each, told apart by its one required key.
Assertion = Annotated[
    Annotated[JudgeAssertion, Tag("judge")] | Annotated[SchemaAssertion, Tag("schema")]
    | Annotated[ScriptAssertion, Tag("script")],
    Discriminator(_assertion_kind, custom_error_type="assertion_kind",
                  custom_error_message="an assertion is an object with one of judge, "
                  "schema or script")]


class TestCase(Frozen):
    __test__ = False  # not a pytest class

    id: str = Field(min_length=1)
    name: str = ""
    description: str = ""
    inputs: Mapping[str, Any] = Field(default_factory=dict)
    expected: Expected = Expected()
    assertions: tuple[Assertion, ...] = ()


class TriggerQuery(Frozen):
    """A request a person might make, and whether it should load this skill: what a
    description is tried against (its "load-bearing" job, seed 004)."""

    query: str = Field(min_length=1)
    should_trigger: StrictBool


class Tokens(Frozen):
    input: StrictInt = 0
    output: StrictInt = 0


class RunEntry(Frozen):
    run_id: str
    test_id: str | None = None
    timestamp: str
    source: RunSource
    daemon_id: str | None = None
    duration_ms: float = Field(ge=0)
    cost_usd: float = 0.0
    tokens: Tokens = Tokens()
    success: StrictBool
    error: str | None = None
    triggered_by: str | None = None
    input_hash: str | None = None
    version: StrictInt | None = None
    cache_hit: StrictBool = False
    output_size_bytes: StrictInt | None = None
    notes: str | None = None


class Aggregates(Frozen):
    total_runs: StrictInt = 0
    success_rate: float | None = None
    avg_duration_ms: float | None = None
    avg_cost_usd: float | None = None
    last_run: str | None = None


class Benchmarks(Frozen):
    skill: str
    version: StrictInt = Field(default=1, ge=1)
    tests: tuple[TestCase, ...] = ()
    triggers: tuple[TriggerQuery, ...] = ()
    runs: tuple[RunEntry, ...] = ()
    aggregates: Aggregates = Aggregates()


class SubSkillRef(Frozen):
    skill_id: str
    role: str = ""


class SubSkills(Frozen):
    sub_skills: tuple[SubSkillRef, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.skill_id for s in self.sub_skills)
