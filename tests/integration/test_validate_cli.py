"""`skillq validate` and `skillq catalog` on real Agent Skills folders, against the real stack
(tests/integration/conftest.py) where library state matters: the folders the reference
validator accepts load, list-valued fields included, and survive an export; a folder that
is neither a skill nor a vault fails; the catalog leaves out invalid and disabled skills
and still prints what `agentskills to-prompt` prints for the rest; and no did-you-mean
points at a field the user did not mean.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import VAULTS, Stack, copy_vault

from shared.vault import load_vault

pytestmark = pytest.mark.integration

REAL = VAULTS / "agentskills-real"
NAMES = sorted(p.name for p in REAL.iterdir() if p.is_dir())
REFERENCE = Path(sys.executable).with_name("agentskills")


def reference(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REFERENCE), *map(str, args)], capture_output=True, text=True,
                          timeout=60, check=False)


def cli(stack: Stack, cwd: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    done = stack.cli(*map(str, args), cwd=cwd)
    assert "Traceback" not in done.stderr, done.stderr
    return done


@pytest.fixture
def real(tmp_path: Path) -> Path:
    return copy_vault(REAL, tmp_path / "vault")


def test_real_agent_skills_folders_pass_both_validators(stack: Stack, tmp_path: Path,
                                                        real: Path) -> None:
    assert len(NAMES) >= 4
    for name in NAMES:
        assert reference("validate", real / name).returncode == 0, name
        for spec in ("skillq", "agentskills"):
            done = cli(stack, tmp_path, "validate", real / name, "--spec", spec)
            assert done.returncode == 0, done.stdout
            assert f"✓ 1 skill(s) valid ({spec} rules)" in done.stdout
    done = cli(stack, tmp_path, "validate", real)
    assert done.returncode == 0 and f"✓ {len(NAMES)} skill(s) valid" in done.stdout, done.stdout


def test_list_valued_fields_load_as_written(real: Path) -> None:
    skills = load_vault(real).skills
    assert skills["tushare-finance"].manifest.allowed_tools == ("Bash(python:*)", "Read")
    assert skills["local-network-scan"].manifest.allowed_tools == ("bash", "read", "write")
    assert skills["webfetch"].manifest.metadata == {"tags": ("web", "scraping", "fetch")}
    assert skills["daily-standup"].manifest.license == "MIT"


@pytest.mark.parametrize("form", ["bot0", "agentskills"])
def test_list_valued_fields_survive_an_export(stack: Stack, tmp_path: Path, real: Path,
                                             form: str) -> None:
    out = tmp_path / f"out-{form}"
    done = cli(stack, tmp_path, "export", f"--{form}", out, "--vault", real)
    assert done.returncode == 0, done.stderr
    before = {n: s.manifest for n, s in load_vault(real).skills.items()}
    exported = load_vault(out)
    assert exported.problems == ()
    assert {n: s.manifest for n, s in exported.skills.items()} == before
    if form == "agentskills":  # what another client reads must pass its validator too
        for name in NAMES:
            checked = reference("validate", out / name)
            assert checked.returncode == 0, checked.stderr
        text = (out / "webfetch" / "SKILL.md").read_text(encoding="utf-8")
        assert '  "tags":\n    - "web"\n' in text


@pytest.mark.parametrize("spec", ["skillq", "agentskills"])
def test_a_folder_neither_skill_nor_vault_fails(stack: Stack, tmp_path: Path,
                                                spec: str) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    project = tmp_path / "project"
    for sub in ("docs", "src"):
        (project / sub).mkdir(parents=True)
        (project / sub / "README.md").write_text("not a skill\n")
    for folder, inside in ((empty, "it has no sub-folders"),
                           (project, "none of its 2 sub-folders has a SKILL.md")):
        done = cli(stack, tmp_path, "validate", folder, "--spec", spec)
        assert done.returncode == 1, done
        first = done.stdout.splitlines()[0]
        shown = folder.relative_to(tmp_path)  # paths are shown relative to the caller
        assert first.startswith(f"{shown}: SKILL.md: neither a skill folder"), first
        assert inside in first and f"skillq new NAME --vault {shown}" in first
        assert "skill(s) valid" not in done.stdout


def test_a_vault_with_a_stray_folder_still_names_it(stack: Stack, tmp_path: Path,
                                                    real: Path) -> None:
    (real / "notes").mkdir()
    done = cli(stack, tmp_path, "validate", real)
    assert done.returncode == 1
    assert "vault/notes: SKILL.md: missing" in done.stdout
    assert "neither" not in done.stdout


def _break(vault: Path) -> None:
    bad_name = vault / "bad-name"
    bad_name.mkdir()
    (bad_name / "SKILL.md").write_text("---\nname: Bad_Name\ndescription: Has a bad name.\n"
                                       "---\n\nBody.\n")
    bad_yaml = vault / "bad-yaml"
    bad_yaml.mkdir()
    (bad_yaml / "SKILL.md").write_text("---\nname: bad-yaml\ndescription: [unclosed\n---\n")


def test_catalog_leaves_out_invalid_and_disabled_skills(stack: Stack, tmp_path: Path,
                                                        real: Path) -> None:
    _break(real)
    assert cli(stack, tmp_path, "pin", "webfetch", "--vault", real).returncode == 0
    assert cli(stack, tmp_path, "disable", "daily-standup", "--vault", real).returncode == 0
    done = cli(stack, tmp_path, "catalog", "--format", "xml", "--vault", real)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 2, done.stderr
    for line, name in zip(warnings, ("bad-name", "bad-yaml"), strict=True):
        assert f"left out vault/{name}, which does not validate: " in line
        assert line.endswith(f"; run `skillq validate vault/{name}`"), line
    # Pinned first, then by name; the disabled one and the invalid ones are absent.
    listed = ["webfetch", *(n for n in NAMES if n not in ("webfetch", "daily-standup"))]
    expected = reference("to-prompt", *(real / n for n in listed))
    assert expected.returncode == 0, expected.stderr
    assert done.stdout == expected.stdout
    text = cli(stack, tmp_path, "catalog", "--vault", real)
    assert [line.split(":", 1)[0] for line in text.stdout.splitlines()] == listed
    assert len([e for e in text.stderr.splitlines() if e.startswith("warning:")]) == 2


def _skill_with(vault: Path, extra: str) -> Path:
    folder = vault / "probe"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: probe\ndescription: Probes.\n{extra}---\n\n"
                                     "Body.\n")
    return folder


# In a plain folder an unknown field is a warning (exit 0) by skillq's rules, refused by
# --strict and by the Agent Skills specification's: the fix offered is the same.
SPECS = {"skillq": 0, "skillq-strict": 1, "agentskills": 1}


def _validate(stack: Stack, tmp_path: Path, folder: Path, spec: str
              ) -> subprocess.CompletedProcess[str]:
    strict = ["--strict"] if spec.endswith("-strict") else []
    done = cli(stack, tmp_path, "validate", folder, "--spec", spec.removesuffix("-strict"),
               *strict)
    assert done.returncode == SPECS[spec], done.stdout
    return done


@pytest.mark.parametrize("spec", SPECS)
def test_author_is_not_a_typo_of_auth(stack: Stack, tmp_path: Path, spec: str) -> None:
    folder = _skill_with(tmp_path / "vault", "author: Ada Lovelace\n")
    done = _validate(stack, tmp_path, folder, spec)
    assert "'auth'" not in done.stdout and "did you mean" not in done.stdout, done.stdout
    assert "author" in done.stdout and "metadata:" in done.stdout, done.stdout
    assert ("warning:" in done.stdout) is (spec == "skillq")
    moved = tmp_path / "moved"
    _skill_with(moved, "metadata:\n  author: Ada Lovelace\n")
    strict = ["--strict"] if spec.endswith("-strict") else []
    again = cli(stack, tmp_path, "validate", moved / "probe", "--spec",
                spec.removesuffix("-strict"), *strict)
    assert again.returncode == 0 and "warning" not in again.stdout, again.stdout


@pytest.mark.parametrize(("extra", "field", "meant"), [
    ("lisence: MIT\n", "lisence", "license"),
    ("allowed_tools: Read\n", "allowed_tools", "allowed-tools"),
])
def test_a_near_miss_is_still_suggested(stack: Stack, tmp_path: Path, extra: str, field: str,
                                        meant: str) -> None:
    folder = _skill_with(tmp_path / "vault", extra)
    for spec in SPECS:
        done = _validate(stack, tmp_path, folder, spec)
        assert field in done.stdout and f"did you mean '{meant}'?" in done.stdout, done.stdout


def test_a_list_where_text_belongs_is_not_told_to_quote_it(stack: Stack,
                                                          tmp_path: Path) -> None:
    folder = _skill_with(tmp_path / "vault", "license:\n  - MIT\n  - Apache-2.0\n")
    done = cli(stack, tmp_path, "validate", folder)
    assert done.returncode == 1
    assert "license: must be one text value, not a list" in done.stdout, done.stdout
    assert "write it on one line" in done.stdout and "quote it" not in done.stdout
