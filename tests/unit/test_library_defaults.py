"""The default skills shipped with skillq: they validate, their own test cases pass when
their scripts run by the script protocol, and no default changes without a bump of
DEFAULTS_VERSION (orchestrator/defaults/hashes.json records each version's content)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.defaults import DEFAULTS_DIR, DEFAULTS_VERSION, recorded_hashes, shipped_folders
from orchestrator.library.defaults import Installed, Outcome, _staged, decide
from shared.folderhash import hash_folder
from shared.vault import load_vault


def folder_hash(folder: Path) -> str:
    return hash_folder(folder, authored=True)  # what the reconciler compares


def current_hashes() -> dict[str, str]:
    return {name: folder_hash(folder) for name, folder in shipped_folders().items()}


def test_a_changed_default_needs_a_version_bump() -> None:
    recorded = recorded_hashes()
    now = current_hashes()
    entry = json.dumps({str(DEFAULTS_VERSION + 1): now}, indent=2)
    assert recorded.get(DEFAULTS_VERSION) == now, (
        f"the default skills differ from what DEFAULTS_VERSION {DEFAULTS_VERSION} shipped. "
        f"Bump DEFAULTS_VERSION in orchestrator/defaults/__init__.py to "
        f"{DEFAULTS_VERSION + 1} and add to 'versions' in orchestrator/defaults/hashes.json:\n"
        f"{entry}")


def test_versions_are_contiguous_and_each_one_changed_something() -> None:
    recorded = recorded_hashes()
    assert sorted(recorded) == list(range(1, DEFAULTS_VERSION + 1)), \
        "hashes.json needs exactly one entry per version, 1..DEFAULTS_VERSION"
    for version in range(2, DEFAULTS_VERSION + 1):
        assert recorded[version] != recorded[version - 1], \
            f"version {version} ships the same content as {version - 1}: no bump needed"


def test_the_hash_ignores_the_run_window_but_not_the_test_cases(tmp_path: Path) -> None:
    folder = tmp_path / "text-stats"
    source = shipped_folders()["text-stats"]
    folder.mkdir()
    for path in source.iterdir():
        if path.is_file():
            (folder / path.name).write_bytes(path.read_bytes())
    before = folder_hash(folder)
    bench = json.loads((folder / "benchmarks.json").read_text())
    bench["runs"] = [{"run_id": "r1"}]
    bench["aggregates"]["total_runs"] = 1
    (folder / "benchmarks.json").write_text(json.dumps(bench))
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "x.pyc").write_bytes(b"cache")
    assert folder_hash(folder) == before  # workers rewrite runs: not a user edit
    bench["tests"] = bench["tests"][:1]
    (folder / "benchmarks.json").write_text(json.dumps(bench))
    assert folder_hash(folder) != before
    (folder / "benchmarks.json").write_text(json.dumps({**bench, "tests": []}))
    (folder / "SKILL.md").write_text("changed")
    assert folder_hash(folder) != before


def test_the_defaults_are_a_valid_vault() -> None:
    vault = load_vault(DEFAULTS_DIR)
    assert not vault.problems, "\n".join(map(str, vault.problems))
    assert set(vault.skills) == set(shipped_folders()) and len(vault.skills) >= 3


CASES = [(name, case) for name, folder in shipped_folders().items()
         for case in json.loads((folder / "benchmarks.json").read_text())["tests"]]


@pytest.mark.parametrize(("name", "case"), CASES, ids=[f"{n}:{c['id']}" for n, c in CASES])
def test_each_default_passes_its_own_test_cases(name: str, case: dict[str, object],
                                                tmp_path: Path) -> None:
    skill = load_vault(DEFAULTS_DIR).skills[name]
    assert skill.manifest.run is not None
    inputs_path, output_path = tmp_path / "inputs.json", tmp_path / "outputs.json"
    inputs_path.write_text(json.dumps(case["inputs"]))
    env = {"PATH": os.environ["PATH"], "SKILL_INPUTS": str(inputs_path),
           "SKILL_OUTPUT": str(output_path)}
    argv = skill.manifest.run.command.split()
    argv[0] = sys.executable if argv[0] == "python3" else argv[0]
    proc = subprocess.run(argv, cwd=skill.folder, env=env, capture_output=True, text=True,
                          timeout=30, check=False)
    expected = dict(case["expected"])  # type: ignore[call-overload]
    if not expected.pop("success", True):
        assert proc.returncode != 0
        assert expected.pop("error_contains", "") in proc.stderr
        return
    assert proc.returncode == 0, proc.stderr
    outputs = json.loads(output_path.read_text())
    for key, value in expected.items():
        assert outputs[key] == value, key


def test_an_installed_copy_hashes_as_the_shipped_folder(tmp_path: Path) -> None:
    source = tmp_path / "pkg" / "demo"
    shutil.copytree(shipped_folders()["text-stats"], source)
    (source / "run.sh").write_text("echo hi\n")
    (source / "run.sh").chmod(0o555)  # an installed package may be read-only
    (source / "__pycache__").mkdir()  # pip compiles what it installs
    (source / "__pycache__" / "text_stats.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / "vault").mkdir()
    copy = _staged(source, tmp_path / "vault")
    assert folder_hash(copy) == folder_hash(source)
    assert (copy / "run.sh").stat().st_mode & 0o200  # the user's copy is theirs to edit
    assert not (copy / "__pycache__").exists()


SHIPPED, OLD, EDITED = "sha256:shipped", "sha256:old", "sha256:edited"
LEGACY = "sha256:legacy"  # a row written by a skillq that hashed folders differently


@pytest.mark.parametrize(("found", "row", "deleted", "outcome", "reason"), [
    (None, None, False, Outcome.INSTALLED, "defaults v3"),
    (None, Installed(OLD, 1), False, Outcome.INSTALLED, "defaults v3"),  # folder rm'd by hand
    (None, None, True, Outcome.LEFT_ALONE, "you deleted it"),
    (SHIPPED, None, False, Outcome.CURRENT, "defaults v3"),
    (SHIPPED, Installed(OLD, 2), False, Outcome.CURRENT, "defaults v3"),
    (OLD, Installed(OLD, 2), False, Outcome.UPDATED, "v2 -> v3"),
    (EDITED, Installed(OLD, 2), False, Outcome.LEFT_ALONE, "edited since it was installed"),
    (EDITED, None, False, Outcome.LEFT_ALONE, "a skill of yours"),
    (EDITED, Installed(None, None), False, Outcome.LEFT_ALONE, "a skill of yours"),
    (OLD, Installed(OLD, 4), False, Outcome.LEFT_ALONE, "installed by a newer skillq"),
    (OLD, Installed(LEGACY, 2, OLD), False, Outcome.UPDATED, "v2 -> v3"),
    (EDITED, Installed(LEGACY, 2, OLD), False, Outcome.LEFT_ALONE, "edited since"),
])
def test_reconcile_decisions(found: str | None, row: Installed | None, deleted: bool,
                             outcome: Outcome, reason: str) -> None:
    decision = decide("x", SHIPPED, found, row, deleted, version=3)
    assert (decision.outcome, reason in decision.reason) == (outcome, True), decision
