"""What a build's agents read first: the planner its task (and on a revision, the plan
so far and the person's words), a builder its part of the plan and the manifests of the
sub-skills it depends on, as built."""

from __future__ import annotations

from sqlalchemy.orm import Session

from lifecycle import builds
from shared.build_compile import plan_md, skill_plan_md
from shared.build_plan import BuildPlan, PlannedSkill
from shared.db.build_models import Build
from shared.folder_store import file_text


def planner_brief(build: Build, note: str) -> str:
    parts = [f"Task: {build.task}"]
    if note:
        parts.append(f"Start from this improvement note:\n{note}")
    if build.improves:
        parts.append(f"Plan a new version of the skill '{build.improves}': keep its name and "
                     "its interface, list it in `skills` (not as a reuse), and give it a "
                     "test case that reproduces the note's failure. Its builder starts from "
                     "its current files. Plan no `steps` unless the task asks for a new "
                     "pipeline.")
    plan = builds.plan_of(build)
    if build.revisions and plan is not None:
        parts.append(f"Your plan so far:\n\n{plan_md(plan)}")
        parts.append("The person sent it back. Their feedback, oldest first:\n" +
                     "\n".join(f"- {r}" for r in build.revisions))
        parts.append("Revise the plan with update_plan (the whole plan, changed as they "
                     "ask).")
    return "\n\n".join(parts)


def builder_brief(session: Session, build: Build, plan: BuildPlan,
                  planned: PlannedSkill) -> str:
    parts = [f"Build the sub-skill '{planned.name}' of the pipeline '{plan.name}' "
             f"({plan.description}).", skill_plan_md(planned)]
    if plan.notes:
        parts.append("What planning found:\n" + "\n".join(f"- {n}" for n in plan.notes))
    for dep in planned.depends_on:
        draft = (build.skills.get(dep) or {}).get("draft")
        text = file_text(session, draft, "SKILL.md") if draft else None
        if text:
            parts.append(f"'{dep}', which it depends on, as built:\n\n{text}")
    return "\n\n".join(parts)
