"""Claude Code's SKILL.md fields (issue 41, item 1): skillq loads what Claude Code loads.

Over tests/integration/vaults/claude-code/ (five trailofbits folders with their frontmatter
byte for byte, and one folder with every field Claude Code documents): every folder loads
and validates, each field skillq keeps without using is one warning line and is written
back unchanged by an export, `skillq validate --strict` refuses them with the messages
skillq always gave, `allowed-tools: Bash` offers the bash tool, and
`disable-model-invocation: true` keeps a skill out of every model's catalog while a
person can still invoke it. An unknown field stays an error where skillq's own fields
are (skill.yaml, a bot0 SKILL.md), and a name the reference refuses stays refused.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_cli import AGENTSKILLS, reference, skillq

from orchestrator.library.reach import LibraryView
from orchestrator.mcp.library import Library, listing
from shared.agent_prompt.ask import ask_prompt
from shared.agent_prompt.tools_spec import BASH_TOOL, allowed_skills, tools_for
from shared.agentskills import name_problems
from shared.builtin import ASK, builtin_skill
from shared.checks import check_skill
from shared.library_tokens import token_entries
from shared.skill import split_frontmatter
from shared.vault import Vault, load_vault
from shared.yamlload import load_mapping

ROOT = Path(__file__).resolve().parents[2]
CLAUDE_CODE = ROOT / "tests" / "integration" / "vaults" / "claude-code"
NAMES = {"atheris", "constant-time-analysis", "every-claude-code-field", "firebase-apk-scanner",
         "git-cleanup", "skill-improver"}
# Claude Code's fields skillq keeps without using them, in every-claude-code-field
EVERY_KEPT = {"when_to_use", "argument-hint", "arguments", "user-invocable", "effort",
              "context", "agent", "hooks", "paths", "shell"}
# (folder, field) of every warning: one per kept field, and the model alias
WARNED = {("atheris", "type"), ("constant-time-analysis", "effort"),
          ("firebase-apk-scanner", "argument-hint"), ("skill-improver", "argument-hint"),
          ("every-claude-code-field", "model"),
          *(("every-claude-code-field", f) for f in EVERY_KEPT)}
BUDGETS = {"prompt_budget_chars": 60_000, "catalog_budget_chars": 15_000}


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    return Path(shutil.copytree(CLAUDE_CODE, tmp_path / "vault"))


def where(found: Vault | list, kind: str = "warnings") -> set[tuple[str, str]]:
    items = getattr(found, kind) if isinstance(found, Vault) else found
    return {(Path(p.path).parent.name, p.field) for p in items}


def front(skill_md: Path) -> dict:
    text, _, first = split_frontmatter(skill_md.read_text(encoding="utf-8"))
    return load_mapping(text, first_line=first).data


def write(root: Path, name: str, front_text: str, sidecar: str | None = None,
          body: str = "Do the work.\n") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: Does {name}. Use it in tests.\n{front_text}---\n"
        f"{body}", encoding="utf-8")
    if sidecar is not None:
        (folder / "skill.yaml").write_text(sidecar, encoding="utf-8")
    return folder


# ------------------------------------------------------------------ loading and keeping


def test_claude_code_folders_load_with_every_field_kept_as_written(vault: Path) -> None:
    loaded = load_vault(vault)
    assert loaded.problems == ()
    assert set(loaded.skills) == NAMES
    scanner = loaded.skills["firebase-apk-scanner"].manifest
    assert scanner.disable_model_invocation is True
    # a YAML flow list where Claude Code documents text: kept as the list it is
    assert scanner.kept == {"argument-hint": ("apk-file-or-directory",)}
    assert scanner.allowed_tool_names == ("Bash({baseDir}/scanner.sh:*)", "Bash(apktool:*)",
                                          "Bash(curl:*)", "Read", "Grep", "Glob")
    assert loaded.skills["atheris"].manifest.kept == {"type": "fuzzer"}
    assert loaded.skills["constant-time-analysis"].manifest.kept == {"effort": "medium"}
    assert loaded.skills["skill-improver"].manifest.kept == {
        "argument-hint": "<SKILL_NAME_OR_PATH> [--max-iterations N]"}
    every = loaded.skills["every-claude-code-field"].manifest
    assert set(every.kept) == EVERY_KEPT
    assert every.kept["user-invocable"] is True  # typed as YAML typed it
    assert every.kept["hooks"] == {"PostToolUse": (
        {"matcher": "Bash", "hooks": ({"type": "command", "command": "echo done"},)},)}
    assert every.kept["paths"] == ("CHANGELOG.md", "docs/**")
    assert every.model == "sonnet" and every.allowed_tool_names == ("Read", "Bash(git log *)")
    for skill in loaded.skills.values():  # each an instruction skill, answering in text
        assert skill.manifest.answers_in_text, skill.name
        assert check_skill(skill) == [], skill.name
    # one warning per kept field and for the model alias, each naming file, line, field
    assert where(loaded) == WARNED
    effort = next(w for w in loaded.warnings if w.field == "effort"
                  and "constant-time" in w.path)
    assert (effort.line, effort.message) == (5, "a Claude Code field skillq does not use: "
                                             "kept as written, exported unchanged, and ignored")
    alias = next(w for w in loaded.warnings if w.field == "model")
    assert "'sonnet' is a Claude Code alias" in alias.message
    assert "runs on the daemon's model (SKILLQ_AGENT_MODEL)" in alias.message
    typed = next(w for w in loaded.warnings if w.field == "type")
    assert typed.message.startswith("unknown field: kept as written")


def test_strict_keeps_the_refusal_skillq_always_gave(vault: Path) -> None:
    strict = load_vault(vault, strict=True)
    assert strict.warnings == ()
    assert where(strict, "problems") == WARNED  # every warning is now a problem
    by_place = {(Path(p.path).parent.name, p.field): p.message for p in strict.problems}
    assert by_place[("constant-time-analysis", "effort")] == (
        "unknown field; remove it: 'effort' is a Claude Code field, outside the Agent "
        "Skills specification, and skillq does not read it")
    assert by_place[("atheris", "type")].startswith("unknown field; remove it (known fields: ")
    assert by_place[("every-claude-code-field", "model")].startswith(
        "model 'sonnet' is not one skillq can place with a provider")


def test_validate_warns_and_exits_0_and_strict_exits_1(vault: Path, tmp_path: Path) -> None:
    run = skillq("validate", vault, cwd=tmp_path)
    warnings = [line for line in run.stdout.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == len(WARNED), run.stdout
    assert ("warning: vault/constant-time-analysis/SKILL.md:5: effort: a Claude Code field "
            "skillq does not use") in run.stdout
    assert f"✓ {len(NAMES)} skill(s) valid (skillq rules); {len(WARNED)} warning(s)" \
        in run.stdout
    strict = skillq("validate", vault, "--strict", cwd=tmp_path, expect=1)
    assert ("vault/constant-time-analysis/SKILL.md:5: effort: unknown field; remove it: "
            "'effort' is a Claude Code field") in strict.stdout
    assert f"✗ {len(WARNED)} problem(s) in {len(NAMES)} skill folder(s) checked (skillq " \
        "rules, strict)" in strict.stdout
    assert "warning:" not in strict.stdout
    one = vault / "atheris"
    assert "warning: vault/atheris/SKILL.md:3: type: unknown field" in \
        skillq("validate", one, cwd=tmp_path).stdout
    skillq("validate", one, "--strict", cwd=tmp_path, expect=1)
    # the reference refuses them all, as it always did (`--spec agentskills` agrees)
    assert AGENTSKILLS.exists()
    assert all(r.code != 0 for r in reference(vault / n for n in sorted(NAMES)).values())
    skillq("validate", vault, "--spec", "agentskills", cwd=tmp_path, expect=1)


def test_show_prints_the_warnings_and_the_answer_output(vault: Path, tmp_path: Path) -> None:
    run = skillq("show", "constant-time-analysis", "--vault", vault, cwd=tmp_path,
                 columns=250)
    assert "warning: vault/constant-time-analysis/SKILL.md:5: effort: a Claude Code" \
        in run.stdout
    assert "answer" in run.stdout and "string" in run.stdout  # its one output


# ------------------------------------------------------------------ where keys are errors


def test_an_unknown_field_is_an_error_where_skillq_fields_are(tmp_path: Path) -> None:
    # bot0 form: a near miss of a field meant to do something; Claude Code's are kept
    write(tmp_path, "bot0", "approach: agent\ntimout: 5\neffort: low\n")
    # Agent Skills form: skill.yaml is skillq's own file; Claude Code reads SKILL.md only
    write(tmp_path, "sidecar", "type: fuzzer\ndisable-model-invocation: true\n",
          sidecar="approach: agent\neffort: low\n")
    write(tmp_path, "moved", "", sidecar="approach: agent\ndisable-model-invocation: true\n")
    loaded = load_vault(tmp_path)
    problems = {(Path(p.path).parent.name, Path(p.path).name, p.field): p.message
                for p in loaded.problems}
    assert problems == {
        ("bot0", "SKILL.md", "timout"): "unknown field; did you mean 'timeout'?",
        ("sidecar", "SKILL.md", "type"): problems[("sidecar", "SKILL.md", "type")],
        ("sidecar", "skill.yaml", "effort"): "'effort' is a Claude Code field; it belongs "
        "in SKILL.md's frontmatter, where Claude Code reads it, not in skill.yaml: move "
        "it there",
        ("moved", "skill.yaml", "disable-model-invocation"): "'disable-model-invocation' "
        "is a Claude Code field; it belongs in SKILL.md's frontmatter, where Claude Code "
        "reads it, not in skill.yaml: move it there"}
    assert problems[("sidecar", "SKILL.md", "type")].startswith("unknown field; remove it")
    assert loaded.skills["bot0"].manifest.kept == {"effort": "low"}
    assert where(loaded) == {("bot0", "effort")}
    # honoured where Claude Code reads it, beside a skill.yaml too
    assert loaded.skills["sidecar"].manifest.disable_model_invocation is True


@pytest.mark.parametrize(("name", "extra"), [
    ("Zoho_desk 自动化", "risk: unknown\n"),  # a Composio skill's own name
    ("Brand Guidelines", ""),
])
def test_a_name_the_reference_refuses_stays_refused(tmp_path: Path, name: str,
                                                    extra: str) -> None:
    folder = tmp_path / "brand"
    folder.mkdir()
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: A skill.\n{extra}---\n"
                                     "Body.\n", encoding="utf-8")
    loaded = load_vault(tmp_path)
    refused = {p.message for p in loaded.problems if p.field == "name"}
    assert refused and refused == set(name_problems(name, "brand"))  # today's messages
    skillq("validate", folder, cwd=tmp_path, expect=1)


# ------------------------------------------------------------------ export


@pytest.mark.parametrize("form", ["agentskills", "bot0"])
def test_an_export_writes_every_field_back_unchanged(vault: Path, tmp_path: Path,
                                                    form: str) -> None:
    out = tmp_path / "out"
    run = skillq("export", f"--{form}", out, "--vault", vault, cwd=tmp_path)
    before, after = load_vault(vault), load_vault(out)
    assert after.problems == ()
    assert {n: s.manifest for n, s in after.skills.items()} == \
        {n: s.manifest for n, s in before.skills.items()}
    assert where(after) == WARNED
    for name, skill in before.skills.items():
        written = front(out / name / "SKILL.md")  # where Claude Code reads them
        for key, value in front(skill.skill_md).items():
            if form == "agentskills" and key == "model":  # skillq's too: in skill.yaml
                side = load_mapping((out / name / "skill.yaml").read_text()).data
                assert side == {"model": value}, name
            else:
                assert written[key] == value, (name, key)
    if form == "agentskills":
        assert ("kept in SKILL.md as written: disable-model-invocation, argument-hint "
                "(fields outside the specification") in run.stdout


def test_an_agentskills_export_keeps_claude_code_fields_out_of_skill_yaml(
        tmp_path: Path) -> None:
    write(tmp_path / "vault", "deploy", "disable-model-invocation: true\neffort: high\n"
          "approach: agent\nmax_turns: 3\n")
    skillq("export", "--agentskills", tmp_path / "out", "--vault", tmp_path / "vault",
           cwd=tmp_path)
    md = front(tmp_path / "out" / "deploy" / "SKILL.md")
    assert md["disable-model-invocation"] is True and md["effort"] == "high"
    side = (tmp_path / "out" / "deploy" / "skill.yaml").read_text(encoding="utf-8")
    assert "max_turns: 3" in side and "effort" not in side and "disable" not in side
    again = load_vault(tmp_path / "out")
    assert again.problems == ()
    assert again.skills["deploy"].manifest == load_vault(tmp_path / "vault").skills[
        "deploy"].manifest


# ------------------------------------------------------------------ what a model is offered


@pytest.fixture
def catalog_vault(tmp_path: Path) -> Vault:
    root = tmp_path / "lib"
    write(root, "deploy", "disable-model-invocation: true\n", body="Ship it: DEPLOY-BODY.\n")
    write(root, "notes", "")
    write(root, "helper", "catalog: all\n")
    listed = write(root, "listing", "")
    (listed / "sub-skills.json").write_text(
        '{"sub_skills": [{"skill_id": "deploy"}, {"skill_id": "notes"}]}', encoding="utf-8")
    loaded = load_vault(root)
    assert loaded.problems == (), loaded.problems
    return loaded


def test_no_agent_step_is_offered_a_skill_that_disables_model_invocation(
        catalog_vault: Vault) -> None:
    skills = catalog_vault.skills
    assert allowed_skills(skills["helper"], skills) == ["listing", "notes"]
    assert allowed_skills(skills["listing"], skills) == ["notes"]


def test_ask_leaves_it_out_of_the_catalog_but_a_person_may_invoke_it(
        catalog_vault: Vault) -> None:
    ask = builtin_skill(ASK)
    assert ask is not None
    skills = catalog_vault.skills
    entries = token_entries(skills, {})
    shown = ask_prompt(ask, "what can you do?", skills, entries, **BUDGETS).prompt
    assert "deploy" not in shown.catalog and "<name>deploy</name>" not in shown.system
    assert "DEPLOY-BODY" not in shown.system
    invoked = ask_prompt(ask, "/deploy the release", skills, entries, **BUDGETS).prompt
    assert "DEPLOY-BODY" in invoked.system  # the person's invocation brings it
    assert "deploy" in invoked.catalog  # and the model may load and execute it for them
    assert "<name>deploy</name>" not in invoked.system  # still not offered as a choice


def test_mcp_lists_it_to_no_model_but_keeps_it_a_prompt(catalog_vault: Vault) -> None:
    library = Library(catalog_vault, LibraryView())
    assert [s.name for s in library.offered()] == ["helper", "listing", "notes"]
    assert "deploy" in [s.name for s in library.enabled()]  # a person's prompt
    assert library.get("deploy").name == "deploy"  # run by name when a person asks
    assert listing(library.get("notes"), library.view)["outputs"] == [
        {"name": "answer", "type": "string", "description": "The model's answer, as text "
         "(the skill declares no outputs of its own)."}]


def test_skillq_catalog_leaves_it_out_with_a_note(catalog_vault: Vault,
                                                 tmp_path: Path) -> None:
    run = skillq("catalog", "--vault", catalog_vault.root, cwd=tmp_path)
    assert [line.split(":", 1)[0] for line in run.stdout.splitlines()] == [
        "helper", "listing", "notes"]
    assert "note: left out deploy: it sets disable-model-invocation: true" in run.stderr
    xml = skillq("catalog", "--format", "xml", "--vault", catalog_vault.root, cwd=tmp_path)
    assert "deploy" not in xml.stdout


# ------------------------------------------------------------------ allowed-tools


@pytest.mark.parametrize(("allowed", "bash"), [
    ("allowed-tools: Bash Read Grep\n", True),
    ("allowed-tools: Bash(git diff *), Read\n", True),
    ("allowed-tools:\n  - Read\n  - Bash(python:*)\n", True),
    ("allowed-tools: Read Grep Glob WebFetch\n", False),
    ("allowed-tools: Bashful\n", False),
    ("tools_used: [bash]\n", True),
    ("", False),
])
def test_claude_code_s_bash_in_allowed_tools_offers_the_bash_tool(
        tmp_path: Path, allowed: str, bash: bool) -> None:
    write(tmp_path, "probe", allowed)
    loaded = load_vault(tmp_path)
    assert loaded.problems == ()
    assert (BASH_TOOL in tools_for(loaded.skills["probe"].manifest, [])) is bash


def test_the_real_folders_get_bash_where_they_name_it(vault: Path) -> None:
    skills = load_vault(vault).skills
    offered = {n for n, s in skills.items() if BASH_TOOL in tools_for(s.manifest, [])}
    assert offered == {"constant-time-analysis", "firebase-apk-scanner", "git-cleanup",
                       "skill-improver", "every-claude-code-field"}
