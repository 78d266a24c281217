"""Inputs as a user types them, references, value types, skill YAML and graph order."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from shared.errors import InputError
from shared.graph import cycle_text, find_cycle
from shared.inputs import parse_cli_inputs, resolve_inputs
from shared.manifest import Manifest
from shared.refs import Ref, RefSyntaxError, parse_ref, parse_template
from shared.valuetypes import compatible, from_text, parse_type, type_error
from shared.yamlload import YamlProblem, core_scalar, load_mapping

# --- inputs ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def manifest() -> Manifest:
    return Manifest.model_validate({
        "name": "digest",
        "description": "Digest some pages. Use it for tests.",
        "inputs": [
            {"name": "title", "type": "string", "required": True},
            {"name": "days", "type": "integer", "default": 7},
            {"name": "ratio", "type": "number"},
            {"name": "flag", "type": "boolean", "default": False},
            {"name": "urls", "type": "string[]"},
            {"name": "opts", "type": "object"},
            {"name": "grid", "type": "integer[][]"},
        ],
    })


def parse(manifest: Manifest, *pairs: str, inputs_file: Path | None = None) -> dict[str, Any]:
    return parse_cli_inputs(manifest, ["title=T", *pairs], inputs_file)


def refused(manifest: Manifest, *pairs: str, inputs_file: Path | None = None,
            with_title: bool = True) -> list[str]:
    """Every problem line of an InputError (the call must fail)."""
    given = ["title=T", *pairs] if with_title else list(pairs)
    with pytest.raises(InputError) as info:
        parse_cli_inputs(manifest, given, inputs_file)
    lines = [str(p) for p in info.value.problems]
    assert lines, "an InputError must carry at least one problem"
    assert str(info.value) == "\n".join(lines)
    return lines


def test_integer_from_text(manifest: Manifest) -> None:
    got = parse(manifest, "days=14")
    assert got["days"] == 14
    assert type(got["days"]) is int


def test_number_from_text(manifest: Manifest) -> None:
    assert parse(manifest, "ratio=1.5")["ratio"] == 1.5
    assert parse(manifest, "ratio=2")["ratio"] == 2
    assert parse(manifest, "ratio=1e3")["ratio"] == 1000.0


@pytest.mark.parametrize(("text", "value"), [
    ("true", True), ("false", False), ("yes", True), ("no", False), ("TRUE", True),
    ("on", True), ("off", False), ("1", True), ("0", False),
])
def test_boolean_from_text(manifest: Manifest, text: str, value: bool) -> None:
    assert parse(manifest, f"flag={text}")["flag"] is value


def test_string_keeps_the_text_after_the_first_equals(manifest: Manifest) -> None:
    assert parse_cli_inputs(manifest, ["title=a=b c"])["title"] == "a=b c"
    assert parse_cli_inputs(manifest, ["title="])["title"] == ""


def test_json_list_for_an_array(manifest: Manifest) -> None:
    assert parse(manifest, 'urls=["a","b"]')["urls"] == ["a", "b"]


def test_repeated_input_appends_to_an_array(manifest: Manifest) -> None:
    assert parse(manifest, "urls=a", "urls=b")["urls"] == ["a", "b"]
    assert parse(manifest, 'urls=["a"]', "urls=b", 'urls=["c","d"]')["urls"] == ["a", "b", "c",
                                                                                "d"]


def test_repeated_scalar_input_is_refused(manifest: Manifest) -> None:
    (line,) = refused(manifest, "days=1", "days=2")
    assert "days" in line
    assert "given twice" in line


def test_nested_arrays_from_json(manifest: Manifest) -> None:
    assert parse(manifest, "grid=[[1, 2], [3]]")["grid"] == [[1, 2], [3]]
    (line,) = refused(manifest, "grid=[1]")
    assert "grid" in line
    assert "integer[][]" in line


def test_object_from_json(manifest: Manifest) -> None:
    assert parse(manifest, 'opts={"depth": 2, "tags": ["x"]}')["opts"] == {"depth": 2,
                                                                           "tags": ["x"]}


def test_bad_json_names_the_input(manifest: Manifest) -> None:
    (line,) = refused(manifest, 'opts={"depth": 2')
    assert line.startswith("--input: opts: ")
    assert "is not valid JSON" in line
    assert "column" in line


def test_object_input_needs_json(manifest: Manifest) -> None:
    (line,) = refused(manifest, "opts=depth")
    assert "opts" in line
    assert "JSON object" in line


@pytest.mark.parametrize(("pair", "name", "declared"), [
    ("days=seven", "days", "integer"),
    ("days=1.5", "days", "integer"),
    ("ratio=abc", "ratio", "number"),
    ("ratio=nan", "ratio", "number"),
    ("flag=maybe", "flag", "boolean"),
    ("urls=[1, 2]", "urls", "string[]"),
    ('urls={"a": 1}', "urls", "string[]"),
    ("opts=[1]", "opts", "object"),
])
def test_wrong_type_names_the_input_and_the_declared_type(manifest: Manifest, pair: str,
                                                          name: str, declared: str) -> None:
    (line,) = refused(manifest, pair)
    assert line.startswith(f"--input: {name}: "), line
    assert f"(declared type {declared})" in line


def test_every_bad_input_is_reported_at_once(manifest: Manifest) -> None:
    lines = refused(manifest, "days=x", "ratio=y", "flag=z")
    assert [line.split(": ")[1] for line in lines] == ["days", "ratio", "flag"]


def test_missing_required_input(manifest: Manifest) -> None:
    (line,) = refused(manifest, "days=3", with_title=False)
    assert "title" in line
    assert "required input is missing (string)" in line
    assert "--input title=VALUE" in line


def test_unknown_input_suggests_the_close_one(manifest: Manifest) -> None:
    (line,) = refused(manifest, "dyas=3")
    assert "dyas" in line
    assert "unknown input; did you mean 'days'?" in line


def test_unknown_input_without_a_close_one_lists_the_inputs(manifest: Manifest) -> None:
    (line,) = refused(manifest, "zzzzzz=3")
    assert "digest takes: title, days, ratio, flag, urls, opts, grid" in line


def test_pair_without_equals_is_refused(manifest: Manifest) -> None:
    (line,) = refused(manifest, "days")
    assert "write --input NAME=VALUE" in line


def test_defaults_are_applied(manifest: Manifest) -> None:
    assert parse_cli_inputs(manifest, ["title=T"]) == {"title": "T", "days": 7, "flag": False}


def test_given_value_beats_the_default(manifest: Manifest) -> None:
    assert parse(manifest, "days=1", "flag=true") == {"title": "T", "days": 1, "flag": True}


def test_inputs_file_merged_under_cli_inputs(manifest: Manifest, tmp_path: Path) -> None:
    path = tmp_path / "inputs.json"
    path.write_text(json.dumps({"title": "from file", "days": 3, "urls": ["f"],
                                "opts": {"a": 1}}))
    got = parse_cli_inputs(manifest, ["days=5", "urls=c"], path)
    assert got == {"title": "from file", "days": 5, "urls": ["c"], "opts": {"a": 1},
                   "flag": False}


def test_inputs_file_values_are_checked(manifest: Manifest, tmp_path: Path) -> None:
    path = tmp_path / "inputs.json"
    path.write_text(json.dumps({"title": "T", "days": "3", "dayz": 1}))
    with pytest.raises(InputError) as info:
        parse_cli_inputs(manifest, [], path)
    text = str(info.value)
    assert "days: expected integer, got \"3\"" in text
    assert "dayz: unknown input; did you mean 'days'?" in text


@pytest.mark.parametrize(("content", "phrase"), [
    ("[1, 2]", "must hold one JSON object of input values"),
    ('{"title": ', "is not a UTF-8 JSON file"),
    (b"{\"title\": \"caf\xe9\"}", "is not a UTF-8 JSON file"),
    (None, "does not exist"),
], ids=["not-an-object", "invalid-json", "not-utf8", "missing"])
def test_bad_inputs_file_names_the_file(manifest: Manifest, tmp_path: Path,
                                        content: str | bytes | None, phrase: str) -> None:
    path = tmp_path / "my-inputs.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(InputError) as info:
        parse_cli_inputs(manifest, ["title=T"], path)
    (problem,) = info.value.problems
    assert problem.path.endswith("my-inputs.json")
    assert phrase in problem.message


def test_inputs_file_that_is_a_folder_is_an_input_error(manifest: Manifest,
                                                        tmp_path: Path) -> None:
    with pytest.raises(InputError):
        parse_cli_inputs(manifest, ["title=T"], tmp_path)


def test_resolve_inputs_reports_every_problem(manifest: Manifest) -> None:
    with pytest.raises(InputError) as info:
        resolve_inputs(manifest, {"days": True, "urls": "a"})
    text = str(info.value)
    assert "days: expected integer, got true" in text
    assert "urls: expected string[] (a JSON list)" in text
    assert "title: required input is missing" in text


# --- references ------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "kind", "name", "path"), [
    ("${inputs.repos}", "input", "repos", ()),
    ("${inputs.cfg.depth}", "input", "cfg", ("depth",)),
    ("${repos}", "input", "repos", ()),  # the seed's bare form
    ("${steps.fetch.outputs}", "step", "fetch", ()),
    ("${steps.fetch.outputs.title}", "step", "fetch", ("title",)),
    ("${steps.my-step.outputs.a.b}", "step", "my-step", ("a", "b")),
    ("${item}", "item", "", ()),
    ("${item.owner.login}", "item", "", ("owner", "login")),
    ("${ inputs.repos }", "input", "repos", ()),
])
def test_reference_shapes(text: str, kind: str, name: str, path: tuple[str, ...]) -> None:
    template = parse_template(text)
    ref = template.single
    assert ref == Ref(kind, name, path, text)  # type: ignore[arg-type]
    assert str(ref) == text
    assert parse_ref(text[2:-1]) == ref


def test_reference_inside_text_is_interpolated() -> None:
    template = parse_template("Commits, last ${inputs.days} days (${item})")
    assert template.single is None
    assert [p if isinstance(p, str) else p.kind for p in template.parts] == [
        "Commits, last ", "input", " days (", "item", ")"]
    assert [r.name for r in template.refs] == ["days", ""]


def test_two_adjacent_references() -> None:
    template = parse_template("${inputs.a}${inputs.b}")
    assert template.single is None
    assert [r.name for r in template.refs] == ["a", "b"]


def test_text_without_references() -> None:
    assert parse_template("plain").parts == ("plain",)
    assert parse_template("").parts == ()
    assert parse_template("cost $5 {x}").refs == ()


@pytest.mark.parametrize(("text", "literal"), [
    ("$${inputs.x}", "${inputs.x}"),
    ("price $${", "price ${"),
    ("a $${b} ${item}", "a ${b} "),
])
def test_double_dollar_escapes_a_reference(text: str, literal: str) -> None:
    template = parse_template(text)
    assert template.parts[0] == literal
    assert all(r.kind == "item" for r in template.refs)


@pytest.mark.parametrize(("text", "phrase"), [
    ("${inputs.x", "has an unclosed '${'; close it with '}'"),
    ("ok ${inputs.x} then ${oops", "has an unclosed '${'"),
    ("${env.HOME}", "starts with unknown 'env'"),
    ("${secrets.key}", "starts with unknown 'secrets'"),
    ("${steps.fetch}", "must read ${steps.ID.outputs} or ${steps.ID.outputs.NAME}"),
    ("${steps.fetch.result.x}", "must read ${steps.ID.outputs}"),
    ("${inputs}", "names no input; write ${inputs.NAME}"),
    ("${}", "is not a reference"),
    ("${inputs..x}", "is not a reference"),
    ("${item.0}", "is not a reference"),
    ("${a b}", "is not a reference"),
    ("${inputs.x + 1}", "is not a reference"),
])
def test_malformed_references_say_how_to_write_one(text: str, phrase: str) -> None:
    with pytest.raises(RefSyntaxError) as info:
        parse_template(text)
    assert phrase in str(info.value)


@pytest.mark.parametrize(("text", "base", "depth", "shown"), [
    ("string", "string", 0, "string"),
    ("object[]", "object", 1, "object[]"),
    ("integer[][]", "integer", 2, "integer[][]"),
    (" number [] ", "number", 1, "number[]"),
])
def test_parse_type(text: str, base: str, depth: int, shown: str) -> None:
    vtype = parse_type(text)
    assert (vtype.base, vtype.depth, str(vtype)) == (base, depth, shown)
    assert vtype.is_array is (depth > 0)


def test_element_and_array_of_a_type() -> None:
    assert parse_type("string[][]").element() == parse_type("string[]")
    assert parse_type("string").array().array() == parse_type("string[][]")


@pytest.mark.parametrize(("text", "suggestion"), [
    ("strng", "did you mean 'string'?"),
    ("strng[]", "did you mean 'string[]'?"),
    ("Integer", "did you mean 'integer'?"),
    ("bool", "did you mean 'boolean'?"),
    ("list", None),
    ("[]", None),
    ("", None),
])
def test_unknown_type_says_the_fix(text: str, suggestion: str | None) -> None:
    with pytest.raises(ValueError, match="unknown type") as info:
        parse_type(text)
    message = str(info.value)
    assert "use string, number, integer, boolean, object, or an array such as string[]" in message
    if suggestion:
        assert suggestion in message
    else:
        assert "did you mean" not in message


@pytest.mark.parametrize(("value", "vtype", "error"), [
    (True, "integer", "expected integer, got true"),
    (False, "number", "expected number, got false"),
    (1.0, "integer", "expected integer, got 1.0"),
    (math.nan, "number", "expected number"),
    (math.inf, "number", "expected number"),
    (1, "boolean", "expected boolean, got 1"),
    ("1", "integer", 'expected integer, got "1"'),
    (None, "string", "expected string, got null"),
    ([], "object", "expected object, got []"),
    ("a", "string[]", 'expected string[] (a JSON list), got "a"'),
    (["a", 2], "string[]", "item 1: expected string, got 2"),
    ([[1], ["x"]], "integer[][]", 'item 1: item 0: expected integer, got "x"'),
    ("x" * 100, "integer", "..."),  # long values are shortened
])
def test_type_error_says_what_was_expected(value: Any, vtype: str, error: str) -> None:
    got = type_error(value, parse_type(vtype))
    assert got is not None
    assert error in got
    assert len(got) < 80


@pytest.mark.parametrize(("value", "vtype"), [
    (1, "integer"), (1, "number"), (1.5, "number"), (True, "boolean"), ("", "string"),
    ({}, "object"), ([], "string[]"), ([[1, 2], []], "integer[][]"), ([{"a": 1}], "object[]"),
])
def test_type_error_accepts_fitting_values(value: Any, vtype: str) -> None:
    assert type_error(value, parse_type(vtype)) is None


@pytest.mark.parametrize(("source", "target", "ok"), [
    ("integer", "number", True),
    ("number", "integer", True),
    ("integer[]", "number[]", True),
    ("string", "string", True),
    ("string[]", "string", False),
    ("string", "string[]", False),
    ("string", "object", False),
    ("boolean", "integer", False),
    ("object[]", "object[][]", False),
])
def test_compatible(source: str, target: str, ok: bool) -> None:
    assert compatible(parse_type(source), parse_type(target)) is ok


def test_from_text_array_of_one_plain_item() -> None:
    assert from_text("./repo", parse_type("string[]")) == ["./repo"]
    assert from_text("3", parse_type("integer[]")) == [3]
    with pytest.raises(ValueError, match="expected integer"):
        from_text("x", parse_type("integer[]"))


# --- YAML ------------------------------------------------------------------------------

CORE = """\
a: yes
b: no
c: on
d: off
e: 2024-01-01
f: 0x10
g: 0o7
h: 1:30
i: ~
j: null
k:
l: true
m: False
n: '1'
o: 1.5
p: 007
q: -3
r: "true"
s: NO
t: .inf
u: 12:30:00
"""


def test_yaml_12_core_typing() -> None:
    data = load_mapping(CORE).data
    assert data == {
        "a": "yes", "b": "no", "c": "on", "d": "off", "e": "2024-01-01", "f": "0x10",
        "g": "0o7", "h": "1:30", "i": None, "j": None, "k": None, "l": True, "m": False,
        "n": "1", "o": 1.5, "p": 7, "q": -3, "r": "true", "s": "NO", "t": math.inf,
        "u": "12:30:00",
    }
    assert type(data["p"]) is int


@pytest.mark.parametrize("text", ["1e3", "1.0e3", "1E3", "+.5"])
def test_exponent_numbers_are_typed_like_core_scalar(text: str) -> None:
    assert load_mapping(f"a: {text}").data["a"] == core_scalar(text)


def test_core_scalar_types_exponents() -> None:
    assert core_scalar("1e3") == 1000.0
    assert core_scalar("1.0e+3") == 1000.0
    assert load_mapping("a: 1.0e+3").data["a"] == 1000.0


def test_raw_text_keys_keep_what_was_written() -> None:
    parsed = load_mapping("description: yes\nmetadata:\n  port: 8080\n  ok: no\nversion: 2\n",
                          raw_text_keys=frozenset({"description", "metadata"}))
    assert parsed.data == {"description": "yes", "metadata": {"port": "8080", "ok": "no"},
                           "version": 2}


def test_line_numbers_of_keys_and_items() -> None:
    text = "name: a\ninputs:\n  - name: x\n    type: string\n  - name: y\nrun:\n  command: c\n"
    parsed = load_mapping(text, first_line=2)
    assert parsed.lines[("name",)] == 2
    assert parsed.lines[("inputs", 0)] == 4
    assert parsed.lines[("inputs", 0, "type")] == 5
    assert parsed.lines[("inputs", 1)] == 6
    assert parsed.lines[("run", "command")] == 8
    assert parsed.line(("inputs", 1, "name", "deeper")) == 6  # falls back to the parent
    assert parsed.line(("nope",)) is None


@pytest.mark.parametrize(("text", "key", "line"), [
    ("a: 1\nb: 2\na: 3\n", "a", 4),
    ("run:\n  command: x\n  command: y\n", "run.command", 4),
    ("steps:\n  - id: a\n    with:\n      u: 1\n      u: 2\n", "steps.0.with.u", 6),
])
def test_duplicate_keys_are_refused_with_their_line(text: str, key: str, line: int) -> None:
    with pytest.raises(YamlProblem) as info:
        load_mapping(text, first_line=2)
    assert f"duplicate key '{key}'" in info.value.message
    assert info.value.line == line


@pytest.mark.parametrize("value", ["!!python/object:os.system x", "!custom x",
                                   "!!binary aGk=", "!foo 'quoted'"])
def test_tags_are_refused(value: str) -> None:
    with pytest.raises(YamlProblem) as info:
        load_mapping(f"name: a\nx: {value}\n")
    assert "is not supported: remove it" in info.value.message
    assert info.value.line == 2


@pytest.mark.parametrize("value", ["!foo {a: 1}", "!!set {a}", "!!omap [a: 1]",
                                   "!foo\n  - 1"])
def test_tags_on_collections_are_refused(value: str) -> None:
    with pytest.raises(YamlProblem, match="is not supported"):
        load_mapping(f"name: a\nx: {value}\n")


@pytest.mark.parametrize(("text", "phrase", "line"), [
    ("- a\n- b\n", "not a list", 1),
    ("just text\n", "not a single value", 1),
    ("a: [1\n", "while parsing a flow sequence that starts at line 1", 2),
    ("a: b: c\n", "invalid YAML: mapping values are not allowed", 1),
    ("? [a]\n: 1\n", "a mapping key must be a plain name", 1),
])
def test_not_one_mapping(text: str, phrase: str, line: int) -> None:
    with pytest.raises(YamlProblem) as info:
        load_mapping(text)
    assert phrase in info.value.message
    assert info.value.line == line


def test_empty_and_comment_only_yaml_is_an_empty_mapping() -> None:
    assert load_mapping("").data == {}
    assert load_mapping("# nothing\n").data == {}


# --- graphs ----------------------------------------------------------------------------


@pytest.mark.parametrize(("edges", "cycle"), [
    ({"a": ["b"], "b": ["a"]}, ["a", "b", "a"]),
    ({"a": ["b"], "b": ["c"], "c": ["b"]}, ["b", "c", "b"]),
    ({"a": ["a"]}, ["a", "a"]),
    ({"z": ["y"], "y": ["x"], "x": ["z"]}, ["x", "z", "y", "x"]),
    ({"a": ["b", "c"], "b": ["c"], "c": []}, None),
    ({"a": ["missing"], "b": []}, None),
    ({}, None),
])
def test_find_cycle(edges: dict[str, list[str]], cycle: list[str] | None) -> None:
    assert find_cycle(edges) == cycle


def test_cycle_text() -> None:
    assert cycle_text(["a", "b", "a"]) == "a -> b -> a"


def test_find_cycle_on_a_long_chain_does_not_recurse() -> None:
    edges = {f"n{i}": [f"n{i + 1}"] for i in range(5000)}
    edges["n5000"] = []
    assert find_cycle(edges) is None
    edges["n5000"] = ["n0"]
    cycle = find_cycle(edges)
    assert cycle is not None
    assert len(cycle) == 5002
    assert cycle[0] == cycle[-1]




def test_a_missing_input_names_the_fix_of_where_the_inputs_came_from(
        manifest: Manifest) -> None:
    """The command line is told its flag; a run started otherwise (an agent's
    execute_skill, MCP, a schedule) is not told of a flag it does not have."""
    with pytest.raises(InputError) as cli:
        parse_cli_inputs(manifest, [])
    assert "give it with --input title=VALUE" in str(cli.value)
    with pytest.raises(InputError) as other:
        resolve_inputs(manifest, {})
    assert "required input is missing (string): give it in the run's inputs" \
        in str(other.value)
    assert "--input" not in str(other.value)
