"""``update_plan``: a build's planner writes its plan (the seed's
skill_builder_update_plan), typed as shared/build_plan.py's BuildPlan.

Each call is the whole plan. It is checked mechanically (shared/build_plan_checks.py)
and stored with what the checks found; the answer is those problems, each naming its
field, for the model to fix and call again, or that the plan passed. A plan that does
not fit the type at all is a tool error the model reads, never a failed step. Only a
plan that passed is shown to a person (workers/build/controller.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic_ai import Tool

from lifecycle import builds
from shared.build_plan import BuildPlan
from shared.build_plan_checks import check_plan
from shared.db.session import transaction
from shared.pydantic_problems import problems_from
from shared.skill import Skill
from workers.agent.tool_args import OWN_CHECK

DESCRIPTION = ("Write the build's whole plan: the task, the orchestrator's name, "
               "description, inputs, outputs and steps, and each sub-skill (new, or an "
               "existing one reused). It is checked at once: the answer lists the problems "
               "to fix (call again with the whole plan), or says it is stored.")


@dataclass
class PlanTool:
    database_url: str
    build_id: str
    vault_skills: dict[str, Skill]
    improving: frozenset[str] = frozenset()  # vault skills it plans a new version of

    def update_plan(self, **given: Any) -> str:
        try:
            plan = BuildPlan.model_validate(given)
        except ValidationError as exc:
            found = list(problems_from(exc, BuildPlan, lambda loc, msg: f"{_field(loc)}: {msg}"))
            return "error: the plan does not fit its type; fix these and call again:\n- " + \
                "\n- ".join(found)
        problems = [str(p) for p in check_plan(plan, self.vault_skills,
                                                    improving=self.improving)]
        with transaction(self.database_url) as session:
            builds.store_plan(session, self.build_id, plan, problems)
        if problems:
            return "error: the plan's checks found problems; fix them and call update_plan " \
                "again with the whole plan:\n- " + "\n- ".join(problems)
        return "stored: the plan passed its checks. Answer with a short summary; a person " \
            "reviews it next."

    def tool(self) -> Tool[None]:
        schema = BuildPlan.model_json_schema(by_alias=True)
        schema.get("properties", {}).pop("approved", None)
        schema.get("properties", {}).pop("deviations", None)
        tool = Tool.from_schema(self.update_plan, name="update_plan", description=DESCRIPTION,
                                json_schema=schema)
        tool.metadata = {OWN_CHECK: True}  # BuildPlan checks them, answering any misfit
        return tool


def _field(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "plan"
