"""YAML is bounded: a skill file cannot make loading it cost minutes or gigabytes.

Each hostile file sits in a vault beside a good skill. Every load of one runs in a
subprocess with a generous timeout, so a regression fails here instead of hanging the
suite (before the bounds, the billion-laughs file ran past 60 s and grew to gigabytes).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shared import yamlload
from shared.agentskills import find_skill_md
from shared.skill import load_skill
from shared.vault import load_vault
from shared.yamlload import MAX_YAML_BYTES, MAX_YAML_DEPTH, YamlProblem, load_mapping

ROOT = Path(__file__).resolve().parents[2]
SKILLQ = Path(sys.executable).with_name("skillq")
GUARD_S = 20  # far above a bounded load; only there so a regression fails, not hangs
GOOD = "---\nname: good\ndescription: Does one thing. Use it when needed.\n---\n# Good\n"
BOUNDS = ("anchors and aliases", "nested more than", "skillq reads")


def _billion_laughs() -> str:
    """The classic: nine lists of nine aliases of the list before, 9**9 strings expanded."""
    lines = ['  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in itertools.pairwise("abcdefghi"):
        lines.append(f"  {name}: &{name} [{','.join([f'*{prev}'] * 9)}]")
    return "\n".join(lines)


def _deep() -> str:
    return "  k: " + "[" * 200 + "]" * 200


def _oversize() -> str:
    return "  k: " + "x" * MAX_YAML_BYTES


BAD = {
    "billion-laughs": (_billion_laughs, "anchors and aliases (&name / *name) are not allowed"),
    "deep-nesting": (_deep, f"nested more than {MAX_YAML_DEPTH} levels deep; flatten it"),
    "oversize": (_oversize, "skillq reads; shorten it"),
}


def _vault(tmp_path: Path, case: str) -> Path:
    vault = tmp_path / "vault"
    (vault / "good").mkdir(parents=True)
    (vault / "good" / "SKILL.md").write_text(GOOD, encoding="utf-8")
    (vault / "bad").mkdir()
    text = (f"---\nname: bad\ndescription: Does one thing. Use it when needed.\nmetadata:\n"
            f"{BAD[case][0]()}\n---\n# Bad\n")
    (vault / "bad" / "SKILL.md").write_text(text, encoding="utf-8")
    return vault


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLQ_")}
    env.update(SKILLQ_HOME=str(cwd / "home"), NO_COLOR="1", COLUMNS="200")
    try:
        return subprocess.run(argv, capture_output=True, text=True, encoding="utf-8",
                              timeout=GUARD_S, cwd=cwd, env=env, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(argv[:3])}... still running after {GUARD_S} s: YAML unbounded")


_LOAD = """
import json, sys
from pathlib import Path
from shared.vault import load_vault
vault = load_vault(Path(sys.argv[1]))
print(json.dumps({"skills": sorted(vault.skills), "problems": [str(p) for p in vault.problems]}))
"""


@pytest.mark.parametrize("case", sorted(BAD))
def test_the_vault_reports_the_bad_skill_and_loads_the_good_one(tmp_path: Path,
                                                                case: str) -> None:
    vault = _vault(tmp_path, case)
    done = _run([sys.executable, "-c", _LOAD, str(vault)], tmp_path)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["skills"] == ["good"]
    bad = [p for p in found["problems"] if p.startswith("vault/bad/SKILL.md")]
    assert len(bad) == 1, found["problems"]
    assert ": frontmatter: " in bad[0] and BAD[case][1] in bad[0]


@pytest.mark.parametrize("case", sorted(BAD))
def test_validate_exits_1_naming_the_file_without_a_traceback(tmp_path: Path,
                                                              case: str) -> None:
    _vault(tmp_path, case)
    done = _run([str(SKILLQ), "validate", "vault"], tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "Traceback" not in output
    assert "vault/bad/SKILL.md" in output and BAD[case][1] in output


@pytest.mark.parametrize("case", sorted(BAD))
def test_list_and_show_still_serve_the_good_skill(tmp_path: Path, case: str) -> None:
    _vault(tmp_path, case)
    listed = _run([str(SKILLQ), "list", "--vault", "vault"], tmp_path)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "good" in listed.stdout and "Traceback" not in listed.stderr
    shown = _run([str(SKILLQ), "show", "good", "--vault", "vault"], tmp_path)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "Does one thing." in shown.stdout


# --------------------------------------------------------------------------- the bounds


def _message(text: str) -> YamlProblem:
    with pytest.raises(YamlProblem) as caught:
        load_mapping(text, first_line=2)
    return caught.value


@pytest.mark.parametrize(("text", "named", "line"), [
    ("a: &x 1\nb: 2\n", "the anchor '&x'", 2),            # an anchor alone is refused too
    ("a: 1\nb: [1, *x]\n", "the alias '*x'", 3),
    ("a: &r [*r]\n", "the anchor '&r'", 2),                # self-reference: no infinite build
    ("base: &b {k: 1}\nuse:\n  <<: *b\n", "the anchor '&b'", 2),  # merge keys need aliases
])
def test_anchors_and_aliases_are_refused_at_their_line(text: str, named: str,
                                                       line: int) -> None:
    problem = _message(text)
    assert named in problem.message and "write the value out" in problem.message
    assert problem.line == line


def test_ampersands_and_asterisks_in_text_are_only_text() -> None:
    text = 'description: "R&D **bold** & a*b"\nnote: \'&x *y\'\nglob: x*\nand: a & b\n'
    assert load_mapping(text).data == {"description": "R&D **bold** & a*b", "note": "&x *y",
                                       "glob": "x*", "and": "a & b"}


def test_depth_is_capped_at_the_named_level() -> None:
    # The top mapping is one level; each '[' one more.
    at_cap = "k: " + "[" * (MAX_YAML_DEPTH - 1) + "]" * (MAX_YAML_DEPTH - 1) + "\n"
    assert load_mapping(at_cap).data["k"] is not None
    over = "k:\n  - " + "[" * MAX_YAML_DEPTH + "]" * MAX_YAML_DEPTH + "\n"
    problem = _message(over)
    assert f"nested more than {MAX_YAML_DEPTH} levels deep" in problem.message
    assert problem.line == 3


def test_deep_nesting_in_the_pure_python_loader_is_a_problem_not_a_recursion_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import yaml

    monkeypatch.setattr(yamlload, "_Loader", yaml.SafeLoader)  # as where libyaml is missing
    problem = _message("k: " + "[" * 5000 + "]" * 5000 + "\n")
    assert "nested more than" in problem.message


def test_size_is_capped_in_bytes_not_characters() -> None:
    head = "k: "
    fits = head + "x" * (MAX_YAML_BYTES - len(head))
    assert load_mapping(fits).data["k"].startswith("x")
    # Two bytes a character in UTF-8: half as many characters already go over.
    over = head + "é" * (MAX_YAML_BYTES // 2)
    problem = _message(over)
    assert "skillq reads; shorten it" in problem.message and problem.line == 2


def test_skill_yaml_is_bounded_too(tmp_path: Path) -> None:
    folder = tmp_path / "side"
    folder.mkdir()
    (folder / "SKILL.md").write_text(GOOD.replace("good", "side"), encoding="utf-8")
    (folder / "skill.yaml").write_text("version: &v 1\ntimeout_s: *v\n", encoding="utf-8")
    skill, problems = load_skill(folder)
    assert skill is None
    assert [p.path.endswith("side/skill.yaml") for p in problems] == [True]
    assert "anchors and aliases" in problems[0].message


# --------------------------------------------------------------------------- ordinary YAML


@pytest.mark.parametrize("vault", sorted(p.name for p in (ROOT / "examples").iterdir()
                                         if p.is_dir()))
def test_example_vaults_meet_no_bound(vault: str) -> None:
    loaded = load_vault(ROOT / "examples" / vault)
    assert loaded.skills
    assert not [p for p in loaded.problems if any(b in p.message for b in BOUNDS)]


def test_only_the_corpus_cases_about_a_bound_meet_one() -> None:
    corpus = ROOT / "tests" / "corpus" / "agentskills"
    hit = set()
    for folder in sorted(p for p in corpus.iterdir() if p.is_dir()):
        skill_md = find_skill_md(folder)
        if skill_md is None or not skill_md.is_file():  # a read error, not YAML's
            continue
        _, problems = load_skill(folder)
        if any(b in p.message for p in problems for b in BOUNDS):
            hit.add(folder.name)
    assert hit == {"anchor-alias", "deep-nesting"}
