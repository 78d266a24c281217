"""Which of a build's sub-skills are built: a draft is built only when its
builder's last run of its test cases passed (recorded by the run_tests tool, not the
model's word; an agent skill's case passes only when every run of its eval did) and the
draft has not changed since (its hash as stored, against the hash it was tested with).
One that does not is reported with its failing cases and its builder's last diagnosis;
those depending on it are skipped, and the rest go on."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from lifecycle import builds
from shared.build_plan import PlannedSkill
from shared.db.build_models import Build
from shared.db.models import PipelineRun
from shared.states import RunState, StepState
from shared.store import unpack
from workers.step_types import Result

BUILT, FAILED, SKIPPED = "built", "failed", "skipped"


def state_of(build: Build, name: str) -> str | None:
    return (build.skills.get(name) or {}).get("state")


def settled(build: Build, name: str) -> bool:
    return state_of(build, name) in (BUILT, FAILED, SKIPPED)


def unbuilt_dependencies(build: Build, planned: PlannedSkill) -> list[str]:
    return [d for d in planned.depends_on if state_of(build, d) in (FAILED, SKIPPED)]


def skipped(broken: list[str]) -> dict[str, Any]:
    return {"state": SKIPPED, "why": f"not built: it depends on {', '.join(broken)}, "
            "which did not build"}


def _verdict(entry: dict[str, Any], run: PipelineRun) -> str | None:
    """Why the draft is not built; None when it is."""
    tested = entry.get("tested") or {}
    if run.state != RunState.SUCCEEDED:
        return f"its builder {run.state}: {run.error or 'no error recorded'}"
    if not tested:
        return "its builder never ran its test cases"
    if not tested.get("passed"):
        failing = [f"{c['test']}{_runs(c)}: {'; '.join(c.get('problems') or [])}"
                   for c in tested.get("cases", []) if not c.get("passed")]
        return "its test cases did not pass: " + " | ".join(failing)
    if (entry.get("draft") or {}).get("hash") != tested.get("hash"):
        return "it changed after its test cases last passed"
    return None


def _runs(case: dict[str, Any]) -> str:
    """An agent skill's case, run as its eval: how many of its runs passed."""
    return f" ({case['runs_passed']} of {case['runs']} runs passed)" if case.get("runs") \
        else ""


def settle(session: Session, build: Build, name: str, run: PipelineRun) -> None:
    """The builder of ``name`` ended: built or failed, as its verdict finds it."""
    entry = build.skills.get(name) or {}
    outputs = unpack(session, run.outputs) or {}
    why = _verdict(entry, run)
    builds.record_skill(build, name, {
        "state": FAILED if why else BUILT, "run_id": run.id, "why": why,
        "diagnosis": str(outputs.get("diagnosis") or run.error or ""),
        **({"draft": None} if why else {})})  # a failed builder's draft never leaves
    if why is None:
        builds.add_deviations(build, [f"{name}: {d}" for d in outputs.get("deviations") or []])


def result(build: Build) -> Result:
    """The build's step as it ended: what was drafted, and what was not and why."""
    made = {n: e["draft"] for n, e in sorted(build.skills.items())
            if e.get("state") == BUILT and e.get("draft")}
    missed = {n: e for n, e in sorted(build.skills.items()) if e.get("state") != BUILT}
    lines = [f"built {n}" for n in made] + \
        [f"{e.get('state')} {n}: {e.get('why')}" for n, e in missed.items()]
    summary = "\n".join(lines)
    if missed:
        return Result(StepState.FAILED, error=f"{len(missed)} of {len(build.skills)} not "
                      f"built:\n{summary}", error_kind="build_incomplete")
    return Result(StepState.SUCCEEDED, outputs={"summary": summary,
                                                "drafts": {n: d["hash"] for n, d in
                                                           made.items()}})
