"""A build plan checked before anyone sees it, mechanically:

- names and types valid (the Agent Skills name rules, skillq's value types);
- the sub-skills' dependencies acyclic, and naming sub-skills of the plan;
- every edge's output type fitting the input it feeds, every reference resolving: the
  plan is compiled to draft folders beside the skills it reuses, and skillq's own
  validation reads them (shared/checks.py, shared/pipeline_checks.py), so a plan passes
  exactly what a built pipeline must;
- no skill mixing agentic and deterministic work (the seed's determinism boundary);
- credentials split: a sub-skill declares at most one (the seed's auth boundary).

Each problem names the plan's field and says what to change.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from shared import agentskills
from shared.build_compile import orchestrator_files, skill_files, write_folder
from shared.build_plan import BuildPlan, Work
from shared.graph import cycle_text, find_cycle
from shared.skill import Skill
from shared.valuetypes import parse_type
from shared.vault import load_vault


@dataclass(frozen=True, slots=True)
class PlanProblem:
    field: str  # where in the plan: skills[2].inputs[0].type, steps[1].with.text
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def check_plan(plan: BuildPlan, vault: Mapping[str, Skill],
               improving: frozenset[str] = frozenset()) -> list[PlanProblem]:
    """Every problem of ``plan``, against the vault's skills (``vault``) it may reuse;
    ``improving``: those of them it plans a new version of (`skillq build --from-note`)."""
    found = list(_shape(plan, vault, improving))
    if not found:  # compiled only when its parts are sound: one cause, one message
        found += _compiled(plan, vault)
    return found


def _shape(plan: BuildPlan, vault: Mapping[str, Skill], improving: frozenset[str]
           ) -> Iterator[PlanProblem]:
    for problem in agentskills.name_problems(plan.name, None):
        yield PlanProblem("name", problem)
    names = [s.name for s in plan.skills]
    for i, skill in enumerate(plan.skills):
        at = f"skills[{i}]"
        for problem in agentskills.name_problems(skill.name, None):
            yield PlanProblem(f"{at}.name", problem)
        if names.count(skill.name) > 1 or skill.name == plan.name:
            yield PlanProblem(f"{at}.name", f"'{skill.name}' is planned twice; name each "
                              "skill once")
        if skill.built and skill.name in vault and skill.name not in improving:
            yield PlanProblem(f"{at}.name", f"the vault has a skill '{skill.name}' already: "
                              f"reuse it (reuse: {skill.name}) or name the new one otherwise")
        if skill.reuse is not None and skill.reuse not in vault:
            yield PlanProblem(f"{at}.reuse", f"the vault has no skill '{skill.reuse}' to reuse")
        typed = [(f"inputs[{j}]", spec.type) for j, spec in enumerate(skill.inputs)] + \
            [(f"outputs[{j}]", out.type) for j, out in enumerate(skill.outputs)]
        for loc, type_ in typed:
            try:
                parse_type(type_)
            except ValueError as exc:
                yield PlanProblem(f"{at}.{loc}.type", str(exc))
        if set(skill.work) == {Work.DETERMINISTIC, Work.AGENTIC}:
            yield PlanProblem(f"{at}.work", f"'{skill.name}' mixes deterministic and agentic "
                              "work; split it in two skills (an agent step never runs a "
                              "script's part, nor a script a model's)")
        if len(skill.auth) > 1:
            yield PlanProblem(f"{at}.auth", f"'{skill.name}' needs {len(skill.auth)} "
                              f"credentials ({', '.join(skill.auth)}); give each its own "
                              "skill, so each gets only the secret it uses")
        for j, dep in enumerate(skill.depends_on):
            if dep not in names:
                yield PlanProblem(f"{at}.depends_on[{j}]", f"no sub-skill '{dep}' in the plan")
    yield from _cycles(plan)


def _cycles(plan: BuildPlan) -> Iterator[PlanProblem]:
    edges = {s.name: set(s.depends_on) for s in plan.skills}
    cycle = find_cycle(edges)
    if cycle is not None:
        yield PlanProblem("skills", f"sub-skills depend on each other in a cycle: "
                          f"{cycle_text(cycle)}; one of them must not wait for the other")


def _compiled(plan: BuildPlan, vault: Mapping[str, Skill]) -> list[PlanProblem]:
    """The plan compiled to draft folders beside the skills it reuses, read by skillq's
    own validation; a problem in a draft names the plan's skill or its steps."""
    where = {plan.name: "steps", **{s.name: f"skills[{i}]" for i, s in
                                    enumerate(plan.skills)}}
    with tempfile.TemporaryDirectory(prefix="skillq-plan-") as tmp:
        root = Path(tmp)
        for skill in plan.to_build:
            write_folder(root / skill.name, skill_files(skill))
        for skill in plan.skills:
            if skill.reuse is not None:
                shutil.copytree(vault[skill.reuse].folder, root / skill.reuse,
                                ignore=shutil.ignore_patterns(".*", "__pycache__"))
        if plan.steps:
            write_folder(root / plan.name, orchestrator_files(plan))
        loaded = load_vault(root)
        return [PlanProblem(where.get(Path(p.path).parent.name, "plan"),
                            f"{p.field}: {p.message}") for p in loaded.problems]
