"""`skillq catalog` speaks the reference client's language, and skillq reads what it reads.

The reference is skills-ref 0.1.1 (a dev dependency): its `agentskills to-prompt` CLI runs
in a subprocess of its own and its bytes are compared with `skillq catalog --format xml`'s
on the same folders, in the same order. The folders are the real Agent Skills folders in
tests/integration/vaults/agentskills-real/ and a vault of descriptions written to catch
every way two YAML readers and two escapers can differ.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from skills_ref.parser import parse_frontmatter
from skills_ref.prompt import to_prompt as reference_to_prompt

from shared.agentskills import spec_frontmatter, unknown_field_hint, validate_agentskills
from shared.catalog import CatalogEntry, catalog_line, to_prompt
from shared.manifest import EXECUTION_FIELDS, SPEC_FIELDS
from shared.problems import did_you_mean
from shared.skill import split_frontmatter
from shared.vault import load_vault
from shared.yamlload import load_mapping

REAL = Path(__file__).resolve().parents[1] / "integration" / "vaults" / "agentskills-real"
BIN = Path(sys.executable).parent
KNOWN = sorted(SPEC_FIELDS | EXECUTION_FIELDS)


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLQ_")}
    # A home of its own: no database runs there, so no library state reorders the listing.
    env.update(SKILLQ_HOME=str(tmp_path / "home"), NO_COLOR="1", COLUMNS="80")
    return env


def skillq(tmp_path: Path, *args: str | Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(BIN / "skillq"), *map(str, args)], capture_output=True,
                          timeout=60, cwd=tmp_path, env=_env(tmp_path), check=False)


def agentskills(tmp_path: Path, *args: str | Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(BIN / "agentskills"), *map(str, args)], capture_output=True,
                          timeout=60, cwd=tmp_path, env=_env(tmp_path), check=False)


def assert_same_as_reference(tmp_path: Path, vault: Path) -> bytes:
    ours = skillq(tmp_path, "catalog", "--format", "xml", "--vault", vault)
    assert ours.returncode == 0, ours.stderr.decode()
    folders = sorted(p for p in vault.iterdir() if p.is_dir())
    reference = agentskills(tmp_path, "to-prompt", *folders)
    assert reference.returncode == 0, reference.stderr.decode()
    assert ours.stdout == reference.stdout
    return ours.stdout


def test_xml_catalog_of_real_skills_is_to_prompt_byte_for_byte(tmp_path: Path) -> None:
    out = assert_same_as_reference(tmp_path, REAL)
    # Not vacuous: all five are listed, escaped as the reference escapes, and the folded
    # description's final newline is gone.
    assert out.count(b"<skill>") == 5
    assert b"team&#x27;s daily standup" in out and b"&quot;do standup&quot;" in out
    assert b"to light DOM.\n</description>" in out


DESCRIPTIONS = {
    "literal-block": "description: |\n  First line.\n  Second line & more.\n",
    "literal-keep": "description: |+\n  Kept trailing newlines.\n\n\n",
    "folded-strip": "description: >-\n  Folded\n  into one line.\n",
    "folded-indented": "description: >\n  A paragraph.\n\n    An indented line.\n  End.\n",
    "plain-multiline": "description: A plain scalar\n  that goes on\n  over three lines.\n",
    "markup": "description: \"Reads <b>tags</b> & 'quotes' :smile: [bold]x[/bold] \\\\n\"\n",
    "padded": "description: \"   padded with spaces and a tab\\t  \"\n",
    "unicode": "description: 'Résumé — 技能, emoji 🎉, and a line separator\u2028inside.'\n",
}


@pytest.fixture
def tricky(tmp_path: Path) -> Path:
    vault = tmp_path / "tricky"
    for name, description in DESCRIPTIONS.items():
        (vault / name).mkdir(parents=True)
        (vault / name / "SKILL.md").write_text(
            f"---\nname: {name}\n{description}---\n\nBody.\n", encoding="utf-8")
    return vault


def test_both_validators_accept_the_tricky_vault(tricky: Path) -> None:
    assert load_vault(tricky).problems == ()
    for folder in tricky.iterdir():
        assert validate_agentskills(folder) == [], folder.name


def test_xml_catalog_trims_and_escapes_as_the_reference(tmp_path: Path, tricky: Path) -> None:
    out = assert_same_as_reference(tmp_path, tricky).decode()
    assert "Kept trailing newlines.\n</description>" in out
    assert "&lt;b&gt;tags&lt;/b&gt; &amp; &#x27;quotes&#x27; :smile: [bold]x[/bold]" in out


def test_text_catalog_is_one_untouched_line_per_skill(tmp_path: Path, tricky: Path) -> None:
    done = skillq(tmp_path, "catalog", "--vault", tricky)
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stdout.decode().split("\n")
    assert lines[-1] == "" and len(lines) == len(DESCRIPTIONS) + 1
    by_name = dict(line.split(": ", 1) for line in lines[:-1])
    assert sorted(by_name) == sorted(DESCRIPTIONS)
    # Written as is: rich would have turned :smile: into an emoji and eaten [bold].
    assert by_name["markup"] == "Reads <b>tags</b> & 'quotes' :smile: [bold]x[/bold] \\n"
    assert by_name["literal-block"] == "First line. Second line & more."


def test_to_prompt_matches_the_reference_function() -> None:
    assert to_prompt([]) == reference_to_prompt([])
    skills = load_vault(REAL).skills
    entries = [CatalogEntry(s.name, s.manifest.description, str(s.folder.resolve() / "SKILL.md"))
               for _, s in sorted(skills.items())]
    assert to_prompt(entries) == reference_to_prompt([REAL / n for n in sorted(skills)])
    assert catalog_line(CatalogEntry(" a ", "x\n")) == "a: x"


@pytest.mark.parametrize("folder", sorted(p.name for p in REAL.iterdir() if p.is_dir()))
def test_spec_frontmatter_reads_back_the_same_in_both_readers(folder: str) -> None:
    skill = load_vault(REAL).skills[folder]
    fields = skill.manifest.model_dump(mode="json", by_alias=True, exclude_unset=True)
    written = spec_frontmatter(fields)
    reference, _ = parse_frontmatter(f"---\n{written}---\n\nbody\n")
    ours = load_mapping(written, raw_text_keys=frozenset(SPEC_FIELDS)).data
    assert ours == fields
    assert {k: v for k, v in reference.items() if k != "metadata"} == \
        {k: v for k, v in fields.items() if k != "metadata"}
    # The reference turns each metadata value into str(); what it read is what was written.
    assert reference.get("metadata", {}) == {k: str(v) for k, v in fields.get("metadata",
                                                                               {}).items()}
    # And it is what the folder says: lists stay lists, in block style.
    front, _, _ = split_frontmatter((REAL / folder / "SKILL.md").read_text(encoding="utf-8"))
    assert load_mapping(front, raw_text_keys=frozenset(SPEC_FIELDS)).data == fields
    assert not any(line.rstrip().endswith(("]", "}")) for line in written.splitlines())


@pytest.mark.parametrize(("typo", "meant"), [
    ("inptus", "inputs"), ("timout", "timeout"), ("lable", "label"), ("descripton",
     "description"), ("lisence", "license"), ("allowed_tools", "allowed-tools"),
    ("apporach", "approach"), ("versoin", "version"), ("nme", "name"), ("stpes", "steps"),
])
def test_near_misses_are_suggested(typo: str, meant: str) -> None:
    assert did_you_mean(typo, KNOWN) == meant
    assert unknown_field_hint(typo, KNOWN) == f"did you mean '{meant}'?"


@pytest.mark.parametrize("word", ["author", "tags", "homepage", "requirements", "au",
                                  "metadata-version", "authors"])
def test_other_words_get_no_suggestion(word: str) -> None:
    assert did_you_mean(word, KNOWN) is None
    assert "did you mean" not in unknown_field_hint(word, KNOWN)


def test_common_keys_of_other_clients_get_their_own_fix() -> None:
    author = unknown_field_hint("author", KNOWN)
    assert "metadata:" in author and "did you mean" not in author
    hint = unknown_field_hint("argument-hint", KNOWN)
    assert "Claude Code" in hint and hint.startswith("remove it")
