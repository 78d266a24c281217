"""Property-based tests (hypothesis) of the two places user text first becomes values:
run inputs (shared/inputs.py, shared/valuetypes.py) and skill files (shared/yamlload.py,
shared/skill.py). For any generated input, NUL bytes and lone surrogates included: a
clear refusal (InputError, ValueError from from_text, YamlProblem, or the skill's Problem
list) or a value, never another exception; and a value accepted as a run's inputs is one
PostgreSQL can store (no NUL, no lone surrogate, no NaN: strict UTF-8 JSON).

Examples are few (max_examples=200) so the suite stays fast; hypothesis's database is off
(no .hypothesis folder in the repository).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.checks import check_skill
from shared.errors import InputError
from shared.inputs import local_paths, parse_cli_inputs, resolve_inputs
from shared.manifest import Manifest
from shared.problems import Problem
from shared.skill import load_skill
from shared.valuetypes import BASE_TYPES, ValueType, from_text
from shared.yamlload import YamlProblem, load_mapping

SETTINGS = settings(max_examples=200, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

# Text as it can reach skillq: any character, lone surrogates (argv's undecodable bytes,
# JSON "\ud800" escapes) and NUL included, with the characters JSON, YAML and the
# command line treat specially drawn often.
TRICKY = ["\x00", "\udcff", "\udc80", "\ud800", "\udfff", "\ufeff", "\x85", "\u2028", "\n",
          "\t", "\r", "=", ":", "-", "[", "]", "{", "}", '"', "'", "\\", "\\u0000", "\\0",
          "\\x00", "\\ud800", "&a", "*a", "!!", "#", "|", ">", "?", ",", "NaN", "Infinity",
          "1e999", "-0", "1" * 30, "~", "null", "true", "no", ".inf", "$ref", "$local",
          "$dir", "sha256:" + "0" * 64, "a.txt", "d", "../", "/"]
CHARS = st.characters(codec=None, categories=None)  # every code point, surrogates included
TEXT = st.lists(st.one_of(CHARS, st.sampled_from(TRICKY)), max_size=12).map("".join)
NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,5}", fullmatch=True)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), TEXT)
JSON = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)), max_leaves=12)


@st.composite
def manifests(draw: st.DrawFn) -> Manifest:
    names = draw(st.lists(NAMES, min_size=1, max_size=4, unique=True))
    inputs = [{"name": n, "type": draw(st.sampled_from(BASE_TYPES))
               + "[]" * draw(st.integers(0, 2)), "required": draw(st.booleans())}
              for n in names]
    return Manifest.model_validate({"name": "gen", "description": "Generated. Use in tests.",
                                    "inputs": inputs})


@st.composite
def pairs(draw: st.DrawFn, manifest: Manifest) -> list[str]:
    """`--input` arguments: declared names or any text, values as text or JSON."""
    out = []
    for _ in range(draw(st.integers(0, 4))):
        key = draw(st.one_of(st.sampled_from([i.name for i in manifest.inputs]), TEXT))
        value = draw(st.one_of(TEXT, JSON.map(lambda v: json.dumps(v, ensure_ascii=False))))
        out.append(draw(st.sampled_from([f"{key}={value}", key, f"{key}={value}={value}"])))
    return out


def texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from texts(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from texts(item)


def assert_storable(value: Any) -> None:
    """What PostgreSQL's jsonb takes: strict JSON, in UTF-8, with no NUL character."""
    text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    text.encode("utf-8")  # a lone surrogate fails here
    assert "\x00" not in text and "\\u0000" not in text, text


