"""Parity: shared.agentskills gives the verdict of the reference `agentskills validate`.

The corpus is tests/corpus/agentskills/, written by tests/corpus/make_agentskills_corpus.py.
Its expected-verdict column is not trusted: every folder is run through the reference CLI
(skills-ref, a dev dependency) in a real subprocess of its own; see `reference` below.
"""

from __future__ import annotations

import importlib.util
import json
import random
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

import pytest

from shared.agentskills import (
    SPEC_FIELDS,
    compatibility_problems,
    description_problems,
    name_problems,
    validate_agentskills,
)

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "agentskills"
GENERATOR = CORPUS.parent / "make_agentskills_corpus.py"
CLI = Path(sys.executable).with_name("agentskills")
FOLDERS = sorted(p.name for p in CORPUS.iterdir() if p.is_dir())

# A fix hint follows the '; ' in every message: an imperative telling the user what to do.
FIX_HINT = re.compile(r"; (e\.g\. )?(rename|set|write|shorten|add|remove|delete|re-save|did you)")


def _reference_is_valid(folder: Path, cwd: Path | None = None) -> bool:
    result = subprocess.run(
        [str(CLI), "validate", str(folder)], capture_output=True, timeout=60, cwd=cwd
    )
    return result.returncode == 0


# The reference CLI calls skills_ref.validator.validate() on the folder and exits 1 on any
# problem or crash. Running that same function over the whole corpus in ONE reference
# subprocess gives the CLI's verdicts without paying 114 interpreter start-ups per xdist
# worker; test_batch_runner_agrees_with_the_cli checks the two agree on a sample.
_BATCH = """
import json, sys
from pathlib import Path
from skills_ref.validator import validate
verdicts = {}
for name in sys.argv[2:]:
    try:
        verdicts[name] = not validate(Path(sys.argv[1]) / name)
    except BaseException:  # the CLI dies with a traceback: exit 1, invalid
        verdicts[name] = False
print(json.dumps(verdicts))
"""


@pytest.fixture(scope="session")
def reference() -> dict[str, bool]:
    """The reference verdict (True = valid) of every corpus folder."""
    if not CLI.exists():
        pytest.fail(f"reference CLI not found at {CLI}: pip install -e '.[dev]'")
    result = subprocess.run([sys.executable, "-c", _BATCH, str(CORPUS), *FOLDERS],
                            capture_output=True, text=True, timeout=120, check=True)
    verdicts: dict[str, bool] = json.loads(result.stdout.strip().splitlines()[-1])
    return verdicts


def test_batch_runner_agrees_with_the_cli(reference: dict[str, bool]) -> None:
    sample = [n for i, n in enumerate(FOLDERS) if i % 12 == 0]
    assert any(reference[n] for n in sample) and not all(reference[n] for n in sample)
    with ThreadPoolExecutor(max_workers=4) as pool:
        cli = dict(zip(sample, pool.map(lambda n: _reference_is_valid(CORPUS / n), sample),
                       strict=True))
    assert cli == {n: reference[n] for n in sample}


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_agentskills_corpus", GENERATOR)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while it loads
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("folder", FOLDERS)
def test_verdict_matches_reference(folder: str, reference: dict[str, bool]) -> None:
    problems = validate_agentskills(CORPUS / folder)
    assert (not problems) == reference[folder], (
        f"reference says {'valid' if reference[folder] else 'invalid'}, we found: "
        f"{[str(p) for p in problems] or 'no problems'}"
    )


def test_corpus_is_not_vacuous(reference: dict[str, bool]) -> None:
    valid = sum(reference.values())
    assert len(FOLDERS) >= 45
    assert valid >= 10
    assert len(FOLDERS) - valid >= 10


def test_corpus_on_disk_matches_generator(tmp_path: Path) -> None:
    generator = _load_generator()
    generator.build(tmp_path)

    def tree(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}

    assert tree(tmp_path) == tree(CORPUS), "run tests/corpus/make_agentskills_corpus.py"


