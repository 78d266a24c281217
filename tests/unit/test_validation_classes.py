"""Every class of broken skill is reported by `skillq validate` on the right file, field
and with a message that says what is wrong.

Each test writes a valid two-skill vault (a script leaf `leaf` and an orchestrator `pipe`
that fans out over it), breaks exactly one thing and validates. Most classes go through
the real Typer app in-process (fast: the same command, option parsing, output and exit
code); a representative subset, the exit codes and the no-traceback promise also go
through the installed `skillq` console script as a subprocess.

A line of output reads `<path>[:line]: <field>: <message>`; paths are relative to the
vault because validation runs with the vault as working directory.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli.app import app

SKILLQ = Path(sys.executable).with_name("skillq")

LEAF_DESCRIPTION = ("Fetch one web page and count its words. Use it when a pipeline needs "
                    "a page title.")

LEAF_MD = f"""\
---
name: leaf
description: {LEAF_DESCRIPTION}
version: 1
inputs:
  - name: url
    type: string
    required: true
    description: The page to fetch.
  - name: count
    type: integer
    default: 3
  - name: tags
    type: string[]
    default: []
outputs:
  - name: title
    type: string
  - name: words
    type: integer
approach: code
run:
  command: python3 main.py
  timeout: 30
  retries: 1
cache:
  enabled: false
---

# leaf

Fetches the page at `url` and prints its title and word count.
"""

LEAF_MAIN = """\
import json
import os

inputs = json.load(open(os.environ["SKILL_INPUTS"]))
print(json.dumps({"title": inputs["url"], "words": 1}))
"""

PIPE_MD = """\
---
name: pipe
description: Fetch several pages and total their words. Use it for a reading list digest.
version: 1
inputs:
  - name: urls
    type: string[]
    required: true
  - name: label
    type: string
    default: Reading list
outputs:
  - name: titles
    type: string[]
    from: ${steps.fetch.outputs.title}
  - name: words
    type: integer
    from: ${steps.summary.outputs.words}
steps:
  - id: fetch
    skill: leaf
    for_each: ${inputs.urls}
    with:
      url: ${item}
    on_failure: skip
  - id: summary
    skill: leaf
    with:
      url: ${inputs.label}
      tags: ${steps.fetch.outputs.title}
---

# pipe

Fetches every url, then summarises the titles.
"""

AGGREGATES = {"total_runs": 0, "success_rate": None, "avg_duration_ms": None,
              "avg_cost_usd": None, "last_run": None}


def _benchmarks(skill: str, inputs: dict[str, object], expected: dict[str, object]) -> str:
    return json.dumps({"skill": skill, "version": 1,
                       "tests": [{"id": "test-001", "name": "happy path", "inputs": inputs,
                                  "expected": expected}],
                       "runs": [], "aggregates": AGGREGATES}, indent=2) + "\n"


LEAF_BENCH = _benchmarks("leaf", {"url": "https://example.com", "count": 2},
                         {"success": True, "title": "https://example.com"})
PIPE_BENCH = _benchmarks("pipe", {"urls": ["https://example.com"]},
                         {"success": True, "words": 1})
LEAF_SUBS = '{"sub_skills": []}\n'
PIPE_SUBS = '{"sub_skills": [{"skill_id": "leaf", "role": "fetch one page"}]}\n'

BASE_FILES = {
    "leaf/SKILL.md": LEAF_MD,
    "leaf/main.py": LEAF_MAIN,
    "leaf/benchmarks.json": LEAF_BENCH,
    "leaf/sub-skills.json": LEAF_SUBS,
    "pipe/SKILL.md": PIPE_MD,
    "pipe/benchmarks.json": PIPE_BENCH,
    "pipe/sub-skills.json": PIPE_SUBS,
}

HELPER_MD = """\
---
name: {name}
description: Answer questions about a page. Use it when a person asks about one.
{extra}---

Read the page and answer.
"""


def orchestrator_md(name: str, calls: str) -> str:
    return (f"---\nname: {name}\ndescription: Call {calls}. Use it to test cycles.\n"
            f"steps:\n  - id: call\n    skill: {calls}\n---\n\nCalls {calls}.\n")


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        return [line for line in self.stdout.splitlines() if line.strip()]

    @property
    def problem_lines(self) -> list[str]:
        return [line for line in self.lines if not line.startswith(("✓", "✗"))]


class Vault:
    """A vault in a temporary folder, edited one exact text replacement at a time."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for rel, text in BASE_FILES.items():
            self.write(rel, text)

    def write(self, rel: str, text: str | bytes) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")

    def read(self, rel: str) -> str:
        return (self.root / rel).read_text(encoding="utf-8")

    def edit(self, rel: str, old: str, new: str) -> None:
        text = self.read(rel)
        assert text.count(old) == 1, f"{old!r} must occur exactly once in {rel}"
        self.write(rel, text.replace(old, new))

    def line_of(self, rel: str, needle: str) -> int:
        """1-based number of the only line of ``rel`` holding ``needle``."""
        found = [n for n, line in enumerate(self.read(rel).splitlines(), 1) if needle in line]
        assert len(found) == 1, f"{needle!r} is on lines {found} of {rel}"
        return found[0]

    def as_agentskills(self, rel_folder: str = "leaf") -> None:
        """Move every execution field of a bot0 SKILL.md into skill.yaml."""
        md = self.read(f"{rel_folder}/SKILL.md")
        _, front, body = md.split("---\n", 2)
        spec = [ln for ln in front.splitlines() if ln.startswith(("name:", "description:"))]
        rest = [ln for ln in front.splitlines() if ln not in spec]
        self.write(f"{rel_folder}/SKILL.md", "---\n" + "\n".join(spec) + "\n---\n" + body)
        self.write(f"{rel_folder}/skill.yaml", "\n".join(rest) + "\n")


@pytest.fixture
def vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Vault:
    root = tmp_path / "vault"
    root.mkdir()
    monkeypatch.chdir(root)  # problem paths print relative to the working directory
    return Vault(root)


_runner = CliRunner()


