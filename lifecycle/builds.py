"""Skill builds as recorded (shared/db/build_models.py): the one writer of a build's
stage, its plan and its sub-skills' outcomes. The caller owns the transaction.

A build is planning while its planner agent writes the plan (``store_plan``, from the
planner's update_plan tool), proposed while it waits at its approval, building once
approved, and built when every draft it could make is in the artifact store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from shared.build_plan import BuildPlan
from shared.db.build_models import Build
from shared.errors import WaitError
from shared.states import BuildStage, check_build


def open_build(session: Session, run_id: str, *, vault: str, task: str,
               note_id: int | None = None, improves: str | None = None,
               daemon: str | None = None) -> Build:
    """The build of run ``run_id``, locked: as recorded, else new and planning. The
    client that starts a build and its step may both open it first."""
    session.execute(insert(Build).values(
        run_id=run_id, vault=vault, task=task, stage=BuildStage.PLANNING.value, round=1,
        problems=[], revisions=[], skills={}, note_id=note_id, improves=improves,
        daemon=daemon).on_conflict_do_nothing())
    found = get(session, run_id, for_update=True)
    assert found is not None
    return found


def get(session: Session, run_id: str, *, for_update: bool = False) -> Build | None:
    return session.get(Build, run_id, with_for_update=for_update)


def listed(session: Session, limit: int = 50) -> Sequence[Build]:
    return session.scalars(select(Build).order_by(Build.created_at.desc()).limit(limit)).all()


def of_notes(session: Session, note_ids: Sequence[int]) -> dict[int, Build]:
    """Each note's latest build (`skillq build --from-note`): the note's link to the new
    version planned from it."""
    found: dict[int, Build] = {}
    for build in session.scalars(select(Build).where(Build.note_id.in_(list(note_ids)))
                                 .order_by(Build.created_at)):
        assert build.note_id is not None
        found[build.note_id] = build
    return found


def plan_of(build: Build) -> BuildPlan | None:
    return BuildPlan.model_validate(build.plan) if build.plan is not None else None


def move(build: Build, new: BuildStage, *, error: str | None = None) -> None:
    check_build(BuildStage(build.stage), new)
    build.stage = new.value
    build.updated_at = datetime.now(UTC)
    if error is not None:
        build.error = error


def store_plan(session: Session, run_id: str, plan: BuildPlan, problems: Sequence[str]
               ) -> None:
    """The planner's latest plan and what its checks found (empty: it passed)."""
    build = get(session, run_id, for_update=True)
    if build is None or BuildStage(build.stage) is not BuildStage.PLANNING:
        raise WaitError(f"build {run_id} is not planning: its plan is not changed now")
    build.plan = _stored(plan)
    build.problems = list(problems)
    build.updated_at = datetime.now(UTC)


def revised(build: Build, feedback: str) -> None:
    """A person sent the plan back: the planner runs again, with their words."""
    move(build, BuildStage.PLANNING)
    build.revisions = [*build.revisions, feedback]
    build.round += 1


def approved(build: Build) -> None:
    plan = plan_of(build)
    assert plan is not None  # proposed only once a plan passed its checks
    build.plan = _stored(plan.model_copy(update={"approved": True}))
    move(build, BuildStage.BUILDING)


def record_skill(build: Build, name: str, outcome: Mapping[str, Any]) -> None:
    """A sub-skill's build ended: built (drafted), failed, or skipped."""
    build.skills = {**build.skills, name: {**build.skills.get(name, {}), **outcome}}
    build.updated_at = datetime.now(UTC)


def record_tests(build: Build, name: str, folder_hash: str,
                 cases: Sequence[Mapping[str, Any]]) -> None:
    """A builder's latest run of its draft's test cases, with the draft's hash as tested:
    what is built is decided on these (workers/build/outcomes.py), not the model's word."""
    entry = {**build.skills.get(name, {}),
             "tested": {"hash": folder_hash, "cases": [dict(c) for c in cases],
                        "passed": bool(cases) and all(c.get("passed") for c in cases)}}
    build.skills = {**build.skills, name: entry}
    build.updated_at = datetime.now(UTC)


def add_deviations(build: Build, deviations: Sequence[str]) -> None:
    """What the builders did otherwise than planned, written back into the plan."""
    plan = plan_of(build)
    if plan is None or not deviations:
        return
    build.plan = _stored(plan.model_copy(
        update={"deviations": (*plan.deviations, *deviations)}))


def _stored(plan: BuildPlan) -> dict[str, Any]:
    """As given: a default nobody wrote stays unwritten (an input's ``default: null``
    would be a default of its own)."""
    return plan.model_dump(mode="json", by_alias=True, exclude_unset=True)
