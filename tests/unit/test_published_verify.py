"""The check of a published folder (shared/published.py verify, run by workers before
every step): it names what changed, and an unchanged folder is not read again (real
files, no services)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from shared import folderhash, published
from shared.published import PublishedFiles, snapshot


def published_files(folder: Path) -> PublishedFiles:
    snap = snapshot(folder)
    return PublishedFiles("demo", 1, snap.folder_hash, snap.hashes,
                          frozenset(p for p, f in snap.files.items() if f.executable))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    skill = tmp_path / "demo"
    (skill / "lib").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: demo\ndescription: d\n---\n")
    (skill / "lib" / "run.py").write_text("print(1)\n")
    return skill


def test_unchanged_folder_is_hashed_once_then_trusted_by_its_stat_signature(
        folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = published_files(folder)
    reads: list[Path] = []
    real = folderhash.folder_files

    def counting(path: Path) -> dict[str, folderhash.FileEntry]:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(published, "folder_files", counting)
    monkeypatch.setattr(published, "RACY_S", 0.0)  # these files are only just written
    assert published.verify(folder, files) == []
    assert published.verify(folder, files) == []
    assert len(reads) == 1
    (folder / "lib" / "new.py").write_text("")
    assert [str(c) for c in published.verify(folder, files)] == ["lib/new.py added"]
    assert len(reads) == 2


def test_a_same_size_rewrite_with_the_old_mtime_is_still_caught(folder: Path) -> None:
    # Written within the file clock's tick, size and times could all stay the same: a
    # folder with files this fresh is never trusted by its signature.
    files = published_files(folder)
    assert published.verify(folder, files) == []
    st = (folder / "lib" / "run.py").stat()
    (folder / "lib" / "run.py").write_text("print(2)\n")
    os.utime(folder / "lib" / "run.py", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert [str(c) for c in published.verify(folder, files)] == ["lib/run.py changed"]


def test_an_added_file_is_named(folder: Path) -> None:
    files = published_files(folder)
    assert published.verify(folder, files) == []
    (folder / "extra.sh").write_text("rm -rf /\n")
    assert [str(c) for c in published.verify(folder, files)] == ["extra.sh added"]


def test_the_run_window_is_rewritten_without_a_rehash_but_test_cases_are_checked(
        folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bench = {"skill": "demo", "tests": [{"id": "t1", "inputs": {}}], "runs": []}
    (folder / "benchmarks.json").write_text(json.dumps(bench))
    files = published_files(folder)
    reads: list[Path] = []
    real = folderhash.folder_files

    def counting(path: Path) -> dict[str, folderhash.FileEntry]:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(published, "folder_files", counting)
    monkeypatch.setattr(published, "RACY_S", 0.0)
    assert published.verify(folder, files) == []
    bench["runs"] = [{"run_id": "r1"}]  # what a worker writes after every run
    (folder / "benchmarks.json").write_text(json.dumps(bench))
    assert published.verify(folder, files) == []
    assert len(reads) == 1
    bench["tests"] = []
    (folder / "benchmarks.json").write_text(json.dumps(bench))
    assert [str(c) for c in published.verify(folder, files)] == ["benchmarks.json removed"]


def test_a_chmod_is_named_even_when_the_folder_was_verified_and_remembered(
        folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(published, "RACY_S", 0.0)
    (folder / "lib" / "run.py").chmod(0o644)
    files = published_files(folder)
    assert published.verify(folder, files) == []
    (folder / "lib" / "run.py").chmod(0o755)
    assert [str(c) for c in published.verify(folder, files)] == ["lib/run.py made executable"]


def test_a_version_published_before_versions_held_their_tests_verifies_by_its_rules(
        folder: Path) -> None:
    """Rows of hash scheme 1 (before migration 0009) recorded neither benchmarks.json
    nor bytecode caches: an upgrade must not turn them into drafts."""
    before = published_files(folder)
    legacy = PublishedFiles("demo", 1, before.folder_hash, before.hashes,
                            before.executable, hash_scheme=1)
    (folder / "benchmarks.json").write_text(json.dumps(
        {"skill": "demo", "tests": [{"id": "t1", "name": "n", "inputs": {}}]}))
    (folder / "lib" / "__pycache__").mkdir()
    (folder / "lib" / "__pycache__" / "run.cpython-311.pyc").write_bytes(b"cache")
    assert published.verify(folder, legacy) == []
    assert sorted(str(c) for c in published.verify(folder, before)) == [
        "benchmarks.json added", "lib/__pycache__/run.cpython-311.pyc added"]
    (folder / "lib" / "run.py").write_text("print(3)\n")  # the rest is checked as before
    assert [str(c) for c in published.verify(folder, legacy)] == ["lib/run.py changed"]
