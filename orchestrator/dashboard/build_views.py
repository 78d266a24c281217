"""What the Builds pages show of a skill build (orchestrator/build.py BuildView): each
sub-skill's build with its test cases, the build's progress, whether the page follows it
live, and the JSON a script reads (as `skillq plans --json` and `skillq plan show --json`
print it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.build import BuildView
from shared.states import BuildStage, RunState

BUILT, FAILED, SKIPPED = "built", "failed", "skipped"  # workers/build/outcomes.py records these
BUILDING = "building"  # no outcome recorded yet: its builder is at work


@dataclass(frozen=True)
class SkillBuild:
    """One sub-skill's build (or the compiled orchestrator's), as the page shows it."""

    name: str
    state: str
    passed: int
    total: int  # its test cases in its builder's latest run of them; 0: never run
    why: str
    diagnosis: str
    run_id: str | None  # its builder's run
    orchestrator: bool = False

    @property
    def tests(self) -> str:
        return f"{self.passed}/{self.total}" if self.total else "no test run"


def skill_build(name: str, entry: Mapping[str, Any]) -> SkillBuild:
    tested = entry.get("tested") or {}
    cases = [c for c in tested.get("cases") or [] if isinstance(c, Mapping)]
    run_id = entry.get("run_id")
    return SkillBuild(name, str(entry.get("state") or BUILDING),
                      sum(1 for c in cases if c.get("passed")), len(cases),
                      str(entry.get("why") or ""), str(entry.get("diagnosis") or ""),
                      str(run_id) if run_id else None, bool(entry.get("orchestrator")))


def skill_builds(view: BuildView) -> list[SkillBuild]:
    """Every sub-skill build recorded, in the plan's order (the orchestrator last), then
    any the plan no longer names."""
    order = [s.name for s in view.plan.skills] if view.plan else []
    if view.plan:
        order.append(view.plan.name)
    rank = {name: i for i, name in enumerate(order)}
    names = sorted(view.skills, key=lambda n: (rank.get(n, len(rank)), n))
    return [skill_build(n, view.skills[n] or {}) for n in names]


@dataclass(frozen=True)
class Progress:
    planned: int  # new sub-skills the plan has builders write
    built: int
    failed: int
    skipped: int

    @property
    def to_go(self) -> int:
        return max(self.planned - self.built - self.failed - self.skipped, 0)


def progress(view: BuildView, found: list[SkillBuild]) -> Progress:
    planned = {s.name for s in view.plan.skills if not s.reuse} if view.plan else set()
    mine = [b for b in found if not b.orchestrator]
    counts = {state: sum(1 for b in mine if b.state == state)
              for state in (BUILT, FAILED, SKIPPED)}
    return Progress(len(planned | {b.name for b in mine}), counts[BUILT], counts[FAILED],
                    counts[SKIPPED])


def ended(view: BuildView) -> bool:
    """The build goes no further: its run ended (or is gone)."""
    try:
        return RunState(view.run_state).terminal
    except ValueError:
        return True


def proposed(view: BuildView) -> bool:
    """Its plan waits for a person: approve, revise or reject."""
    return view.stage == BuildStage.PROPOSED and not ended(view)


def row_json(view: BuildView) -> dict[str, Any]:
    """One build in the list, as `skillq plans --json` prints it."""
    return {"id": view.run_id, "stage": view.stage, "run": view.run_state,
            "round": view.round, "task": view.task}


def as_json(view: BuildView) -> dict[str, Any]:
    """The build, as `skillq plan show --json` prints it, with its progress."""
    found = skill_builds(view)
    done = progress(view, found)
    return {**view.as_json(), "ended": ended(view),
            "progress": {"planned": done.planned, "built": done.built,
                         "failed": done.failed, "skipped": done.skipped,
                         "to_go": done.to_go}}
