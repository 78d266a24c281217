"""benchmarks.json and sub-skills.json as frozen, typed data."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from pydantic import ConfigDict, Field, StrictBool, StrictInt

from shared.manifest import Frozen

RUN_WINDOW = 20  # benchmarks.json keeps the last 20 runs; PostgreSQL keeps them all


class RunSource(StrEnum):
    BUILD = "build"
    TEST_WINDOW = "test_window"
    PRODUCTION = "production"
    ASK = "ask"  # `skillq ask` and the dashboard's Ask page (docs/ask.md)


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


class TestCase(Frozen):
    __test__ = False  # not a pytest class

    id: str = Field(min_length=1)
    name: str = ""
    description: str = ""
    inputs: Mapping[str, Any] = Field(default_factory=dict)
    expected: Expected = Expected()


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
