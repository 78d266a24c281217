"""A build plan compiled, with no model in the loop (the seed's compileSkill): the
orchestrator's SKILL.md and sub-skills.json from its steps, each new sub-skill's
starting folder (its manifest from the plan, its test cases, a script or instructions
for its builder to replace), and plan.md, the plan as people read it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from shared.build_plan import BuildPlan, PlannedSkill
from shared.manifest import Approach, InputSpec, Step

SCRIPT = "main.py"
# A script the builder replaces: it fails, saying so, until then (a draft that passes its
# tests by accident is worse than one that fails them).
PLACEHOLDER = '''"""{name}: not built yet (the skill builder writes this script)."""

import sys

print("{name} is a plan, not a script yet: build it", file=sys.stderr)
sys.exit(1)
'''


def _inputs(specs: tuple[InputSpec, ...]) -> list[dict[str, Any]]:
    return [s.written() for s in specs]


def _frontmatter(fields: Mapping[str, Any], body: str) -> str:
    head = yaml.safe_dump(dict(fields), sort_keys=False, allow_unicode=True, width=88)
    return f"---\n{head}---\n\n{body.strip()}\n"


def skill_md(skill: PlannedSkill) -> str:
    """A new sub-skill's SKILL.md as the plan gives it: its builder fills in the rest."""
    fields: dict[str, Any] = {
        "name": skill.name, "description": skill.responsibility, "version": 1,
        "approach": skill.approach.value, "inputs": _inputs(skill.inputs),
        "outputs": [o.model_dump(mode="json", exclude_defaults=True) for o in skill.outputs]}
    if skill.auth:
        fields["auth"] = list(skill.auth)
    if skill.approach is not Approach.AGENT:
        fields["run"] = {"command": f"python3 {SCRIPT}", "timeout": 300, "retries": 0}
    body = f"# {skill.name}\n\n{skill.responsibility}\n"
    if skill.notes:
        body += f"\n## Notes from the plan\n\n{skill.notes}\n"
    return _frontmatter(fields, body)


def benchmarks(skill: PlannedSkill) -> dict[str, Any]:
    return {"skill": skill.name, "version": 1,
            "tests": [t.model_dump(mode="json") for t in skill.tests], "runs": []}


def skill_files(skill: PlannedSkill) -> dict[str, str]:
    """A new sub-skill's starting folder: relative path -> text."""
    files = {"SKILL.md": skill_md(skill),
             "benchmarks.json": json.dumps(benchmarks(skill), indent=2) + "\n",
             "sub-skills.json": json.dumps({"sub_skills": [
                 {"skill_id": d, "role": "input"} for d in skill.depends_on]}, indent=2)
             + "\n",
             "plan.md": skill_plan_md(skill)}
    if skill.approach is not Approach.AGENT:
        files[SCRIPT] = PLACEHOLDER.format(name=skill.name)
    return files


def orchestrator_files(plan: BuildPlan, roles: Mapping[str, str] | None = None
                       ) -> dict[str, str]:
    """The orchestrator: its steps as the plan has them, each callee a sub-skill."""
    steps = [s.model_dump(mode="json", by_alias=True, exclude_defaults=True)
             for s in plan.steps]
    fields = {"name": plan.name, "description": plan.description, "version": 1,
              "inputs": _inputs(plan.inputs), "outputs": [dict(o) for o in plan.outputs],
              "steps": steps}
    body = f"# {plan.name}\n\n{plan.description}\n\nCompiled from its build plan " \
        "(plan.md); change the plan, not this file.\n"
    called = list(dict.fromkeys(s.skill_name for s in plan.steps if s.approval is None))
    roles = roles or {s.name: s.responsibility for s in plan.skills}
    return {"SKILL.md": _frontmatter(fields, body),
            "sub-skills.json": json.dumps({"sub_skills": [
                {"skill_id": n, "role": roles.get(n, "step")} for n in called]}, indent=2)
            + "\n",
            "benchmarks.json": json.dumps({"skill": plan.name, "version": 1, "tests": [],
                                           "runs": []}, indent=2) + "\n",
            "plan.md": plan_md(plan)}


def write_folder(root: Path, files: Mapping[str, str]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        (root / rel).write_text(text, encoding="utf-8")


def _io_lines(specs: tuple[Any, ...]) -> list[str]:
    lines = []
    for s in specs:
        default = f" (default {json.dumps(s.default)})" if getattr(s, "has_default", False) \
            else ""
        lines.append(f"- `{s.name}` ({s.type}){default}: {s.description}".rstrip(": "))
    return lines or ["- none"]


def skill_plan_md(skill: PlannedSkill) -> str:
    lines = [f"# {skill.name}", "", skill.responsibility, "",
             f"**Approach:** {skill.approach.value}" + (f": {skill.why}" if skill.why else ""),
             ""]
    if skill.reuse:
        lines += [f"**Reuses** the vault's `{skill.reuse}` as it is.", ""]
    lines += ["## Inputs", *_io_lines(skill.inputs), "", "## Outputs",
              *_io_lines(skill.outputs), ""]
    if skill.auth:
        lines += ["## Credentials", *[f"- `{a}`" for a in skill.auth], ""]
    if skill.depends_on:
        lines += ["## Depends on", *[f"- `{d}`" for d in skill.depends_on], ""]
    if skill.tests:
        lines += ["## Test cases", *[f"- `{t.id}`: {t.name}" for t in skill.tests], ""]
    if skill.notes:
        lines += ["## Notes", skill.notes, ""]
    return "\n".join(lines)


def _step_line(step: Step) -> str:
    what = "a person approves" if step.approval is not None else f"`{step.skill}`"
    fan = " for each of " + str(step.for_each) if step.for_each is not None else ""
    return f"- `{step.id}`: {what}{fan}; on failure: {step.on_failure.value}"


def plan_md(plan: BuildPlan) -> str:
    """The whole plan for people: the request, the orchestrator, then each sub-skill."""
    lines = [f"# {plan.name}: build plan", "", f"> {plan.task}", "", plan.description, "",
             "## Pipeline inputs", *_io_lines(plan.inputs), "", "## Steps",
             *([_step_line(s) for s in plan.steps] or ["- none"]), ""]
    waves = plan.build_order()
    if waves:
        lines += ["## Build order", *[f"{i}. {', '.join(w)}" for i, w in
                                      enumerate(waves, 1)], ""]
    if plan.notes:
        lines += ["## Notes", *[f"- {n}" for n in plan.notes], ""]
    if plan.deviations:
        lines += ["## Deviations from the plan", *[f"- {d}" for d in plan.deviations], ""]
    lines += ["## Sub-skills", ""]
    for skill in plan.skills:
        lines += [skill_plan_md(skill).replace("# ", "### ", 1).replace("\n## ", "\n#### ")]
    return "\n".join(lines).rstrip() + "\n"
