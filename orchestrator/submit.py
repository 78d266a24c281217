"""Creating pipeline runs: checked inputs, a frozen plan, a row, then the first nudge."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session

from orchestrator.drawing import edges
from shared.cache import input_hash
from shared.db.models import PipelineRun
from shared.errors import ValidationFailed
from shared.inputs import resolve_inputs
from shared.plan import Plan, build_plan
from shared.skill import Skill
from shared.states import RunState
from shared.vault import Vault


def new_run_id() -> str:
    return "run-" + uuid.uuid4().hex[:16]


def checked(vault: Vault, skill: Skill) -> None:
    """A skill runs only when it and everything it calls validate."""
    names = {skill.name} | {callee for _, _, callee in edges(vault, skill.name)}
    problems = [p for name in sorted(names) if name in vault.skills
                for p in vault.problems_in(vault.skills[name].folder)]
    if problems:
        raise ValidationFailed(problems)


def create_run(session: Session, vault: Vault, skill: Skill, given: Mapping[str, Any], *,
               source: str, triggered_by: str | None = None,
               parent_step_run_id: str | None = None, workdir: str | None = None,
               plan: Plan | None = None) -> str:
    """Insert a pending run of ``skill`` (the caller commits, then requests an advance)."""
    inputs = resolve_inputs(skill.manifest, given)
    plan = plan or build_plan(skill, vault.skills, inputs, workdir=workdir)
    run = PipelineRun(id=new_run_id(), skill=skill.name, version=skill.manifest.version,
                      state=RunState.PENDING, source=source, vault=str(vault.root.resolve()),
                      plan=plan.model_dump(mode="json", by_alias=True), inputs=inputs,
                      input_hash=input_hash(inputs), progress={}, triggered_by=triggered_by,
                      parent_step_run_id=parent_step_run_id)
    session.add(run)
    return run.id
