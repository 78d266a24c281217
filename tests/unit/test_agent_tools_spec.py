"""The tools an agent step offers (shared/agent_prompt/tools_spec.py), with the seed's names and
parameters, which skills it may name, and the manifest fields that decide it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shared.agent_prompt.tools_spec import (
    BASH_TOOL,
    EXECUTE_SKILL_TOOL,
    IMPROVEMENT_NOTE_TOOL,
    SKILL_TOOL,
    ToolSpec,
    allowed_skills,
    tools_for,
)
from shared.checks import check_skill
from shared.manifest import Manifest
from shared.skill import Skill, load_skill
from shared.vault import load_vault

EXAMPLES = Path(__file__).parents[2] / "examples"
ALL_TOOLS = (SKILL_TOOL, EXECUTE_SKILL_TOOL, IMPROVEMENT_NOTE_TOOL, BASH_TOOL)


def write_skill(root: Path, name: str, extra: str = "", sub_skills: list[str] | None = None
                ) -> tuple[Skill | None, list[str]]:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: Does {name}. Use it in tests.\n{extra}---\nWork.\n",
        encoding="utf-8")
    if sub_skills is not None:
        (folder / "sub-skills.json").write_text(json.dumps(
            {"sub_skills": [{"skill_id": s} for s in sub_skills]}), encoding="utf-8")
    skill, problems = load_skill(folder)
    found = [str(p) for p in problems]
    if skill is not None:
        found += [str(p) for p in check_skill(skill)]
    return skill, found


def test_names_are_the_seeds() -> None:
    assert [t.name for t in ALL_TOOLS] == ["skill", "execute_skill", "skill_improvement_note",
                                           "bash"]


def test_execute_skill_is_the_seeds_schema() -> None:
    params = EXECUTE_SKILL_TOOL.parameters
    assert params["properties"] == {
        "name": {"type": "string", "description": "Skill name"},
        "inputs": {"type": "object", "description": "Typed input parameters"},
        "model": {"type": "string", "description": "Optional model override"}}
    assert params["required"] == ["name"]


def test_skill_improvement_note_is_the_seeds_schema() -> None:
    params = IMPROVEMENT_NOTE_TOOL.parameters
    assert set(params["properties"]) == {"skill_name", "step", "error", "diagnosis",
                                         "suggested_fix", "inputs"}
    assert params["required"] == ["skill_name", "error", "diagnosis", "suggested_fix"]
    assert params["properties"]["inputs"]["type"] == "object"
    assert params["properties"]["step"]["description"] == "Which SKILL.md step failed"


def test_skill_and_bash_take_one_string() -> None:
    assert SKILL_TOOL.parameters["required"] == ["name"]
    assert "/slug" in SKILL_TOOL.parameters["properties"]["name"]["description"]
    assert BASH_TOOL.parameters["required"] == ["command"]


@pytest.mark.parametrize("tool", ALL_TOOLS, ids=lambda t: t.name)
def test_every_schema_is_a_closed_json_object(tool: ToolSpec) -> None:
    params: dict[str, Any] = json.loads(json.dumps(dict(tool.parameters)))  # plain JSON
    assert params["type"] == "object" and params["additionalProperties"] is False
    assert set(params["required"]) <= set(params["properties"])
    assert all(p["type"] in {"string", "object"} for p in params["properties"].values())
    assert tool.description
    with pytest.raises(TypeError):
        tool.parameters["type"] = "array"  # type: ignore[index]  # shared data stays put


def test_the_tools_a_step_is_offered() -> None:
    plain = Manifest.model_validate({"name": "a", "description": "d"})
    shell = Manifest.model_validate({"name": "a", "description": "d", "tools_used": ["bash"]})
    assert tools_for(plain, []) == (IMPROVEMENT_NOTE_TOOL,)
    assert tools_for(plain, ["b"]) == (SKILL_TOOL, EXECUTE_SKILL_TOOL, IMPROVEMENT_NOTE_TOOL)
    assert tools_for(shell, []) == (IMPROVEMENT_NOTE_TOOL, BASH_TOOL)
    assert tools_for(shell, ["b"], tool_calls=False) == ()


def test_allowed_skills_default_to_sub_skills_json(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    for name in ("b", "c", "d", "e"):
        write_skill(vault, name)
    main, _ = write_skill(vault, "main", sub_skills=["c", "b", "c", "gone", "d", "main"])
    assert main is not None
    skills = dict(load_vault(vault).skills)
    # Listed order, once each; a skill the vault lacks, a disabled one and itself left out.
    assert allowed_skills(main, skills) == ["c", "b", "d"]
    assert allowed_skills(main, skills, disabled={"b"}) == ["c", "d"]
    lonely, _ = write_skill(tmp_path / "other", "lonely")
    assert lonely is not None and allowed_skills(lonely, skills) == []


def test_catalog_all_opens_every_enabled_skill(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    for name in ("b", "c"):
        write_skill(vault, name)
    main, problems = write_skill(vault, "main", "catalog: all\n", sub_skills=["b"])
    assert main is not None and not problems, problems
    skills = dict(load_vault(vault).skills)
    assert allowed_skills(main, skills) == ["b", "c"]
    assert allowed_skills(main, skills, disabled=["c"]) == ["b"]


def test_the_youtube_agents_may_use_text_summarizer_only() -> None:
    vault = load_vault(EXAMPLES / "youtube")
    skills = dict(vault.skills)
    for name in ("content-analyzer", "blog-post-writer"):
        assert allowed_skills(skills[name], skills) == ["text-summarizer"]
    assert allowed_skills(skills["text-summarizer"], skills) == []
    writer = skills["blog-post-writer"].manifest
    assert BASH_TOOL in tools_for(writer, ["text-summarizer"])
    assert BASH_TOOL not in tools_for(skills["content-analyzer"].manifest, ["text-summarizer"])


# ------------------------------------------------------------ the manifest fields


def test_agent_fields_default_and_load(tmp_path: Path) -> None:
    plain = Manifest.model_validate({"name": "a", "description": "d"})
    assert (plain.catalog, plain.max_turns, plain.budget_usd) == ("sub-skills", None, None)
    skill, problems = write_skill(tmp_path, "tuned", "approach: agent\ncatalog: sub-skills\n"
                                  "max_turns: 12\nbudget_usd: 0.5\n")
    assert skill is not None and not problems, problems
    assert (skill.manifest.max_turns, skill.manifest.budget_usd) == (12, 0.5)
    whole, problems = write_skill(tmp_path, "whole", "budget_usd: 2\n")
    assert whole is not None and whole.manifest.budget_usd == 2 and not problems


@pytest.mark.parametrize(("line", "field"), [
    ("catalog: everything\n", "catalog"),
    ("max_turns: 0\n", "max_turns"),
    ("max_turns: 2.5\n", "max_turns"),
    ("max_turns: true\n", "max_turns"),
    ('max_turns: "3"\n', "max_turns"),
    ("budget_usd: 0\n", "budget_usd"),
    ("budget_usd: -1\n", "budget_usd"),
    ("budget_usd: true\n", "budget_usd"),
])
def test_bad_agent_fields_are_reported(tmp_path: Path, line: str, field: str) -> None:
    _, problems = write_skill(tmp_path, "bad", line)
    assert any(f": {field}: " in p or f": {field}:" in p for p in problems), problems


def test_agent_fields_on_a_script_skill_are_a_mistake(tmp_path: Path) -> None:
    folder = tmp_path / "script"
    folder.mkdir()
    (folder / "main.py").write_text("print('{}')\n", encoding="utf-8")
    (folder / "SKILL.md").write_text(
        "---\nname: script\ndescription: A script. Use it in tests.\nrun:\n"
        "  command: python3 main.py\nmax_turns: 3\ncatalog: all\n---\nRun.\n",
        encoding="utf-8")
    skill, _ = load_skill(folder)
    assert skill is not None
    found = [str(p) for p in check_skill(skill)]
    assert any("max_turns" in p and "only an agent step" in p for p in found), found
    assert any("catalog" in p and "only an agent step" in p for p in found), found
