"""The skill builder's plan (seed 000, Stage 1): the contract a build follows, as frozen,
typed data. The planner agent writes it through its ``update_plan`` tool, people read
it as plan.md (shared/build_compile.py), and it is checked mechanically before anyone
sees it (shared/build_plan_checks.py).

For each new sub-skill: its single responsibility, its approach and why the cheaper
ones were ruled out, its typed inputs and outputs with defaults, the credentials it
needs, what it reuses, the sub-skills it depends on, and its test cases. Then the
orchestrator's steps with their failure policies, compiled from the plan
deterministically (the seed's compileSkill), never written by a model.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any

from pydantic import Field, StrictBool

from shared.manifest import IDENT, Approach, Frozen, InputSpec, Step

Ident = Annotated[str, Field(pattern=rf"^{IDENT}$")]


class Work(StrEnum):
    """What one piece of a skill's work is: the seed's determinism boundary keeps the two
    in separate skills."""

    DETERMINISTIC = "deterministic"  # an API call, a transform: the same answer each time
    AGENTIC = "agentic"  # analysis, writing: a model's judgement


class PlannedOutput(Frozen):
    name: Ident
    type: str
    description: str = ""


class PlannedTest(Frozen):
    """A test case as benchmarks.json keeps it (docs/testing-notes-secrets.md)."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    name: str
    inputs: Mapping[str, Any] = Field(default_factory=dict)
    expected: Mapping[str, Any] = Field(default_factory=lambda: {"success": True})


class PlannedSkill(Frozen):
    """One sub-skill: to build, or an existing one reused as it is (``reuse``)."""

    name: str
    responsibility: str = Field(min_length=1, description="what it does, in one sentence")
    approach: Approach
    why: str = Field(default="", description="why the cheaper approaches were ruled out")
    work: tuple[Work, ...] = ()  # what its steps are; never both kinds
    inputs: tuple[InputSpec, ...] = ()
    outputs: tuple[PlannedOutput, ...] = ()
    auth: tuple[Ident, ...] = ()  # the secrets it declares
    reuse: str | None = None  # an existing skill of the vault that does this already
    depends_on: tuple[str, ...] = ()  # sub-skills built first: it sees their manifests
    tests: tuple[PlannedTest, ...] = ()
    notes: str = ""  # what research found: rate limits, quirks, edge cases

    @property
    def built(self) -> bool:
        return self.reuse is None


class BuildPlan(Frozen):
    task: str = Field(min_length=1, description="the request, in the person's words")
    name: str  # the orchestrator's
    description: str = Field(min_length=1)
    inputs: tuple[InputSpec, ...] = ()
    outputs: tuple[Mapping[str, str], ...] = ()  # {name, type, description, from}
    skills: tuple[PlannedSkill, ...] = ()
    steps: tuple[Step, ...] = ()
    notes: tuple[str, ...] = ()  # what was discovered, for the builders
    deviations: tuple[str, ...] = ()  # what the build did otherwise, written back
    approved: StrictBool = False

    def skill(self, name: str) -> PlannedSkill | None:
        return next((s for s in self.skills if s.name == name), None)

    @property
    def to_build(self) -> tuple[PlannedSkill, ...]:
        return tuple(s for s in self.skills if s.built)

    def build_order(self) -> list[list[str]]:
        """The new sub-skills in waves: each wave's skills depend only on earlier waves'
        (the independent ones build at once). A cycle leaves its skills out: the checks
        report it."""
        building = {s.name for s in self.to_build}
        # a reused skill is there already; an unknown one never comes (checks say so)
        todo = {s.name: {d for d in s.depends_on if d in building or self.skill(d) is None}
                for s in self.to_build}
        waves: list[list[str]] = []
        done: set[str] = set()
        while todo:
            ready = sorted(n for n, deps in todo.items() if deps <= done)
            if not ready:
                break
            waves.append(ready)
            done.update(ready)
            for name in ready:
                del todo[name]
        return waves
