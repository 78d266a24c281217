"""Folder hashing for published skills (shared/folderhash.py) and the version line a
publish writes (shared/versionline.py): real files in tmp folders, no services."""

from __future__ import annotations

import json
import os
import py_compile
import shutil
from pathlib import Path

import pytest

from shared.atomic import write_text
from shared.errors import FolderChanged
from shared.folderhash import (
    Change,
    ChangeKind,
    changes,
    fingerprints,
    folder_files,
    folder_hash,
    hash_folder,
    remember_tests,
    stat_signature,
)
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
    return fingerprints(folder_files(folder))


def bench(folder: Path, **doc: object) -> None:
    (folder / "benchmarks.json").write_text(json.dumps({"skill": "demo", **doc}))


CASE = {"id": "one", "inputs": {"x": 1}, "expected": {"success": True}}


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


def test_the_run_window_is_not_content_but_the_test_cases_are(tmp_path: Path) -> None:
    folder = make_skill(tmp_path)
    before = folder_hash(hashes(folder))
    bench(folder, tests=[], runs=[])  # what a worker writes after a first run
    (folder / ".benchmarks.json.tmp123").write_text("half")  # an atomic rewrite in flight
    (folder / ".DS_Store").write_bytes(b"\0")
    assert folder_hash(hashes(folder)) == before
    bench(folder, tests=[CASE], runs=[])
    with_tests = hashes(folder)
    assert [str(c) for c in changes(fingerprints(folder_files(make_skill(tmp_path / "b"))),
                                    with_tests)] == ["benchmarks.json added"]
    # Runs, aggregates, the version line, key order and layout: a worker's rewrite.
    (folder / "benchmarks.json").write_text(json.dumps(
        {"runs": [{"run_id": "r1"}], "version": 7, "aggregates": {"total_runs": 1},
         "tests": [dict(reversed(list(CASE.items())))], "skill": "demo"}, indent=4))
    (folder / "benchmarks.json").chmod(0o600)
    assert hashes(folder) == with_tests
    edited = {**CASE, "expected": {"success": False}}
    bench(folder, tests=[edited], runs=[])
    assert [str(c) for c in changes(with_tests, hashes(folder))] == ["benchmarks.json changed"]
    (folder / "scripts" / "benchmarks.json").write_text("{}")  # only the top one is a window
    assert "scripts/benchmarks.json" in hashes(folder)


def test_bytecode_caches_are_content(tmp_path: Path) -> None:
    # Python runs a __pycache__ .pyc (or a lone .pyc) instead of reading the .py: a
    # published folder that gains one has changed, whatever its bytes.
    folder = make_skill(tmp_path)
    (folder / "helper.py").write_text("WORD = 'real'\n")
    before = hashes(folder)
    forged = tmp_path / "forged.py"
    forged.write_text("WORD = 'forged'\n")
    cache = folder / "__pycache__" / "helper.cpython-311.pyc"
    py_compile.compile(str(forged), cfile=str(cache), doraise=True)
    (folder / "lone.pyc").write_bytes(cache.read_bytes())
    assert [str(c) for c in changes(before, hashes(folder))] == [
        "__pycache__/helper.cpython-311.pyc added", "lone.pyc added"]
    # What a person wrote leaves caches out (the defaults reconciler, vault archives).
    shutil.rmtree(folder / "__pycache__")
    (folder / "lone.pyc").unlink()
    authored = hash_folder(folder, authored=True)
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "helper.cpython-311.pyc").write_bytes(b"\0")
    (folder / "node_modules").mkdir()
    (folder / "node_modules" / "x.js").write_text("")
    assert hash_folder(folder, authored=True) == authored
    assert hash_folder(folder) != authored


def test_the_executable_bit_is_content(tmp_path: Path) -> None:
    folder = make_skill(tmp_path)
    before = hashes(folder)
    script = folder / "scripts" / "helper.sh"
    script.chmod(0o755)
    after = hashes(folder)
    assert folder_hash(after) != folder_hash(before)
    assert [str(c) for c in changes(before, after)] == ["scripts/helper.sh made executable"]
    assert folder_files(folder)["scripts/helper.sh"].sha256 == \
        folder_files(folder)["scripts/helper.sh"].fingerprint.removesuffix(" +x")
    script.chmod(0o644)
    assert changes(after, hashes(folder)) == [
        Change(ChangeKind.NOT_EXECUTABLE, "scripts/helper.sh")]
    script.chmod(0o444)  # write bits are not content: publishing clears them
    assert hashes(folder) == before
    script.write_text("echo HI\n")
    script.chmod(0o755)
    assert changes(before, hashes(folder)) == [Change(ChangeKind.CHANGED, "scripts/helper.sh")]


def test_the_signature_follows_modes_and_test_cases_but_not_the_run_window(
        tmp_path: Path) -> None:
    folder = make_skill(tmp_path)
    bench(folder, tests=[CASE], runs=[])
    first = stat_signature(folder)
    assert "benchmarks.json" not in {s[0] for s in first.stats}
    bench(folder, tests=[CASE], runs=[{"run_id": "r1"}])
    assert stat_signature(folder) == first
    bench(folder, tests=[], runs=[])
    assert stat_signature(folder).tests is None
    bench(folder, tests=[CASE], runs=[])
    (folder / "main.py").chmod(0o755)
    assert stat_signature(folder) != first


def test_a_rewrite_remembered_by_its_writer_signs_as_the_file_reads(
        tmp_path: Path) -> None:
    """A worker rewriting benchmarks.json hands its test cases' fingerprint to the
    signature (it is not read back): what it hands over is what the file holds, and a
    later edit of the test cases still shows."""
    folder = make_skill(tmp_path)
    path = folder / "benchmarks.json"
    for tests in ([CASE], []):
        doc = {"skill": "demo", "version": 1, "tests": tests, "runs": [{"run_id": "r"}]}
        text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
        write_text(path, text, durable=False)
        remember_tests(path, doc, len(text.encode()))
        read = folder_files(folder).get("benchmarks.json")  # the bytes, read
        assert stat_signature(folder).tests == (read.fingerprint if read else None)
    edited = {"skill": "demo", "tests": [{**CASE, "id": "two"}], "runs": []}
    write_text(path, json.dumps(edited), durable=False)  # replaced whole, as editors do
    assert stat_signature(folder).tests == folder_files(folder)["benchmarks.json"].fingerprint


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
    (folder / "main.py").chmod(0o755)
    bench(folder, tests=[CASE], runs=[{"run_id": "r1"}])
    snap = snapshot(folder)
    assert snap.fingerprints == hashes(folder)
    assert snap.hashes["main.py"] + " +x" == snap.fingerprints["main.py"]
    assert snap.folder_hash == folder_hash(hashes(folder))
    assert snap.contents["big.bin"] == (folder / "big.bin").read_bytes()
    # The stored benchmarks.json is the version's part alone, and loads by itself.
    stored = json.loads(snap.contents["benchmarks.json"])
    assert stored == {"skill": "demo", "tests": [CASE]}
    copy = make_skill(tmp_path / "copy")
    (copy / "benchmarks.json").write_bytes(snap.contents["benchmarks.json"])
    skill, problems = load_skill(copy)
    assert skill is not None and skill.benchmarks is not None and not problems
    assert [c.id for c in skill.benchmarks.tests] == ["one"]


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
