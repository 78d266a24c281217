"""A skill builder's file tools reach its draft folder and nothing else (issue 44:
"a builder's writes outside its draft folder are refused"): workers/agent/draft_tools.py,
on real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workers.agent.draft_tools import DraftFolder


@pytest.fixture
def draft(tmp_path: Path) -> DraftFolder:
    root = tmp_path / "vault" / "repo-commits"
    root.mkdir(parents=True)
    return DraftFolder(root, max_file_bytes=1000)


def outside(tmp_path: Path) -> set[str]:
    """Every file under tmp_path that is not in the draft folder."""
    return {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")
            if p.is_file() and "repo-commits" not in p.parts}


def test_writes_and_reads_inside_the_folder(draft: DraftFolder) -> None:
    assert draft.write_file("SKILL.md", "---\nname: x\n---\n") == "wrote SKILL.md (16 bytes)"
    assert draft.write_file("scripts/fetch.py", "print(1)\n").startswith("wrote")
    assert draft.read_file("./scripts/fetch.py") == "print(1)\n"
    assert draft.list_files() == "SKILL.md\nscripts/fetch.py"


@pytest.mark.parametrize("path", [
    "../other/SKILL.md", "/etc/passwd", "scripts/../../x.py", ".env", "a/.git/config", "",
    "..\\escape.py",
])
def test_a_path_out_of_the_folder_is_refused_and_nothing_is_written(
        draft: DraftFolder, tmp_path: Path, path: str) -> None:
    before = outside(tmp_path)
    said = draft.write_file(path, "x")
    assert said.startswith("error: "), said
    assert draft.read_file(path).startswith("error: ")
    assert outside(tmp_path) == before
    assert draft.list_files() == "(no files yet)"


def test_a_symbolic_link_is_never_followed(draft: DraftFolder, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read")
    os.symlink(secret, draft.root / "notes.txt")
    os.symlink(tmp_path, draft.root / "up")
    assert "symbolic link" in draft.read_file("notes.txt")
    assert "symbolic link" in draft.write_file("notes.txt", "overwritten")
    assert "symbolic link" in draft.write_file("up/planted.py", "x")
    assert secret.read_text() == "do not read" and not (tmp_path / "planted.py").exists()


def test_a_file_past_the_limit_is_refused(draft: DraftFolder) -> None:
    assert "over the limit of 1000" in draft.write_file("big.json", "x" * 1001)
    assert draft.list_files() == "(no files yet)"


def test_they_are_tools_a_model_calls_by_name(draft: DraftFolder) -> None:
    assert [t.name for t in draft.tools()] == ["write_file", "read_file", "list_files"]
