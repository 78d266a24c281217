"""Creating pipeline runs: checked inputs, a frozen plan, a pending row.

Both planes create runs: the client for a top-level run, a worker for the nested run of
an orchestrator used as a step.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session

from lifecycle import transitions
from shared.inputs import resolve_inputs
from shared.model_spec import resolve as resolve_model
from shared.plan import Plan, build_plan
from shared.skill import Skill
from shared.vault import Vault, resolved_root


def new_run_id() -> str:
    return "run-" + uuid.uuid4().hex[:16]


def create_run(session: Session, vault: Vault, skill: Skill, given: Mapping[str, Any], *,
               source: str, triggered_by: str | None = None,
               parent_step_run_id: str | None = None, workdir: str | None = None,
               plan: Plan | None = None, agent_call: str | None = None,
               model: str | None = None, daemon: str | None = None,
               budget_usd: float | None = None) -> str:
    """Insert a pending run of ``skill`` (the caller commits, then requests an advance).
    ``model``: the model its agent steps are asked to run on (execute_skill's);
    ``daemon``: the one daemon its steps run on (a build's `--daemon`); ``budget_usd``:
    what each of its agent steps may spend at most (a build's share of its budget)."""
    inputs = resolve_inputs(skill.manifest, given, session=session)  # stores file inputs
    plan = (plan or build_plan(skill, vault.skills, inputs, workdir=workdir)
            ).pinned_to(daemon).with_budget(budget_usd)
    if model:
        resolve_model(model, where="execute_skill's model")  # AgentError when unknown
        plan = plan.with_requested_model(model)
    run_id = new_run_id()
    transitions.new_run(session, run_id=run_id, skill=skill.name,
                        version=skill.manifest.version, source=source,
                        vault=str(resolved_root(vault.root)),
                        plan=plan.model_dump(mode="json", by_alias=True), inputs=inputs,
                        triggered_by=triggered_by, parent_step_run_id=parent_step_run_id,
                        agent_call=agent_call)
    return run_id
