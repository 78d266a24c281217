"""Input no run record can hold (issue 40, item 3), refused at the door, without services.

PostgreSQL's text and jsonb hold no NUL character and no lone surrogate (what Python
makes of argv bytes that are not UTF-8, or of a JSON "\\ud800" escape), and JSON no NaN.
Every way into a run is checked here at its pure seam: `--input` and `--inputs-file`
(parse_cli_inputs, which `skillq run`, `skillq schedule add` and the local API use), the
dashboard's form (parse_form), MCP's run_skill and a skill's test cases (local_paths),
an agent's execute_skill and every other run (resolve_inputs, through create_run), a
script step's outputs (run_script), a skill's own files (load_skill), and the thin
client's request to the local API. Through the real CLI, API, dashboard, MCP server and
workers: tests/integration/test_unstorable_paths.py.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.api.apifile import ApiInfo
from orchestrator.cli.run_client import Client, Unreachable
from orchestrator.dashboard.run_form import parse_form
from shared.checks import check_skill
from shared.errors import InputError
from shared.inputs import local_paths, parse_cli_inputs, resolve_inputs
from shared.manifest import Manifest
from shared.skill import load_skill
from shared.valuetypes import ValueType, type_error
from workers.script_executor import run_script

NUL = "contains a NUL byte (\\u0000), which cannot be stored; remove it"


@pytest.fixture(scope="module")
def manifest() -> Manifest:
    return Manifest.model_validate({
        "name": "digest", "description": "Digest some pages. Use it for tests.",
        "inputs": [{"name": "title", "type": "string", "required": True},
                   {"name": "tags", "type": "string[]"},
                   {"name": "opts", "type": "object"},
                   {"name": "doc", "type": "file"},
                   {"name": "repo", "type": "directory"}]})


def refused(call: Any, *args: Any, **kw: Any) -> list[str]:
    with pytest.raises(InputError) as info:
        call(*args, **kw)
    lines = [str(p) for p in info.value.problems]
    for line in lines:  # what a terminal and the local API's JSON answer carry
        assert "\x00" not in line and not any(0xD800 <= ord(c) <= 0xDFFF for c in line), line
    return lines


# --- --input and --inputs-file (skillq run, schedule add, the local API) --------------


def test_a_nul_in_an_input_file_string_is_refused_naming_the_file_and_input(
        manifest: Manifest, tmp_path: Path) -> None:
    path = tmp_path / "in.json"
    path.write_text(json.dumps({"title": "a\x00b"}), encoding="utf-8")
    [line] = refused(parse_cli_inputs, manifest, [], path)
    assert line.endswith(f"in.json: title: {NUL}"), line


@pytest.mark.parametrize(("data", "message"), [
    ({"title": "T", "tags": ["ok", "b\x00"]}, f"tags: at [1]: {NUL}"),
    ({"title": "T", "opts": {"deep": {"list": [1, "\x00"]}}}, f"opts: at deep.list[1]: {NUL}"),
    ({"title": "T", "opts": {"k\x00": 1}},
     f"opts: key 'k\\u0000': {NUL}"),
    ({"title": "T", "opts": {"n": float("nan")}},
     "opts: at n: is NaN, which JSON cannot hold; give a finite number"),
    ({"title": "T", "ti\x00tle": "x"}, f"'ti\\u0000tle': {NUL}"),
    ({"title": "T", "doc": "a\x00b"},
     "doc: contains a NUL byte (\\u0000), which no path holds; remove it"),
    ({"title": "T", "repo": "a\x00b"},
     "repo: contains a NUL byte (\\u0000), which no path holds; remove it"),
])
def test_a_nul_anywhere_in_a_value_or_key_is_refused_where_it_is(
        manifest: Manifest, tmp_path: Path, data: dict[str, Any], message: str) -> None:
    path = tmp_path / "in.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    lines = refused(parse_cli_inputs, manifest, [], path)
    assert any(line.endswith(f"in.json: {message}") for line in lines), lines


@pytest.mark.parametrize(("pair", "message"), [
    ('tags=["a", "b\\u0000"]', f"--input: tags: at [1]: {NUL} (declared type string[])"),
    ('opts={"a\\u0000": 1}', f"--input: opts: key 'a\\u0000': {NUL} (declared type object)"),
    ('opts={"a": {"b": "\\u0000"}}', f"--input: opts: at a.b: {NUL} (declared type object)"),
    ("title=caf\udce9", "--input: title: is not valid UTF-8 (byte 0xe9 at character 4), "
     "which cannot be stored; give UTF-8 text"),
    ("ti\udcfftle=x", "--input: 'ti\\udcfftle': is not valid UTF-8 (byte 0xff at character "
     "3), which cannot be stored; give UTF-8 text"),
    ('tags=["\\ud800"]', "--input: tags: at [0]: contains a lone surrogate (\\ud800), not "
     "text, which cannot be stored; remove it (declared type string[])"),
    ('doc=["a\\u0000b"]', None),  # one file given a list: a type error, not a crash
    ("doc=a\x00b", "--input: doc: contains a NUL byte (\\u0000), which no path holds; "
     "remove it"),
    ("repo=\ud800", "--input: repo: contains a lone surrogate (\\ud800), not text, which no "
     "path holds; remove it"),
    ("opts=" + "[" * 100_000, "--input: opts: is JSON nested too deeply to read; flatten "
     "it (declared type object)"),
])
def test_command_line_values_that_cannot_be_stored_are_refused_before_anything_else(
        manifest: Manifest, pair: str, message: str | None) -> None:
    lines = refused(parse_cli_inputs, manifest, ["title=T", pair])
    assert message is None or lines == [message], lines


def test_an_inputs_file_too_deep_or_with_a_huge_number_is_a_problem_not_a_crash(
        manifest: Manifest, tmp_path: Path) -> None:
    deep, digits = tmp_path / "deep.json", tmp_path / "digits.json"
    deep.write_text("[" * 100_000, encoding="utf-8")
    digits.write_text('{"title": ' + "1" * 5000 + "}", encoding="utf-8")
    assert refused(parse_cli_inputs, manifest, [], deep)[0].endswith(
        "deep.json: (file): is JSON nested too deeply to read; flatten it")
    assert refused(parse_cli_inputs, manifest, [], digits)[0].endswith(
        "digits.json: (file): holds a number of more than 4,300 digits, which skillq does "
        "not read; give a shorter one")


def test_a_file_or_folder_whose_path_is_not_utf8_is_refused_naming_it(
        manifest: Manifest, tmp_path: Path) -> None:
    name = os.fsdecode(b"caf\xe9.txt")  # as argv gives it: surrogateescape
    (tmp_path / name).write_bytes(b"data")
    assert refused(parse_cli_inputs, manifest, ["title=T", f"doc={name}"],
                   files_from=tmp_path) == [
        "--input: doc: is not valid UTF-8 (byte 0xe9 at character 4), which cannot be "
        "stored; give a path in UTF-8 (rename the file or folder)"]
    # Reached through a link (or from a folder not named in UTF-8): named, not stored.
    folder = tmp_path / os.fsdecode(b"d\xe9p\xf4t")
    folder.mkdir()
    (tmp_path / "link").symlink_to(folder)
    [line] = refused(parse_cli_inputs, manifest, ["title=T", "repo=link"],
                     files_from=tmp_path)
    assert line.startswith("--input: repo: folder 'link' is at ") and line.endswith(
        "a path that is not UTF-8, which a run's record cannot hold; give a folder whose "
        "path is UTF-8"), line


# --- the other doors: the dashboard, MCP and test cases, every run --------------------


def test_the_dashboard_form_refuses_a_nul_with_the_clis_message(manifest: Manifest) -> None:
    assert refused(parse_form, manifest, {"title": "a\x00b"}) == [f"--input: title: {NUL}"]
    assert refused(parse_form, manifest, {"title": "T", "tags": '["\\u0000"]'}) == [
        f"--input: tags: at [0]: {NUL} (declared type string[])"]


@pytest.mark.parametrize("given", [
    {"$local": "/etc/passwd", "name": "passwd", "size": 1},
    {"$dir": "/etc", "device": "m-1", "host": "h"},
])
def test_the_dashboard_form_takes_no_file_or_folder_of_its_machine_in_skillqs_own_form(
        manifest: Manifest, given: dict[str, Any]) -> None:
    key = "doc" if "$local" in given else "repo"
    lines = refused(parse_form, manifest, {"title": "T", key: json.dumps(given)})
    assert lines and all("not a path on this machine" in line for line in lines), lines


def test_mcp_and_test_cases_refuse_a_nul_naming_the_input(manifest: Manifest,
                                                           tmp_path: Path) -> None:
    # MCP's run_skill and `skillq test` both read JSON values through local_paths.
    assert refused(local_paths, manifest, {"title": "ok", "opts": {"a": ["\x00"]}},
                   tmp_path, origin="run_skill") == [f"run_skill: opts: at a[0]: {NUL}"]
    assert refused(local_paths, manifest, {"title": "x\ud800"}, tmp_path) == [
        "inputs: title: contains a lone surrogate (\\ud800), not text, which cannot be "
        "stored; remove it"]
    assert refused(local_paths, manifest, {"title": "T", "doc": "a\x00"}, tmp_path) == [
        "inputs: doc: contains a NUL byte (\\u0000), which no path holds; remove it"]


@pytest.mark.parametrize(("given", "message"), [
    ({"title": "a\x00b"}, f"digest.title: {NUL}"),
    ({"title": "T", "tags": ["\x00"]}, f"digest.tags: at [0]: {NUL}"),
    ({"title": "T", "opts": {"\x00": 1}}, f"digest.opts: key '\\u0000': {NUL}"),
    ({"title": "T", "doc": {"$ref": "sha256:" + "0" * 64, "name": "a\x00", "size": 1}},
     f"digest.doc: at name: {NUL}"),
    ({"title": "T", "t\x00": 1},
     "digest.'t\\u0000': unknown input; digest takes: title, tags, opts, doc, repo"),
])
def test_every_run_passes_the_one_check_an_agents_execute_skill_included(
        manifest: Manifest, given: dict[str, Any], message: str) -> None:
    # lifecycle/submit.py create_run, which every run goes through (an agent step's
    # execute_skill, a nested run, a schedule firing), calls resolve_inputs.
    assert refused(resolve_inputs, manifest, given, origin="execute_skill") == [
        f"execute_skill: {message}"]


def test_type_error_says_what_cannot_be_stored_once_the_type_fits() -> None:
    assert type_error("a\x00", ValueType("string")) == NUL
    assert type_error([1, 2], ValueType("string")) == "expected string, got [1, 2]"
    assert type_error({"x": [float("inf")]}, ValueType("object")) == \
        "at x[0]: is Infinity, which JSON cannot hold; give a finite number"
    assert type_error("\U0001f600 ok", ValueType("string")) is None


# --- a skill's own files ----------------------------------------------------------------


def write_skill(root: Path, frontmatter: str, benchmarks: dict[str, Any] | None = None) -> Path:
    folder = root / "demo"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\n" + frontmatter + "---\n\n# demo\n", "utf-8")
    (folder / "main.py").write_text("print('{}')\n", "utf-8")
    if benchmarks is not None:
        (folder / "benchmarks.json").write_text(json.dumps(benchmarks), "utf-8")
    return folder


FRONT = """\
name: demo
description: "Echo a title. Use it for tests."
version: 1
inputs:
  - name: title
    type: string
    required: true
