"""examples/skill-builder stays true: one recorded `skillq build` (record.py), its plan,
the scripted model turns it ran on, and the skills it wrote into its vault.

The example folder is that vault (as every example folder is one): the build's skill
folders sit beside README.md, plan.json, plan.md, script.json, record.py and record.json.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.fake_llm import Script

from shared.build_compile import plan_md
from shared.build_plan import BuildPlan
from shared.build_plan_checks import check_plan
from shared.vault import load_vault

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "skill-builder"
RECORD_FIELDS = {"model", "started_at", "duration_s", "cost_usd", "tokens_in", "tokens_out",
                 "build_id", "skills"}


def read_json(name: str) -> Any:
    return json.loads((EXAMPLE / name).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def plan() -> BuildPlan:
    return BuildPlan.model_validate(read_json("plan.json"))


@pytest.fixture(scope="module")
def record() -> dict[str, Any]:
    return dict(read_json("record.json"))


def test_the_plan_is_an_approved_build_plan_that_passes_its_checks(plan: BuildPlan) -> None:
    assert plan.approved
    assert [str(p) for p in check_plan(plan, {})] == []
    assert plan.build_order() == [["repo-commits", "repo-issues"], ["weekly-post"]]


def test_plan_md_is_the_plan_as_built(plan: BuildPlan) -> None:
    text = (EXAMPLE / "plan.md").read_text(encoding="utf-8")
    assert text == plan_md(plan)
    assert text == (EXAMPLE / plan.name / "plan.md").read_text(encoding="utf-8")


def test_the_vault_holds_the_plans_skills_and_its_orchestrator(plan: BuildPlan) -> None:
    vault = load_vault(EXAMPLE)
    assert vault.problems == ()
    assert set(vault.skills) == {s.name for s in plan.skills} | {plan.name}
    orchestrator = vault.skills[plan.name].manifest
    assert orchestrator.is_orchestrator
    assert [s.skill for s in orchestrator.calling_steps] == [s.skill for s in plan.steps]
    for planned in plan.skills:
        manifest = vault.skills[planned.name].manifest
        assert not manifest.is_orchestrator
        assert [i.name for i in manifest.inputs] == [i.name for i in planned.inputs]
        assert [o.name for o in manifest.outputs] == [o.name for o in planned.outputs]


def test_the_script_is_well_formed_and_its_last_plan_is_the_one_built(plan: BuildPlan) -> None:
    turns = read_json("script.json")
    Script(turns)  # ValueError on a malformed turn
    planned = [c["arguments"] for t in turns["planner"] for c in t.get("tool_calls", [])
               if c["name"] == "update_plan"]
    assert planned, "the planner's turns write no plan"
    last = BuildPlan.model_validate(planned[-1])
    assert last.model_copy(update={"deviations": plan.deviations, "approved": True}) == plan


def test_the_record_says_what_the_build_cost_and_took(plan: BuildPlan,
                                                      record: dict[str, Any]) -> None:
    assert set(record) == RECORD_FIELDS
    assert record["model"].startswith("scripted (tests/support/fake_llm)")
    assert "anthropic:claude-haiku-4-5" in record["model"]
    assert record["duration_s"] > 0 and record["cost_usd"] > 0
    assert record["tokens_in"] > 0 and record["tokens_out"] > 0
    assert record["build_id"].startswith("run-")
    assert record["skills"] == dict.fromkeys(
        sorted([*(s.name for s in plan.skills), plan.name]), "built")


def test_the_readme_gives_the_recorded_figures(record: dict[str, Any]) -> None:
    readme = (EXAMPLE / "README.md").read_text(encoding="utf-8")
    assert f"${record['cost_usd']:.4f}" in readme
    assert f"{record['duration_s']:g} s" in readme
    assert record["build_id"] in readme
