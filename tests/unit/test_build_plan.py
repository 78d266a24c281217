"""The skill builder's plan (issue 44): typed, checked mechanically before anyone sees it,
compiled to draft folders and plan.md with no model (shared/build_plan.py,
shared/build_plan_checks.py, shared/build_compile.py).

The plan is the issue's three-skill pipeline: two code skills independent of each other,
and an agent skill that depends on them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from shared.build_compile import orchestrator_files, plan_md, skill_files, write_folder
from shared.build_plan import BuildPlan
from shared.build_plan_checks import check_plan
from shared.vault import load_vault

PLAN: dict[str, Any] = {
    "task": "Each Monday, a short post on last week's commits and open issues of a repo",
    "name": "weekly-repo-post",
    "description": "Write a short post on a repo's week: its commits and open issues.",
    "inputs": [{"name": "repo", "type": "string", "required": True,
                "description": "owner/name"}],
    "outputs": [{"name": "post", "type": "string", "description": "The post.",
                 "from": "${steps.post.outputs.post}"}],
    "skills": [
        {"name": "repo-commits", "responsibility": "List a repo's commits of the last week.",
         "approach": "code", "why": "git log answers it; no API needed",
         "work": ["deterministic"],
         "inputs": [{"name": "repo", "type": "string", "required": True}],
         "outputs": [{"name": "commits", "type": "string[]"}],
         "tests": [{"id": "lists-commits", "name": "Lists commits",
                    "inputs": {"repo": "a/b"}}]},
        {"name": "repo-issues", "responsibility": "List a repo's open issues.",
         "approach": "api", "work": ["deterministic"], "auth": ["github_token"],
         "inputs": [{"name": "repo", "type": "string", "required": True}],
         "outputs": [{"name": "issues", "type": "string[]"}]},
        {"name": "weekly-post", "responsibility": "Write the week's post from its facts.",
         "approach": "agent", "why": "writing needs a model", "work": ["agentic"],
         "inputs": [{"name": "commits", "type": "string[]", "required": True},
                    {"name": "issues", "type": "string[]", "required": True},
                    {"name": "tone", "type": "string", "default": "plain"}],
         "outputs": [{"name": "post", "type": "string"}],
         "depends_on": ["repo-commits", "repo-issues"]},
    ],
    "steps": [
        {"id": "commits", "skill": "repo-commits", "with": {"repo": "${inputs.repo}"}},
        {"id": "issues", "skill": "repo-issues", "with": {"repo": "${inputs.repo}"},
         "on_failure": "continue"},
        {"id": "post", "skill": "weekly-post",
         "with": {"commits": "${steps.commits.outputs.commits}",
                  "issues": "${steps.issues.outputs.issues}"}},
    ],
}


def plan(**changes: Any) -> BuildPlan:
    data = copy.deepcopy(PLAN)
    data.update(changes)
    return BuildPlan.model_validate(data)


def with_skill(index: int, **changes: Any) -> BuildPlan:
    data = copy.deepcopy(PLAN)
    data["skills"][index].update(changes)
    return BuildPlan.model_validate(data)


def messages(found: list[Any]) -> str:
    return "\n".join(map(str, found))


def test_a_sound_plan_passes_and_builds_the_independent_skills_first() -> None:
    sound = plan()
    assert check_plan(sound, {}) == []
    assert sound.build_order() == [["repo-commits", "repo-issues"], ["weekly-post"]]


def test_its_compiled_orchestrator_and_drafts_are_a_valid_vault(tmp_path: Path) -> None:
    sound = plan()
    for skill in sound.to_build:
        write_folder(tmp_path / skill.name, skill_files(skill))
    write_folder(tmp_path / sound.name, orchestrator_files(sound))
    vault = load_vault(tmp_path)
    assert vault.valid, vault.problems
    compiled = vault.get("weekly-repo-post").manifest
    assert [s.id for s in compiled.steps or ()] == ["commits", "issues", "post"]
    assert compiled.steps is not None and compiled.steps[1].on_failure.value == "continue"
    assert vault.get("repo-issues").manifest.auth == ("github_token",)
    assert vault.get("weekly-post").manifest.effective_approach.value == "agent"
    # a draft script fails until its builder writes it: no test passes by accident
    assert "not a script yet" in (tmp_path / "repo-commits" / "main.py").read_text()


def test_an_edge_whose_type_does_not_fit_is_named() -> None:
    bad = with_skill(2, inputs=[{"name": "commits", "type": "integer", "required": True},
                                {"name": "issues", "type": "string[]", "required": True}])
    found = messages(check_plan(bad, {}))
    assert "steps: " in found and "'weekly-post' declares input 'commits' as integer" in found


def test_a_dependency_cycle_and_an_unknown_dependency_are_named() -> None:
    cyclic = with_skill(0, depends_on=["weekly-post"])
    assert "cycle: " in messages(check_plan(cyclic, {}))
    assert cyclic.build_order() == [["repo-issues"]]  # the cycle's skills never come
    unknown = with_skill(0, depends_on=["repo-stars"])
    assert "skills[0].depends_on[0]: no sub-skill 'repo-stars'" in \
        messages(check_plan(unknown, {}))


def test_the_determinism_and_auth_boundaries() -> None:
    mixed = with_skill(2, work=["agentic", "deterministic"])
    assert "skills[2].work: 'weekly-post' mixes deterministic and agentic" in \
        messages(check_plan(mixed, {}))
    two_keys = with_skill(1, auth=["github_token", "slack_token"])
    assert "skills[1].auth: 'repo-issues' needs 2 credentials" in \
        messages(check_plan(two_keys, {}))


def test_names_and_types() -> None:
    assert "skills[0].name: name 'Repo_Commits'" in messages(
        check_plan(with_skill(0, name="Repo_Commits"), {}))
    assert "skills[0].outputs[0].type" in messages(
        check_plan(with_skill(0, outputs=[{"name": "commits", "type": "strnig[]"}]), {}))
    assert "is planned twice" in messages(check_plan(with_skill(1, name="repo-commits"), {}))
    with pytest.raises(ValidationError):
        with_skill(0, inputs=[{"name": "repo", "type": "nope"}])  # a manifest's own rule


def test_reuse_an_existing_skill_or_be_told_to(tmp_path: Path) -> None:
    existing = plan()
    write_folder(tmp_path / "repo-commits", skill_files(existing.skills[0]))
    vault = load_vault(tmp_path).skills
    assert "the vault has a skill 'repo-commits' already: reuse it" in \
        messages(check_plan(existing, vault))
    reused = with_skill(0, reuse="repo-commits")
    assert check_plan(reused, vault) == []
    assert reused.build_order() == [["repo-issues"], ["weekly-post"]]
    assert "no skill 'repo-stars' to reuse" in \
        messages(check_plan(with_skill(0, reuse="repo-stars"), vault))


def test_plan_md_reads_as_the_contract() -> None:
    text = plan_md(plan(notes=["GitHub's API allows 5,000 requests an hour with a token"]))
    assert text.startswith("# weekly-repo-post: build plan\n\n> Each Monday")
    assert "- `issues`: `repo-issues`; on failure: continue" in text
    assert "1. repo-commits, repo-issues\n2. weekly-post" in text
    assert "**Approach:** code: git log answers it; no API needed" in text
    assert "- `tone` (string) (default \"plain\")" in text
    assert "5,000 requests an hour" in text
