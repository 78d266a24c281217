"""Folder hashing for published skills (shared/folderhash.py) and the version line a
publish writes (shared/versionline.py): real files in tmp folders, no services."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from shared.errors import FolderChanged
from shared.folderhash import Change, ChangeKind, changes, folder_files, folder_hash
from shared.published import snapshot
from shared.readonly import make_read_only, make_writable
from shared.skill import load_skill
from shared.versionline import skill_md_with_version, version_edit, yaml_with_version

SKILL_MD = """---
name: demo
description: A demo skill.
version: 1
run:
  command: python main.py
---
Does a demo.
"""


def make_skill(root: Path, name: str = "demo") -> Path:
    folder = root / name
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL_MD.replace("demo", name))
    (folder / "main.py").write_text("print('{}')\n")
    (folder / "scripts" / "helper.sh").write_text("echo hi\n")
    return folder


def hashes(folder: Path) -> dict[str, str]:
    return {p: f.sha256 for p, f in folder_files(folder).items()}


def test_hash_is_deterministic_across_copies_and_creation_order(tmp_path: Path) -> None:
    a = make_skill(tmp_path / "a")
    b = tmp_path / "b" / "demo"
    b.mkdir(parents=True)
    # Same content written in another order, with other timestamps and modes.
    (b / "scripts").mkdir()
    (b / "scripts" / "helper.sh").write_text("echo hi\n")
    (b / "main.py").write_text("print('{}')\n")
    (b / "SKILL.md").write_text(SKILL_MD)
    os.utime(b / "main.py", (1, 1))
    assert hashes(a) == hashes(b)
    assert folder_hash(hashes(a)) == folder_hash(hashes(b))
    assert folder_hash(hashes(a)) == folder_hash(dict(reversed(list(hashes(a).items()))))
    assert sorted(hashes(a)) == ["SKILL.md", "main.py", "scripts/helper.sh"]
    assert folder_hash(hashes(a)).startswith("sha256:") and len(folder_hash(hashes(a))) == 71


def test_a_change_added_file_or_removed_file_changes_the_hash_and_is_named(
        tmp_path: Path) -> None:
    folder = make_skill(tmp_path)
    before = hashes(folder)
    (folder / "scripts" / "helper.sh").write_text("echo HI\n")  # same size, new bytes
    (folder / "notes.txt").write_text("x")
    (folder / "main.py").unlink()
    after = hashes(folder)
    assert folder_hash(after) != folder_hash(before)
    assert changes(before, after) == [Change(ChangeKind.REMOVED, "main.py"),
                                      Change(ChangeKind.ADDED, "notes.txt"),
                                      Change(ChangeKind.CHANGED, "scripts/helper.sh")]
    message = str(FolderChanged("demo", 1, folder, changes(before, after)))
    assert "scripts/helper.sh changed" in message and "notes.txt added" in message
    assert "main.py removed" in message and "skillq publish demo" in message


def test_a_renamed_file_is_a_change_even_with_the_same_bytes(tmp_path: Path) -> None:
    folder = make_skill(tmp_path)
    before = folder_hash(hashes(folder))
    (folder / "main.py").rename(folder / "main2.py")
    assert folder_hash(hashes(folder)) != before


def test_run_window_and_caches_are_not_content(tmp_path: Path) -> None:
    folder = make_skill(tmp_path)
    before = folder_hash(hashes(folder))
    (folder / "benchmarks.json").write_text('{"skill": "demo", "runs": []}')
    (folder / ".benchmarks.json.tmp123").write_text("half")  # an atomic rewrite in flight
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "main.cpython-311.pyc").write_bytes(b"\0")
    (folder / ".DS_Store").write_bytes(b"\0")
    assert folder_hash(hashes(folder)) == before
    (folder / "scripts" / "benchmarks.json").write_text("{}")  # only the top one is a window
    assert folder_hash(hashes(folder)) != before


def test_a_symlink_is_hashed_as_its_target_text_not_followed(tmp_path: Path) -> None:
    folder = make_skill(tmp_path)
    before = hashes(folder)
    shutil.copy(folder / "main.py", tmp_path / "outside.py")
    (folder / "main.py").unlink()
    (folder / "main.py").symlink_to(tmp_path / "outside.py")
    found = changes(before, hashes(folder))
    assert found == [Change(ChangeKind.CHANGED, "main.py")]
    assert snapshot(folder).symlinks == ["main.py"]


def test_snapshot_hashes_equal_streamed_hashes(tmp_path: Path) -> None:
    folder = make_skill(tmp_path)
    (folder / "big.bin").write_bytes(os.urandom(3 * 1024 * 1024 + 7))  # several chunks
    snap = snapshot(folder)
    assert snap.hashes == hashes(folder)
    assert snap.folder_hash == folder_hash(hashes(folder))
    assert snap.contents["big.bin"] == (folder / "big.bin").read_bytes()


def test_read_only_keeps_root_writable_for_the_run_window(tmp_path: Path) -> None:
    folder = make_skill(tmp_path)
    (folder / "benchmarks.json").write_text("{}")
    make_read_only(folder, keep_root_writable=True)
    try:
        for path in (folder / "SKILL.md", folder / "scripts", folder / "scripts" / "helper.sh"):
            assert not path.stat().st_mode & 0o222, path
        assert folder.stat().st_mode & 0o200
        assert (folder / "benchmarks.json").stat().st_mode & 0o200
    finally:
        make_writable(folder)
    assert (folder / "scripts" / "helper.sh").stat().st_mode & 0o200


# -- the version line ----------------------------------------------------------------------

def test_version_line_is_replaced_keeping_comments_and_line_ends() -> None:
    text = ("---\r\nname: demo\r\nversion: 3   # bumped by publish\r\ndescription: d\r\n"
            "---\r\nbody\r\n")
    assert skill_md_with_version(text, 4) == text.replace("version: 3", "version: 4")


def test_version_line_is_added_when_absent_and_nested_keys_are_left_alone() -> None:
    text = "---\nname: demo\nmetadata:\n  version: '9'\n---\nbody\n"
    assert skill_md_with_version(text, 2) == (
        "---\nname: demo\nmetadata:\n  version: '9'\nversion: 2\n---\nbody\n")
    assert yaml_with_version("run:\n  command: x", 5) == "run:\n  command: x\nversion: 5\n"
    assert yaml_with_version("version: 1\nrun: {command: x}\n", 2) == \
        "version: 2\nrun: {command: x}\n"


@pytest.mark.parametrize("form", ["bot0", "agentskills", "plain"])
def test_version_edit_writes_where_the_form_keeps_it(tmp_path: Path, form: str) -> None:
    folder = tmp_path / "demo"
    folder.mkdir()
    spec = "---\nname: demo\ndescription: A demo skill.\n---\nbody\n"
    if form == "bot0":
        (folder / "SKILL.md").write_text(SKILL_MD)
    else:
        (folder / "SKILL.md").write_text(spec)
    if form == "agentskills":
        (folder / "skill.yaml").write_text("version: 1\nrun:\n  command: python main.py\n")
    skill, problems = load_skill(folder)
    assert skill is not None and not problems
    edit = version_edit(skill, 7)
    edit.path.write_text(edit.text)
    again, problems = load_skill(folder)
    assert again is not None and not problems and again.manifest.version == 7
    assert edit.path.name == ("SKILL.md" if form == "bot0" else "skill.yaml")
    assert edit.created == (form == "plain")
    if form != "bot0":
        assert (folder / "SKILL.md").read_text() == spec  # stays an Agent Skills SKILL.md