outputs:
  - name: title
    type: string
run:
  command: python3 main.py
"""


def bench(case: dict[str, Any]) -> dict[str, Any]:
    return {"skill": "demo", "version": 1, "tests": [case]}


def test_a_test_case_expecting_success_with_a_nul_input_is_invalid(tmp_path: Path) -> None:
    folder = write_skill(tmp_path, FRONT, bench({
        "id": "nul", "inputs": {"title": "a\x00b"}, "expected": {"success": True}}))
    skill, problems = load_skill(folder)
    assert skill is not None and not problems
    found = [str(p) for p in check_skill(skill)]
    assert any(p.endswith(f"benchmarks.json: tests[0].inputs.title: {NUL}")
               for p in found), found


def test_a_case_expecting_its_nul_input_refused_may_say_so(tmp_path: Path) -> None:
    folder = write_skill(tmp_path, FRONT, bench({
        "id": "nul", "inputs": {"title": "a\x00b"}, "expected": {"success": False}}))
    skill, problems = load_skill(folder)
    assert skill is not None and skill.benchmarks is not None
    assert not problems and not check_skill(skill)
    with pytest.raises(InputError):  # what `skillq test` records for the case: refused
        local_paths(skill.manifest, skill.benchmarks.tests[0].inputs, folder)


def test_a_nul_elsewhere_in_benchmarks_json_is_a_problem_naming_the_field(
        tmp_path: Path) -> None:
    folder = write_skill(tmp_path, FRONT, bench({
        "id": "a\x00", "inputs": {"title": "x"}, "expected": {"success": True}}))
    _, problems = load_skill(folder)
    assert [str(p).split("benchmarks.json: ")[1] for p in problems] == [f"tests[0].id: {NUL}"]


@pytest.mark.parametrize("line", ['default: "a\\0b"', 'default: "\\x00"', 'description: "\\0"'])
def test_a_nul_escape_in_the_frontmatter_is_refused_at_its_line(tmp_path: Path,
                                                                line: str) -> None:
    front = FRONT.replace("    required: true\n", f"    required: false\n    {line}\n")
    _, problems = load_skill(write_skill(tmp_path, front))
    assert [(p.field, p.line) for p in problems] == [("frontmatter", 9)], problems
    assert "holds a NUL byte" in problems[0].message


# --- a script step's outputs ------------------------------------------------------------


@pytest.mark.parametrize("via", ["file", "stdout"])
def test_a_script_output_holding_a_nul_is_a_clear_step_failure(tmp_path: Path,
                                                               via: str) -> None:
    folder = tmp_path / "demo"
    folder.mkdir()
    emit = ('open(os.environ["SKILL_OUTPUT"], "w").write(\'{"title": "a\\\\u0000b"}\')'
            if via == "file" else 'print(\'{"title": "a\\\\u0000b"}\')')
    (folder / "main.py").write_text(f"import os\n{emit}\n", encoding="utf-8")
    manifest = Manifest.model_validate({
        "name": "demo", "description": "A test skill.",
        "outputs": [{"name": "title", "type": "string"}],
        "run": {"command": f"{shlex.quote(sys.executable)} main.py", "timeout": 5}})
    result = run_script(folder, manifest, {}, secrets={}, timeout_s=10,
                        max_output_bytes=64 * 1024)
    assert (result.status, result.outputs) == ("bad_output", None), result
    assert result.error == f"output 'title': {NUL}"


def test_nul_bytes_a_script_prints_are_logged_as_u_fffd(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    folder.mkdir()
    (folder / "main.py").write_text(
        "import sys\nsys.stderr.buffer.write(b'e\\x00\\n')\n"
        "sys.stdout.buffer.write(b'o\\x00\\n{\"title\": \"ok\"}\\n')\n", encoding="utf-8")
    manifest = Manifest.model_validate({
        "name": "demo", "description": "A test skill.",
        "outputs": [{"name": "title", "type": "string"}],
        "run": {"command": f"{shlex.quote(sys.executable)} main.py", "timeout": 5}})
    result = run_script(folder, manifest, {}, secrets={}, timeout_s=10,
                        max_output_bytes=64 * 1024)
    assert (result.status, result.outputs) == ("success", {"title": "ok"}), result
    assert (result.stdout_tail, result.stderr_tail) == ('o\ufffd\n{"title": "ok"}\n',
                                                        "e\ufffd\n")


# --- the thin client -------------------------------------------------------------------


def test_the_thin_client_sends_nothing_that_is_not_utf8_and_takes_the_direct_path() -> None:
    client = Client(ApiInfo(port=9, token="t", pid=os.getpid(), endpoints="e"))
    with pytest.raises(Unreachable) as info:  # before any connection is tried
        client.call("POST", "/v1/runs", {"pairs": ["title=caf\udce9"]})
    assert not info.value.sent