def test_problems_name_their_field_and_file() -> None:
    for folder in FOLDERS:
        for problem in validate_agentskills(CORPUS / folder):
            assert problem.field, problem
            assert problem.message.strip(), problem
            assert re.search(rf"(?<![\w-]){re.escape(problem.field)}(?![\w-])", problem.message), (
                problem
            )
            assert problem.path in (str(CORPUS / folder), str(CORPUS / folder / "SKILL.md")), (
                problem
            )


def test_unknown_fields_are_named_and_spec_fields_are_not() -> None:
    problems = validate_agentskills(CORPUS / "unknown-field")
    assert [(p.field, p.line) for p in problems] == [("version", 4)]
    assert "skill.yaml" in problems[0].message
    assert sorted(SPEC_FIELDS) == [
        "allowed-tools",
        "compatibility",
        "description",
        "license",
        "metadata",
        "name",
    ]


@pytest.mark.parametrize(
    ("messages", "expected_fix"),
    [
        (name_problems("My-Skill", "My-Skill"), "rename it to 'my-skill'"),
        (name_problems("my--skill", "my--skill"), "rename it to 'my-skill'"),
        (name_problems("-my-skill-", "-my-skill-"), "rename it to 'my-skill'"),
        (name_problems("my_skill", "my_skill"), "rename it to 'my-skill'"),
        (name_problems("x" * 65, "x" * 65), "rename it to '" + "x" * 64 + "'"),
        (name_problems("my-skill", "other"), "rename the folder to 'my-skill'"),
        (name_problems("", "my-skill"), "name: my-skill"),
        (name_problems(["a"], None), "set it"),
        (description_problems("  "), "write one or two sentences"),
        (description_problems(["a"]), "write one or two sentences"),
        (description_problems("d" * 1030), "shorten it by at least 6"),
        (compatibility_problems(["a"]), "write the requirements"),
        (compatibility_problems("c" * 501), "shorten it by at least 1"),
    ],
)
def test_messages_carry_a_fix(messages: list[str], expected_fix: str) -> None:
    assert messages
    assert all(FIX_HINT.search(m) for m in messages), messages
    assert any(expected_fix in m for m in messages), messages


def test_rules_accept_what_the_reference_accepts() -> None:
    assert name_problems("  café  ", "cafe\u0301") == []  # stripped, then NFKC on both sides
    assert name_problems("file", "\ufb01le") == []
    assert name_problems("技能", None) == []
    assert description_problems("d" * 1024) == []
    assert compatibility_problems("") == []  # the reference allows it, though the spec says 1+


def test_dot_folder_fails_as_in_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    # The reference compares the name with the path as typed, and '.' has no name.
    folder = CORPUS / "minimal"
    assert _reference_is_valid(Path("."), cwd=folder) is False
    monkeypatch.chdir(folder)
    problems = validate_agentskills(Path("."))
    assert [p.field for p in problems] == ["name"]
    assert "../minimal" in problems[0].message


def test_odd_content_never_raises(tmp_path: Path) -> None:
    folder = tmp_path / "odd"
    folder.mkdir()
    tokens = [
        "a", ":", ": ", "- ", "? ", "\n", "  ", "\t", "'", '"', "|", ">", "#", "&x ", "*x",
        "!t ", "{", "}", "[", "]", ",", "...", "%", "@", "\\", "\x00", "\x85", "é", "---",
    ]  # fmt: skip
    rng = random.Random(7)
    for _ in range(400):
        text = "".join(rng.choice(tokens) for _ in range(rng.randint(1, 12)))
        (folder / "SKILL.md").write_text("---\n" + text + "\n---\n", encoding="utf-8")
        validate_agentskills(folder)
    (folder / "SKILL.md").write_bytes(b"---\nname: \xff\xfe\n---\n")
    assert [p.field for p in validate_agentskills(folder)] == ["file"]
    assert [p.field for p in validate_agentskills(tmp_path / "absent")] == ["file"]