@pytest.fixture(scope="module")
def here(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder for path inputs to be relative to: a file and a folder to find."""
    root = tmp_path_factory.mktemp("props")
    (root / "a.txt").write_text("a", encoding="utf-8")
    (root / "d").mkdir()
    return root


# --- run inputs ---------------------------------------------------------------------------


@SETTINGS
@given(text=TEXT, base=st.sampled_from(BASE_TYPES), depth=st.integers(0, 2))
def test_from_text_gives_a_value_or_a_value_error(text: str, base: str, depth: int) -> None:
    with contextlib.suppress(ValueError):
        from_text(text, ValueType(base, depth))


@SETTINGS
@given(data=st.data())
def test_command_line_inputs_are_refused_clearly_or_storable(here: Path,
                                                             data: st.DataObject) -> None:
    manifest = data.draw(manifests())
    given_pairs = data.draw(pairs(manifest))
    try:
        inputs = parse_cli_inputs(manifest, given_pairs, files_from=here)
    except InputError as exc:
        assert exc.problems and all(isinstance(p, Problem) for p in exc.problems)
        for line in map(str, exc.problems):  # a message a terminal and JSON carry
            line.encode("utf-8")
            assert "\x00" not in line
        return
    assert_storable(inputs)


@SETTINGS
@given(data=st.data())
def test_an_inputs_file_is_refused_clearly_or_storable(here: Path, data: st.DataObject
                                                       ) -> None:
    manifest = data.draw(manifests())
    names = [i.name for i in manifest.inputs]
    content = data.draw(st.one_of(
        st.dictionaries(st.one_of(st.sampled_from(names), TEXT), JSON, max_size=4), JSON))
    path = here / "inputs.json"
    # ensure_ascii: a lone surrogate is written as its \\u escape, as a JSON file may
    path.write_text(json.dumps(content, ensure_ascii=True), encoding="utf-8")
    try:
        inputs = parse_cli_inputs(manifest, [], path)
    except InputError as exc:
        for line in map(str, exc.problems):
            line.encode("utf-8")
        return
    assert_storable(inputs)


@SETTINGS
@given(data=st.data())
def test_json_inputs_from_mcp_tests_and_agents_are_refused_clearly_or_storable(
        here: Path, data: st.DataObject) -> None:
    manifest = data.draw(manifests())
    names = [i.name for i in manifest.inputs]
    given_ = data.draw(st.dictionaries(st.one_of(st.sampled_from(names), TEXT), JSON,
                                       max_size=4))
    try:
        inputs = resolve_inputs(manifest, local_paths(manifest, given_, here))
    except InputError as exc:
        for line in map(str, exc.problems):
            line.encode("utf-8")
        return
    assert_storable(inputs)


# --- skill files ----------------------------------------------------------------------------

YAML_TEXT = st.one_of(TEXT, st.lists(st.sampled_from(
    ["a", "b", ":", " ", "\n", "  ", "- ", "[", "]", "{", "}", ",", '"', "'", "\\0", "\\x00",
     "\\ud800", "\\U0010ffff", "&x ", "*x", "!!str ", "!!binary ", "!t ", "#", "|\n", ">\n",
     "? ", "\x00", "\udcff", "\x85", "\ufeff", "\t", "%YAML 1.2\n", "---\n", "...\n"]),
    max_size=30).map("".join))


@SETTINGS
@given(text=YAML_TEXT, raw=st.booleans())
def test_the_yaml_loader_gives_a_mapping_or_a_yaml_problem(text: str, raw: bool) -> None:
    try:
        parsed = load_mapping(text, raw_text_keys=frozenset({"a", "b"}) if raw else frozenset())
    except YamlProblem as exc:
        assert exc.message and (exc.line is None or exc.line >= 1)
        return
    assert isinstance(parsed.data, dict)
    for found in texts(parsed.data):  # what it gives can be stored
        found.encode("utf-8")
        assert "\x00" not in found


FIELDS = st.sampled_from(["name", "description", "version", "label", "inputs", "outputs",
                          "run", "steps", "approach", "auth", "metadata", "license"])


@st.composite
def skill_md(draw: st.DrawFn) -> str:
    """SKILL.md text: mostly well-formed frontmatter around generated values."""
    value = st.one_of(YAML_TEXT, st.sampled_from(['"x\\0"', "x", "1", "[a]", "{a: 1}", '""']))
    lines = ["name: gen", 'description: "Generated. Use it in tests."']
    for _ in range(draw(st.integers(0, 4))):
        lines.append(f"{draw(FIELDS)}: {draw(value)}")
    if draw(st.booleans()):
        lines += ["inputs:", f"  - name: {draw(st.one_of(NAMES, value))}",
                  f"    type: {draw(st.one_of(st.sampled_from(BASE_TYPES), value))}",
                  f"    default: {draw(value)}"]
    if draw(st.booleans()):
        lines += ["run:", f"  command: {draw(st.one_of(st.just('python3 main.py'), value))}"]
    front = "\n".join(lines) + "\n"
    return draw(st.sampled_from([f"---\n{front}---\n\n# gen\n{draw(TEXT)}\n", front,
                                 f"---\n{front}", draw(TEXT)]))


@SETTINGS
@given(text=skill_md(), bench=st.one_of(st.none(), JSON, st.fixed_dictionaries({
    "skill": st.just("gen"), "version": st.just(1), "tests": st.lists(st.fixed_dictionaries({
        "id": TEXT, "inputs": st.dictionaries(NAMES, JSON, max_size=2),
        "expected": st.fixed_dictionaries({"success": st.booleans()})}), max_size=2)})))
def test_a_skill_folder_loads_or_lists_its_problems(here: Path, text: str,
                                                   bench: Any) -> None:
    folder = here / "gen"
    folder.mkdir(exist_ok=True)
    # surrogatepass: the bytes a broken editor would leave, which read_text refuses
    (folder / "SKILL.md").write_bytes(text.encode("utf-8", "surrogatepass"))
    (folder / "main.py").write_text("print('{}')\n", encoding="utf-8")
    benchmarks = folder / "benchmarks.json"
    benchmarks.unlink(missing_ok=True)
    if bench is not None:
        benchmarks.write_text(json.dumps(bench, ensure_ascii=True), encoding="utf-8")
    skill, problems = load_skill(folder)
    assert all(isinstance(p, Problem) for p in problems)
    if skill is not None:
        problems += check_skill(skill)
        for found in texts(skill.manifest.model_dump(mode="json")):
            found.encode("utf-8")
            assert "\x00" not in found