def validate(target: str = ".") -> Result:
    """`skillq validate TARGET` through the real Typer app, in this process."""
    res = _runner.invoke(app, ["validate", target])
    assert res.exception is None or isinstance(res.exception, SystemExit), \
        f"validate raised {res.exception!r}\n{res.output}"
    return Result(res.exit_code, res.stdout, res.stderr)


def validate_subprocess(cwd: Path, *args: str) -> Result:
    """The installed console script, as a user runs it."""
    proc = subprocess.run([str(SKILLQ), "validate", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=60, check=False)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def _line_re(file: str, field: str) -> re.Pattern[str]:
    return re.compile(rf"^{re.escape(file)}(?::(\d+))?: {re.escape(field)}: (.*)$")


def assert_problem(result: Result, file: str, field: str, phrase: str,
                   line: int | None = None) -> str:
    """An invalid verdict with a `file[:line]: field: ...phrase...` line; returns it."""
    assert result.code == 1, f"exit {result.code}, expected 1\n{result.stdout}{result.stderr}"
    assert "Traceback" not in result.stdout + result.stderr
    pattern = _line_re(file, field)
    hits = [(m, text) for text in result.lines if (m := pattern.match(text))]
    shown = "\n".join(result.lines)
    good = [(m, text) for m, text in hits if phrase in m.group(2)]
    assert good, f"no line `{file}: {field}: ...{phrase}...` in:\n{shown}"
    if line is not None:
        lines = [m.group(1) for m, _ in good]
        assert str(line) in lines, f"expected line {line}, got {lines} in:\n{shown}"
    count = len(result.problem_lines)
    assert any(f"✗ {count} problem(s)" in text for text in result.lines), shown
    return good[0][1]


def problems_outside(result: Result, *folders: str) -> list[str]:
    return [p for p in result.problem_lines if not p.startswith(tuple(f + "/" for f in folders))]


# --- the base vault --------------------------------------------------------------------


def test_base_vault_is_valid(vault: Vault) -> None:
    result = validate()
    assert result.code == 0, result.stdout
    assert result.problem_lines == []
    assert "✓ 2 skill(s) valid" in result.stdout


def test_base_vault_is_valid_through_the_console_script(vault: Vault) -> None:
    result = validate_subprocess(vault.root, ".")
    assert result.code == 0, result.stdout + result.stderr
    assert "✓ 2 skill(s) valid" in result.stdout
    assert "Traceback" not in result.stderr


# --- Agent Skills fields ---------------------------------------------------------------

NAME_CASES = {
    # id: (folder, name, phrase)
    "uppercase": ("Helper", "Helper", "must be lowercase"),
    "double-hyphen": ("help--er", "help--er", "must not contain consecutive hyphens"),
    "leading-hyphen": ("-helper", "-helper", "must not start or end with a hyphen"),
    "trailing-hyphen": ("helper-", "helper-", "must not start or end with a hyphen"),
    "over-64": ("h" * 65, "h" * 65, "is 65 characters, over the limit of 64"),
    "underscore": ("my_helper", "my_helper", "only letters, digits and hyphens are allowed"),
    "not-the-folder": ("helper", "helpr", "does not match its folder 'helper'"),
}


@pytest.mark.parametrize("case", list(NAME_CASES))
def test_name_rules(vault: Vault, case: str) -> None:
    folder, name, phrase = NAME_CASES[case]
    vault.write(f"{folder}/SKILL.md", HELPER_MD.format(name=name, extra=""))
    result = validate()
    assert_problem(result, f"{folder}/SKILL.md", "name", phrase, line=2)
    assert problems_outside(result, folder) == []


def test_name_equal_to_the_folder_is_suggested(vault: Vault) -> None:
    vault.write("helper/SKILL.md", HELPER_MD.format(name="helpr", extra=""))
    line = assert_problem(validate(), "helper/SKILL.md", "name", "does not match")
    assert "set name: helper" in line


@pytest.mark.parametrize(("case", "new", "phrase"), [
    ("missing", "", "required field is missing"),
    ("empty", "description: ''\n", "description is empty"),
    ("over-1024", "description: " + "x" * 1025 + "\n", "1025 characters, over the limit of 1024"),
    ("a-list", "description:\n  - one\n", "must be a single text value, not a list"),
])
def test_description_rules(vault: Vault, case: str, new: str, phrase: str) -> None:
    vault.edit("leaf/SKILL.md", f"description: {LEAF_DESCRIPTION}\n", new)
    result = validate()
    assert_problem(result, "leaf/SKILL.md", "description", phrase,
                   line=None if case == "missing" else 3)


# --- unknown fields and types ----------------------------------------------------------


def test_unknown_top_level_field_suggests_the_known_one(vault: Vault) -> None:
    vault.edit("leaf/SKILL.md", "inputs:", "inptus:")
    assert_problem(validate(), "leaf/SKILL.md", "inptus", "unknown field; did you mean 'inputs'?",
                   line=vault.line_of("leaf/SKILL.md", "inptus:"))


@pytest.mark.parametrize(("file", "old", "new", "field", "suggestion"), [
    ("leaf/SKILL.md", "timeout: 30", "timout: 30", "run.timout", "timeout"),
    ("leaf/SKILL.md", "    required: true", "    requird: true", "inputs[0].requird", "required"),
    ("pipe/SKILL.md", "on_failure: skip", "on_falure: skip", "steps[0].on_falure", "on_failure"),
    ("leaf/SKILL.md", "enabled: false", "enabld: false", "cache.enabld", "enabled"),
])
def test_unknown_nested_field_suggests_the_known_one(vault: Vault, file: str, old: str,
                                                     new: str, field: str,
                                                     suggestion: str) -> None:
    vault.edit(file, old, new)
    result = validate()
    assert_problem(result, file, field, f"unknown field; did you mean '{suggestion}'?",
                   line=vault.line_of(file, new.strip()))


def test_unknown_type_suggests_the_known_one(vault: Vault) -> None:
    vault.edit("leaf/SKILL.md", "type: integer\n    default: 3", "type: strng\n    default: 3")
    assert_problem(validate(), "leaf/SKILL.md", "inputs[1].type",
                   "unknown type 'strng'; did you mean 'string'?",
                   line=vault.line_of("leaf/SKILL.md", "type: strng"))


def test_unknown_array_type_suggests_the_array(vault: Vault) -> None:
    vault.edit("pipe/SKILL.md", "type: string[]\n    required", "type: strng[]\n    required")
    assert_problem(validate(), "pipe/SKILL.md", "inputs[0].type",
                   "unknown type 'strng[]'; did you mean 'string[]'?")


# --- duplicates ------------------------------------------------------------------------


def test_duplicate_input_name(vault: Vault) -> None:
    line = vault.line_of("leaf/SKILL.md", "name: count")
    vault.edit("leaf/SKILL.md", "name: count", "name: url")
    assert_problem(validate(), "leaf/SKILL.md", "inputs[1]", "'url' is declared twice", line=line)


def test_duplicate_output_name(vault: Vault) -> None:
    vault.edit("leaf/SKILL.md", "name: words", "name: title")
    assert_problem(validate(), "leaf/SKILL.md", "outputs[1]", "'title' is declared twice")


def test_duplicate_step_id(vault: Vault) -> None:
    line = vault.line_of("pipe/SKILL.md", "id: summary")
    vault.edit("pipe/SKILL.md", "id: summary", "id: fetch")
    assert_problem(validate(), "pipe/SKILL.md", "steps[1].id", "step id 'fetch' is used twice",
                   line=line)


# --- run.command -----------------------------------------------------------------------


@pytest.mark.parametrize(("command", "phrase"), [
    ("python3 ../other/x.py", "'../other/x.py' reaches outside the skill folder"),
    ("python3 main.py --config=../secret.json", "'../secret.json' reaches outside"),
    ("python3 /opt/tools/x.py", "'/opt/tools/x.py' is an absolute path, outside the skill folder"),
    ("/usr/bin/python3 main.py", "use the program by name (found on PATH)"),
])
def test_run_command_reaching_outside_the_folder(vault: Vault, command: str, phrase: str) -> None:
    vault.write("other/x.py", "print('{}')\n")  # exists, but in another folder
    vault.write("other/SKILL.md", HELPER_MD.format(name="other", extra=""))
    vault.edit("leaf/SKILL.md", "command: python3 main.py", f"command: {command}")
    result = validate()
    assert_problem(result, "leaf/SKILL.md", "run.command", phrase,
                   line=vault.line_of("leaf/SKILL.md", "command:"))
    assert problems_outside(result, "leaf") == []


def test_run_command_naming_a_missing_script(vault: Vault) -> None:
    vault.edit("leaf/SKILL.md", "command: python3 main.py", "command: python3 mian.py")
    assert_problem(validate(), "leaf/SKILL.md", "run.command", "'mian.py' does not exist in leaf/")


def test_run_command_script_in_a_subfolder_is_fine(vault: Vault) -> None:
    vault.write("leaf/scripts/main.py", LEAF_MAIN)
    vault.edit("leaf/SKILL.md", "command: python3 main.py", "command: python3 scripts/main.py")
    assert validate().code == 0


@pytest.mark.parametrize(("command", "token"), [
    ("python3 main.py | wc -l", "|"),
    ("python3 main.py > out.txt", ">"),
    ("python3 main.py && echo done", "&&"),
    ("python3 main.py ; echo done", ";"),
    ("python3 main.py $(date)", "$(date)"),
    pytest.param("python3 main.py|wc -l", "|"),
    pytest.param("python3 main.py>out.txt", ">"),
    pytest.param("python3 main.py; echo done", ";"),
])
def test_run_command_with_shell_syntax(vault: Vault, command: str, token: str) -> None:
    vault.edit("leaf/SKILL.md", "command: python3 main.py", f"command: {command}")
    assert_problem(validate(), "leaf/SKILL.md", "run.command",
                   "shell syntax, but run.command is not run by a shell")


# --- steps and references --------------------------------------------------------------


def test_unknown_sub_skill_in_a_step(vault: Vault) -> None:
    vault.edit("pipe/SKILL.md", "skill: leaf\n    for_each", "skill: leef\n    for_each")
    assert_problem(validate(), "pipe/SKILL.md", "steps[0].skill",
                   "no skill 'leef' in this vault; did you mean 'leaf'?",
                   line=vault.line_of("pipe/SKILL.md", "skill: leef"))


@pytest.mark.parametrize(("old", "new", "field", "phrase"), [
    ("tags: ${steps.fetch.outputs.title}", "tags: ${steps.nope.outputs.x}",
     "steps[1].with.tags", "${steps.nope.outputs.x}: no step 'nope' in this skill"),
    ("tags: ${steps.fetch.outputs.title}", "tags: ${steps.fetch.outputs.nope}",
     "steps[1].with.tags", "'leaf' has no output 'nope'; it outputs: title, words"),
    ("tags: ${steps.fetch.outputs.title}", "tags: ${steps.fetch.outputs.titel}",
     "steps[1].with.tags", "'leaf' has no output 'titel'; did you mean 'title'?"),
    ("url: ${inputs.label}", "url: ${inputs.nope}",
     "steps[1].with.url", "${inputs.nope}: this skill has no input 'nope'"),
    ("from: ${steps.summary.outputs.words}", "from: ${steps.summary.outputs.nope}",
     "outputs[1].from", "'leaf' has no output 'nope'"),
    ("from: ${steps.summary.outputs.words}", "from: ${steps.nope.outputs.words}",
     "outputs[1].from", "no step 'nope'"),
    ("url: ${inputs.label}", "url: Page ${inputs.nope}",
     "steps[1].with.url", "this skill has no input 'nope'"),
], ids=["step", "output", "output-did-you-mean", "input", "from-output", "from-step",
        "input-inside-text"])
def test_unknown_reference(vault: Vault, old: str, new: str, field: str, phrase: str) -> None:
    vault.edit("pipe/SKILL.md", old, new)
    assert_problem(validate(), "pipe/SKILL.md", field, phrase,
                   line=vault.line_of("pipe/SKILL.md", new))


@pytest.mark.parametrize(("ref", "phrase"), [
    ("${env.X}", "'${env.X}' starts with unknown 'env'; write ${inputs.NAME}"),
    ("${steps.fetch}", "must read ${steps.ID.outputs} or ${steps.ID.outputs.NAME}"),
    ("${inputs.label", "has an unclosed '${'"),
    ("${}", "is not a reference"),
])
def test_malformed_reference(vault: Vault, ref: str, phrase: str) -> None:
    vault.edit("pipe/SKILL.md", "url: ${inputs.label}", f"url: '{ref}'")
    assert_problem(validate(), "pipe/SKILL.md", "steps[1].with.url", phrase)


def test_escaped_reference_is_literal_text(vault: Vault) -> None:
    vault.edit("pipe/SKILL.md", "url: ${inputs.label}", "url: $${inputs.nope}")
    assert validate().code == 0


def test_item_in_a_step_without_for_each(vault: Vault) -> None:
    vault.edit("pipe/SKILL.md", "url: ${inputs.label}", "url: ${item}")
    assert_problem(validate(), "pipe/SKILL.md", "steps[1].with.url",
                   "${item} is only defined inside a step with for_each")


def test_steps_in_a_cycle(vault: Vault) -> None:
    vault.edit("pipe/SKILL.md", "url: ${item}",
               "url: ${item}\n      count: ${steps.summary.outputs.words}")
    assert_problem(validate(), "pipe/SKILL.md", "steps[0]",
                   "steps depend on each other in a cycle: fetch -> summary -> fetch",
                   line=vault.line_of("pipe/SKILL.md", "- id: fetch"))


def test_step_needing_an_unknown_step(vault: Vault) -> None:
    vault.edit("pipe/SKILL.md", "on_failure: skip", "on_failure: skip\n    needs: [nope]")
    assert_problem(validate(), "pipe/SKILL.md", "steps[0].needs[0]", "no step 'nope'")


def test_sub_skills_in_a_cycle_across_two_orchestrators(vault: Vault) -> None:
    vault.write("ping/SKILL.md", orchestrator_md("ping", "pong"))
    vault.write("pong/SKILL.md", orchestrator_md("pong", "ping"))
    result = validate()
    assert_problem(result, "ping/SKILL.md", "steps", "ping -> pong -> ping")
    assert problems_outside(result, "ping", "pong") == []


def test_sub_skill_cycle_is_reported_when_validating_either_member(vault: Vault) -> None:
    vault.write("ping/SKILL.md", orchestrator_md("ping", "pong"))
    vault.write("pong/SKILL.md", orchestrator_md("pong", "ping"))
    result = validate("pong")
    assert result.code == 1
    assert any("ping -> pong -> ping" in line or "pong -> ping -> pong" in line
               for line in result.problem_lines), result.stdout


@pytest.mark.parametrize(("value", "phrase"), [
    ("${inputs.label}", "for_each needs a list, but ${inputs.label} is string"),
    ("5", "for_each needs a list: a YAML list or a reference to one"),
    ("just-text", "for_each needs a list: a YAML list or a reference to one"),
    ("${steps.summary.outputs.words}", "is integer"),
], ids=["string-input", "literal-number", "literal-text", "scalar-output"])
def test_for_each_over_a_non_list(vault: Vault, value: str, phrase: str) -> None:
    vault.edit("pipe/SKILL.md", "for_each: ${inputs.urls}", f"for_each: {value}")
    result = validate()
    assert_problem(result, "pipe/SKILL.md", "steps[0].for_each", phrase,
                   line=vault.line_of("pipe/SKILL.md", "for_each:"))


def test_for_each_over_a_yaml_list_is_fine(vault: Vault) -> None:
    vault.edit("pipe/SKILL.md", "for_each: ${inputs.urls}",
               "for_each:\n      - https://a.example\n      - https://b.example")
    assert validate().code == 0


def test_call_missing_a_required_input(vault: Vault) -> None:
    vault.edit("pipe/SKILL.md", "      url: ${inputs.label}\n", "")
    assert_problem(validate(), "pipe/SKILL.md", "steps[1].with",
                   "step 'summary' does not give 'leaf' its required input 'url' (string)")


def test_call_passing_an_undeclared_input(vault: Vault) -> None:
    vault.edit("pipe/SKILL.md", "url: ${inputs.label}", "url: ${inputs.label}\n      cuont: 2")
    assert_problem(validate(), "pipe/SKILL.md", "steps[1].with.cuont",
                   "'leaf' has no input 'cuont'; did you mean 'count'?",
                   line=vault.line_of("pipe/SKILL.md", "cuont:"))


@pytest.mark.parametrize(("old", "new", "field", "phrase"), [
    ("url: ${inputs.label}", "url: ${inputs.urls}", "steps[1].with.url",
     "passes string[] but 'leaf' declares input 'url' as string"),
    ("url: ${inputs.label}", "url: ${inputs.label}\n      count: seven", "steps[1].with.count",
     "passes string but 'leaf' declares input 'count' as integer"),
    ("tags: ${steps.fetch.outputs.title}", "tags: ${steps.summary.outputs.title}",
     "steps[1].with.tags", "passes string but 'leaf' declares input 'tags' as string[]"),
    ("  - name: titles\n    type: string[]", "  - name: titles\n    type: string",
     "outputs[0].from", "gives string[] but output 'titles' is declared string"),
], ids=["array-to-string", "literal", "fan-in-missing", "output-from"])
def test_type_mismatch(vault: Vault, old: str, new: str, field: str, phrase: str) -> None:
    vault.edit("pipe/SKILL.md", old, new)
    assert_problem(validate(), "pipe/SKILL.md", field, phrase)


def test_integer_passed_to_a_number_input_is_fine(vault: Vault) -> None:
    vault.edit("leaf/SKILL.md", "type: integer\n    default: 3", "type: number\n    default: 3")
    vault.edit("pipe/SKILL.md", "url: ${item}", "url: ${item}\n      count: 2")
    assert validate().code == 0


def test_invalid_on_failure(vault: Vault) -> None:
    vault.edit("pipe/SKILL.md", "on_failure: skip", "on_failure: ignore")
    assert_problem(validate(), "pipe/SKILL.md", "steps[0].on_failure",
                   "'ignore' is not allowed; use one of 'abort', 'skip' or 'continue'",
                   line=vault.line_of("pipe/SKILL.md", "on_failure"))


# --- field rules -----------------------------------------------------------------------


@pytest.mark.parametrize("extra", ["cache:\n  enabled: true\n",
                                   "approach: agent\ncache:\n  enabled: true\n  ttl: 60\n"],
                         ids=["instruction-only", "approach-agent"])
def test_cache_enabled_on_an_agent_skill(vault: Vault, extra: str) -> None:
    vault.write("helper/SKILL.md", HELPER_MD.format(name="helper", extra=extra))
    assert_problem(validate(), "helper/SKILL.md", "cache.enabled", "agent skills must not cache",
                   line=vault.line_of("helper/SKILL.md", "enabled: true"))


@pytest.mark.parametrize(("model", "phrase"), [
    ("llama3", "model 'llama3' is not one skillq can place with a provider"),
    ("google:gemini-2.5-pro", "names an unknown provider 'google'"),
    ("antropic:claude-haiku-4-5", "did you mean 'anthropic:claude-haiku-4-5'"),
], ids=["bare-unknown", "unknown-provider", "misspelt-provider"])
def test_a_model_no_provider_matches(vault: Vault, model: str, phrase: str) -> None:
    vault.write("helper/SKILL.md", HELPER_MD.format(name="helper", extra=f"model: {model}\n"))
    found = assert_problem(validate(), "helper/SKILL.md", "model", phrase,
                           line=vault.line_of("helper/SKILL.md", "model:"))
    assert "provider:name" in found and "openai-chat:" in found  # the accepted forms


@pytest.mark.parametrize("model", ["anthropic:claude-haiku-4-5", "claude-haiku-4-5-20251001",
                                   "openai-chat:qwen2.5:7b", "o3-mini"])
def test_a_model_of_a_known_provider_is_fine(vault: Vault, model: str) -> None:
    vault.write("helper/SKILL.md", HELPER_MD.format(name="helper", extra=f"model: {model}\n"))
    assert validate().code == 0


def test_required_input_with_a_default(vault: Vault) -> None:
    vault.edit("leaf/SKILL.md", "    required: true\n",
               "    required: true\n    default: https://example.com\n")
    assert_problem(validate(), "leaf/SKILL.md", "inputs[0].required",
                   "a required input cannot have a default",
                   line=vault.line_of("leaf/SKILL.md", "required: true"))


@pytest.mark.parametrize(("old", "new", "field", "phrase"), [
    ("default: 3", "default: three", "inputs[1].default", 'expected integer, got "three"'),
    ("default: 3", "default: 2024-01-01", "inputs[1].default",
     'expected integer, got "2024-01-01"'),
    ("default: []", "default: [1, 2]", "inputs[2].default", "item 0: expected string, got 1"),
    ("default: []", "default: tag", "inputs[2].default", "expected string[] (a JSON list)"),
], ids=["text-for-integer", "date-for-integer", "integers-for-strings", "scalar-for-array"])
def test_default_not_matching_its_type(vault: Vault, old: str, new: str, field: str,
                                       phrase: str) -> None:
    vault.edit("leaf/SKILL.md", old, new)
    assert_problem(validate(), "leaf/SKILL.md", field, f"default does not fit type: {phrase}",
                   line=vault.line_of("leaf/SKILL.md", new))


def test_orchestrator_output_without_from(vault: Vault) -> None:
    vault.edit("pipe/SKILL.md", "    from: ${steps.fetch.outputs.title}\n", "")
    assert_problem(validate(), "pipe/SKILL.md", "outputs[0]",
                   "an orchestrator output needs `from:`",
                   line=vault.line_of("pipe/SKILL.md", "- name: titles"))


def test_leaf_output_with_from(vault: Vault) -> None:
    vault.edit("leaf/SKILL.md", "  - name: title\n",
               "  - name: title\n    from: ${steps.x.outputs.title}\n")
    assert_problem(validate(), "leaf/SKILL.md", "outputs[0].from",
                   "only an orchestrator maps outputs from steps",
                   line=vault.line_of("leaf/SKILL.md", "from:"))


# --- benchmarks.json and sub-skills.json -------------------------------------------------


def test_benchmarks_not_valid_json_names_the_line(vault: Vault) -> None:
    vault.edit("leaf/benchmarks.json", '"version": 1,', '"version": 1')
    assert_problem(validate(), "leaf/benchmarks.json", "(file)", "is not valid JSON",
                   line=vault.line_of("leaf/benchmarks.json", '"tests"'))


def test_benchmarks_not_an_object(vault: Vault) -> None:
    vault.write("leaf/benchmarks.json", "[]\n")
    assert_problem(validate(), "leaf/benchmarks.json", "(file)", "must hold one JSON object")


@pytest.mark.parametrize(("old", "new", "field", "phrase"), [
    ('"version": 1,', '"version": "one",', "version", "must be a whole number, got 'one'"),
    ('"success": true', '"success": "yes"', "tests[0].expected.success",
     "must be true or false"),
    ('"runs": []', '"rusn": []', "rusn", "unknown field; did you mean 'runs'?"),
], ids=["version-text", "success-text", "unknown-key"])
def test_benchmarks_wrong_field(vault: Vault, old: str, new: str, field: str,
                                phrase: str) -> None:
    vault.edit("leaf/benchmarks.json", old, new)
    assert_problem(validate(), "leaf/benchmarks.json", field, phrase)


@pytest.mark.parametrize(("old", "new", "field", "phrase"), [
    ('"url": "https://example.com"', '"url": 5', "tests[0].inputs.url",
     "expected string, got 5"),
    ('"count": 2', '"cuont": 2', "tests[0].inputs.cuont",
     "unknown input; did you mean 'count'?"),
    ('"url": "https://example.com",', "", "tests[0].inputs.url", "required input is missing"),
], ids=["wrong-type", "unknown-input", "missing-required"])
def test_benchmark_inputs_not_matching_the_skill(vault: Vault, old: str, new: str, field: str,
                                                 phrase: str) -> None:
    vault.edit("leaf/benchmarks.json", old, new)
    assert_problem(validate(), "leaf/benchmarks.json", field, phrase)


def test_benchmark_expecting_failure_may_omit_inputs_but_not_name_unknown_ones(
        vault: Vault) -> None:
    bench = _benchmarks("leaf", {"count": "many"}, {"success": False, "error_contains": "url"})
    vault.write("leaf/benchmarks.json", bench)
    assert validate().code == 0  # missing url and mistyped count are the point of the test
    vault.write("leaf/benchmarks.json", bench.replace('"count"', '"cuont"'))
    assert_problem(validate(), "leaf/benchmarks.json", "tests[0].inputs.cuont",
                   "unknown input; did you mean 'count'?")


def test_benchmark_expected_naming_an_unknown_output(vault: Vault) -> None:
    vault.edit("leaf/benchmarks.json", '"title": "https', '"titel": "https')
    assert_problem(validate(), "leaf/benchmarks.json", "tests[0].expected.titel",
                   "'titel' is not an output of leaf")


def test_benchmarks_skill_name_mismatch(vault: Vault) -> None:
    vault.edit("leaf/benchmarks.json", '"skill": "leaf"', '"skill": "leaf-v2"')
    assert_problem(validate(), "leaf/benchmarks.json", "skill",
                   "is 'leaf-v2' but the skill is named 'leaf'")


def test_benchmarks_duplicate_test_id(vault: Vault) -> None:
    data = json.loads(LEAF_BENCH)
    data["tests"].append(dict(data["tests"][0]))
    vault.write("leaf/benchmarks.json", json.dumps(data))
    assert_problem(validate(), "leaf/benchmarks.json", "tests[1].id",
                   "test id 'test-001' is used twice")


def test_sub_skills_json_missing_a_called_skill(vault: Vault) -> None:
    vault.write("pipe/sub-skills.json", '{"sub_skills": []}\n')
    assert_problem(validate(), "pipe/sub-skills.json", "sub_skills",
                   "misses 'leaf', which a step calls; run `skillq sync pipe`")


def test_sub_skills_json_listing_an_extra_skill(vault: Vault) -> None:
    vault.write("helper/SKILL.md", HELPER_MD.format(name="helper", extra=""))
    vault.write("pipe/sub-skills.json",
                '{"sub_skills": [{"skill_id": "leaf"}, {"skill_id": "helper"}]}\n')
    assert_problem(validate(), "pipe/sub-skills.json", "sub_skills[1]",
                   "lists 'helper', which no step calls")


@pytest.mark.parametrize(("folder", "listed", "index"), [
    ("pipe", [{"skill_id": "leaf"}, {"skill_id": "ghost"}], 1),
    ("leaf", [{"skill_id": "ghost", "role": "summarise the page"}], 0),
], ids=["orchestrator", "leaf"])
def test_sub_skills_json_naming_an_unknown_skill(vault: Vault, folder: str,
                                                 listed: list[dict[str, str]],
                                                 index: int) -> None:
    vault.write(f"{folder}/sub-skills.json", json.dumps({"sub_skills": listed}))
    assert_problem(validate(), f"{folder}/sub-skills.json", f"sub_skills[{index}].skill_id",
                   "no skill 'ghost' in this vault")


# --- reading SKILL.md ------------------------------------------------------------------


def test_skill_md_not_utf8(vault: Vault) -> None:
    vault.write("leaf/SKILL.md", LEAF_MD.replace("web page", "caf\udce9", 1)
                .encode("utf-8", "surrogateescape"))
    result = validate()
    assert_problem(result, "leaf/SKILL.md", "(file)", "is not UTF-8 text (byte 0xe9")
    # the orchestrator calling the unreadable skill is not blamed for it
    assert problems_outside(result, "leaf") == []


def test_frontmatter_that_is_a_list(vault: Vault) -> None:
    vault.write("leaf/SKILL.md", "---\n- name: leaf\n- description: x\n---\nbody\n")
    assert_problem(validate(), "leaf/SKILL.md", "frontmatter",
                   "must be a YAML mapping of `field: value` lines, not a list", line=2)


def test_frontmatter_not_closed(vault: Vault) -> None:
    vault.edit("leaf/SKILL.md", "---\n\n# leaf", "\n# leaf")
    assert_problem(validate(), "leaf/SKILL.md", "frontmatter",
                   "frontmatter is not closed: add a '---' line")


def test_skill_md_without_frontmatter(vault: Vault) -> None:
    vault.write("leaf/SKILL.md", "# leaf\n\nNo frontmatter.\n")
    assert_problem(validate(), "leaf/SKILL.md", "frontmatter", "must start with a '---' line",
                   line=1)


@pytest.mark.parametrize(("old", "new", "phrase"), [
    (f"description: {LEAF_DESCRIPTION}", "description: Fetch: one page",
     "invalid YAML: mapping values are not allowed"),
    ("  timeout: 30", "\ttimeout: 30", "invalid YAML"),
    ("  - name: url", "  - name: url\n     bad: indent", "invalid YAML"),
], ids=["colon-in-value", "tab-indent", "bad-indent"])
def test_invalid_yaml_syntax_names_the_line(vault: Vault, old: str, new: str,
                                            phrase: str) -> None:
    vault.edit("leaf/SKILL.md", old, new)
    assert_problem(validate(), "leaf/SKILL.md", "frontmatter", phrase,
                   line=vault.line_of("leaf/SKILL.md", new.splitlines()[-1].strip()))


def test_unclosed_flow_list_names_the_line_of_the_bracket(vault: Vault) -> None:
    vault.edit("leaf/SKILL.md", "version: 1", "version: [1")
    result = validate()
    bracket = vault.line_of("leaf/SKILL.md", "version: [1")
    line = assert_problem(result, "leaf/SKILL.md", "frontmatter", "invalid YAML")
    assert line.startswith(f"leaf/SKILL.md:{bracket}:") or f"line {bracket}" in line, line


@pytest.mark.parametrize(("old", "new", "key"), [
    ("version: 1", "version: 1\nversion: 2", "version"),
    ("timeout: 30", "timeout: 30\n  timeout: 40", "run.timeout"),
])
def test_duplicate_yaml_key_names_the_line(vault: Vault, old: str, new: str, key: str) -> None:
    vault.edit("leaf/SKILL.md", old, new)
    assert_problem(validate(), "leaf/SKILL.md", "frontmatter", f"duplicate key '{key}'",
                   line=vault.line_of("leaf/SKILL.md", new.splitlines()[1].strip()))


def test_yaml_tag_is_refused(vault: Vault) -> None:
    vault.edit("leaf/SKILL.md", "default: 3", "default: !!python/object 3")
    assert_problem(validate(), "leaf/SKILL.md", "frontmatter", "is not supported: remove it",
                   line=vault.line_of("leaf/SKILL.md", "!!python"))


@pytest.mark.parametrize(("old", "new", "field"), [
    ("required: true", "required: yes", "inputs[0].required"),
    ("enabled: false", "enabled: no", "cache.enabled"),
    ("enabled: false", "enabled: off", "cache.enabled"),
])
def test_yes_no_is_not_a_boolean(vault: Vault, old: str, new: str, field: str) -> None:
    vault.edit("leaf/SKILL.md", old, new)
    line = assert_problem(validate(), "leaf/SKILL.md", field, "must be true or false",
                          line=vault.line_of("leaf/SKILL.md", new))
    assert "only true/false" in line


def test_yes_stays_text_in_a_text_field(vault: Vault) -> None:
    vault.edit("leaf/SKILL.md", "version: 1", "version: 1\nlabel: yes")
    assert validate().code == 0


# --- the two-file (Agent Skills) form --------------------------------------------------


def test_agentskills_form_of_the_base_vault_is_valid(vault: Vault) -> None:
    vault.as_agentskills()
    assert "run:" in vault.read("leaf/skill.yaml")
    assert validate().code == 0


def test_execution_field_in_skill_md_beside_skill_yaml(vault: Vault) -> None:
    vault.as_agentskills()
    vault.edit("leaf/SKILL.md", "name: leaf\n", "name: leaf\nlabel: Leaf\n")
    assert_problem(validate(), "leaf/SKILL.md", "label",
                   "beside a skill.yaml, SKILL.md holds only the Agent Skills fields; move this "
                   "field to skill.yaml", line=3)


def test_spec_field_inside_skill_yaml(vault: Vault) -> None:
    vault.as_agentskills()
    vault.write("leaf/skill.yaml", "license: MIT\n" + vault.read("leaf/skill.yaml"))
    assert_problem(validate(), "leaf/skill.yaml", "license",
                   "is an Agent Skills field; it belongs in SKILL.md's frontmatter", line=1)


def test_problem_in_skill_yaml_names_skill_yaml(vault: Vault) -> None:
    vault.as_agentskills()
    vault.edit("leaf/skill.yaml", "timeout: 30", "timout: 30")
    assert_problem(validate(), "leaf/skill.yaml", "run.timout", "did you mean 'timeout'?",
                   line=vault.line_of("leaf/skill.yaml", "timout"))


def test_invalid_skill_yaml_does_not_blame_the_callers(vault: Vault) -> None:
    vault.as_agentskills()
    vault.write("leaf/skill.yaml", vault.read("leaf/skill.yaml") + "broken: [\n")
    result = validate()
    assert_problem(result, "leaf/skill.yaml", "(file)", "invalid YAML")
    assert problems_outside(result, "leaf") == []


# --- the vault -------------------------------------------------------------------------


def test_folder_without_skill_md(vault: Vault) -> None:
    vault.write("notes/readme.txt", "not a skill\n")
    assert_problem(validate(), "notes", "SKILL.md", "missing; every folder in a vault is a skill")


def test_hidden_and_cache_folders_are_not_skills(vault: Vault) -> None:
    vault.write(".git/config", "")
    vault.write("__pycache__/x.pyc", "")
    assert validate().code == 0


def test_validating_one_folder_reports_only_its_problems(vault: Vault) -> None:
    vault.edit("leaf/SKILL.md", "command: python3 main.py", "command: python3 mian.py")
    vault.edit("pipe/SKILL.md", "on_failure: skip", "on_failure: ignore")
    whole = validate()
    assert any(p.startswith("leaf/") for p in whole.problem_lines)
    assert any(p.startswith("pipe/") for p in whole.problem_lines)
    for folder in ("leaf", "pipe"):
        alone = validate(folder)
        assert alone.code == 1
        assert alone.problem_lines, alone.stdout
        assert problems_outside(alone, folder) == [], alone.stdout
        assert "in 1 skill folder(s) checked" in alone.stdout
    leaf_alone = validate("leaf/SKILL.md")  # the file names its folder
    assert leaf_alone.problem_lines == validate("leaf").problem_lines


def test_validating_a_valid_folder_of_an_invalid_vault_passes(vault: Vault) -> None:
    vault.edit("pipe/SKILL.md", "on_failure: skip", "on_failure: ignore")
    result = validate("leaf")
    assert result.code == 0, result.stdout
    assert "✓ 1 skill(s) valid" in result.stdout


def test_every_problem_in_one_pass(vault: Vault) -> None:
    """Four unrelated problems in one orchestrator: all four in a single run."""
    vault.edit("pipe/SKILL.md", "version: 1", "version: 1\nlable: Reading list")
    vault.edit("pipe/SKILL.md", "on_failure: skip", "on_failure: ignore")
    vault.edit("pipe/SKILL.md", "steps:\n", "run:\n  command: python3 ../leaf/main.py\nsteps:\n")
    vault.edit("pipe/SKILL.md", "skill: leaf\n    with", "skill: summariser\n    with")
    vault.write("pipe/sub-skills.json",
                '{"sub_skills": [{"skill_id": "leaf"}, {"skill_id": "summariser"}]}\n')
    result = validate()
    assert_problem(result, "pipe/SKILL.md", "lable", "did you mean 'label'?")
    assert_problem(result, "pipe/SKILL.md", "steps[0].on_failure", "'ignore' is not allowed")
    assert_problem(result, "pipe/SKILL.md", "run.command", "reaches outside the skill folder")
    assert_problem(result, "pipe/SKILL.md", "steps[1].skill", "no skill 'summariser'")
    assert_problem(result, "pipe/SKILL.md", "steps", "either run (a script leaf) or steps")


def test_every_problem_in_one_pass_in_a_leaf(vault: Vault) -> None:
    vault.edit("leaf/SKILL.md", "version: 1", "version: 1\nlable: Leaf")
    vault.edit("leaf/SKILL.md", "command: python3 main.py", "command: python3 main.py | wc")
    vault.edit("leaf/SKILL.md", "default: 3", "default: three")
    vault.edit("leaf/SKILL.md", "retries: 1", "retries: many")
    result = validate()
    assert_problem(result, "leaf/SKILL.md", "lable", "did you mean 'label'?")
    assert_problem(result, "leaf/SKILL.md", "run.command", "shell syntax")
    assert_problem(result, "leaf/SKILL.md", "inputs[1].default", "does not fit type")
    assert_problem(result, "leaf/SKILL.md", "run.retries", "must be a whole number")


@pytest.mark.parametrize(("old", "new", "field", "phrase"), [
    ("type: integer\n    default: 3", "type: intgr\n    default: 3", "inputs[1].type",
     "unknown type"),
    (f"description: {LEAF_DESCRIPTION}\n", "", "description", "required field is missing"),
], ids=["unknown-type", "missing-description"])
def test_one_broken_field_does_not_hide_other_problems(vault: Vault, old: str, new: str,
                                                       field: str, phrase: str) -> None:
    vault.edit("leaf/SKILL.md", old, new)
    vault.edit("leaf/SKILL.md", "command: python3 main.py", "command: python3 ../x.py")
    result = validate()
    assert_problem(result, "leaf/SKILL.md", field, phrase)
    assert_problem(result, "leaf/SKILL.md", "run.command", "reaches outside")


# --- the console script: exit codes and no tracebacks -----------------------------------

BreakFn = Callable[[Vault], None]
# id: (break the base vault, file, line or None, field, phrase)
SUBPROCESS_CASES: dict[str, tuple[BreakFn, str, int | None, str, str]] = {
    "unknown-field": (lambda v: v.edit("leaf/SKILL.md", "inputs:", "inptus:"),
                      "leaf/SKILL.md", 5, "inptus", "did you mean 'inputs'?"),
    "step-cycle": (lambda v: v.edit("pipe/SKILL.md", "url: ${item}",
                                    "url: ${item}\n      count: ${steps.summary.outputs.words}"),
                   "pipe/SKILL.md", 20, "steps[0]", "fetch -> summary -> fetch"),
    "bad-json": (lambda v: v.write("leaf/benchmarks.json", '{\n  "skill": "leaf",,\n}\n'),
                 "leaf/benchmarks.json", 2, "(file)", "is not valid JSON"),
    "not-utf8": (lambda v: v.write("leaf/SKILL.md", b"---\nname: leaf\ndescription: caf\xe9\n"
                                   b"---\n"), "leaf/SKILL.md", None, "(file)", "not UTF-8"),
    "invalid-yaml": (lambda v: v.edit("leaf/SKILL.md", "version: 1", "version: 1: 2"),
                     "leaf/SKILL.md", 4, "frontmatter", "invalid YAML"),
    "type-mismatch": (lambda v: v.edit("pipe/SKILL.md", "url: ${inputs.label}",
                                       "url: ${inputs.urls}"),
                      "pipe/SKILL.md", 29, "steps[1].with.url", "passes string[]"),
    "missing-skill-md": (lambda v: v.write("notes/readme.txt", "x"), "notes", None, "SKILL.md",
                         "missing"),
}


@pytest.mark.parametrize("case", list(SUBPROCESS_CASES))
def test_console_script_reports_the_problem(tmp_path: Path, case: str) -> None:
    root = tmp_path / "vault"
    root.mkdir()
    breaker, file, line, field, phrase = SUBPROCESS_CASES[case]
    breaker(Vault(root))
    assert_problem(validate_subprocess(root, "."), file, field, phrase, line=line)


def test_console_script_validates_a_vault_given_by_path(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    root.mkdir()
    Vault(root).edit("leaf/SKILL.md", "inputs:", "inptus:")
    result = validate_subprocess(tmp_path, "vault")
    assert_problem(result, "vault/leaf/SKILL.md", "inptus", "did you mean 'inputs'?")


@pytest.mark.parametrize(("args", "phrase"), [
    (["does-not-exist"], "does not exist"),
    (["--bogus", "."], "No such option: --bogus"),
    ([".", "--spec", "nonsense"], "Invalid value for '--spec'"),
], ids=["missing-path", "unknown-option", "bad-choice"])
def test_usage_errors_exit_2_without_a_traceback(tmp_path: Path, args: list[str],
                                                 phrase: str) -> None:
    result = validate_subprocess(tmp_path, *args)
    assert result.code == 2, result.stdout + result.stderr
    assert phrase in result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_an_agent_step_cannot_declare_a_file_output(vault: Vault) -> None:
    vault.write("scribe/SKILL.md", """\
---
name: scribe
description: Write a short report. Use it when a pipeline needs a report.
version: 1
approach: agent
outputs:
  - name: report
    type: file
---

Write the report.
""")
    assert_problem(validate(), "scribe/SKILL.md", "outputs[0].type",
                   "an agent step cannot return a file ('report')", line=8)
