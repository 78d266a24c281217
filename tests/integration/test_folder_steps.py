"""Inputs of type `directory` through the real CLI and sandboxed workers: a repository
in the worker's home (hidden from steps), owned by root, is given to a step that runs as
the step account in bubblewrap. The step reads it (git too, trusting exactly that
folder), cannot write to it, and sees nothing else of that home; a folder whose machine
no daemon serves is refused before any run is recorded, naming the input."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import RunResult, Stack

pytestmark = pytest.mark.integration

RunSkill = Callable[..., RunResult]

SKILL = """---
name: folder-reader
description: Read a folder it is given. Use it for tests.
version: 1
inputs:
  - name: repo
    type: directory
    required: true
outputs:
  - name: report
    type: object
approach: code
run:
  command: python read_folder.py
  timeout: 60
  retries: 0
---

# folder-reader

Reads a folder: a file in it, its git log, whether it may write there and what is beside it.
"""

SCRIPT = """\
import json, os, subprocess, sys
inputs = json.load(open(os.environ["SKILL_INPUTS"]))
repo = inputs["repo"]
log = subprocess.run(["git", "-C", repo, "log", "--format=%s"], capture_output=True,
                     text=True)
try:
    open(os.path.join(repo, "written-by-step"), "w").write("x")
    wrote = True
except OSError:
    wrote = False
print(json.dumps({"report": {
    "repo": repo, "readme": open(os.path.join(repo, "README")).read(),
    "git": log.stdout.split(), "git_error": log.stderr.strip()[-300:],
    "wrote": wrote, "uid": os.getuid(),
    "sibling_seen": os.path.exists(os.path.join(os.path.dirname(repo), "sibling")),
}}))
"""


@pytest.fixture
def outside() -> Iterator[Path]:
    """Folders in the worker's home, which the sandbox hides from steps (and outside the
    test's own folder, which every step may write: SKILLQ_STEP_BINDS): a repository and
    a sibling folder it is not given."""
    top = Path(tempfile.mkdtemp(prefix="skillq-folders-", dir=Path.home()))
    try:
        top.chmod(0o755)
        repo, sibling = top / "repo", top / "sibling"
        repo.mkdir(mode=0o755)
        sibling.mkdir(mode=0o755)
        (repo / "README").write_text("hello from the repository\n")
        git = ["git", "-C", str(repo), "-c", "user.name=T", "-c", "user.email=t@example.com"]
        subprocess.run([*git, "init", "-q"], check=True, timeout=30)
        subprocess.run([*git, "add", "README"], check=True, timeout=30)
        subprocess.run([*git, "commit", "-q", "-m", "first"], check=True, timeout=30)
        for path in (repo, *repo.rglob("*")):
            path.chmod(path.stat().st_mode | 0o055)  # others read: the account may
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def folder_vault(tmp_path: Path) -> Path:
    folder = tmp_path / "vault" / "folder-reader"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL)
    (folder / "read_folder.py").write_text(textwrap.dedent(SCRIPT))
    return tmp_path / "vault"


def test_a_step_reads_a_root_owned_repository_it_was_given_and_nothing_more(
        healthy: Stack, run_skill: RunSkill, folder_vault: Path, outside: Path) -> None:
    done = run_skill("folder-reader", folder_vault, "--json",
                     inputs={"repo": str(outside / "repo")})
    assert done.code == 0, done.stderr
    report = done.json()["report"]
    assert report["repo"] == str((outside / "repo").resolve())
    assert report["readme"] == "hello from the repository\n"
    assert report["git"] == ["first"], report["git_error"]
    assert report["uid"] != 0, "the step ran as the step account"
    assert report["wrote"] is False, "a given folder is read-only to the step"
    assert not (outside / "repo" / "written-by-step").exists()
    assert report["sibling_seen"] is False, "only the folder given is shown of the home"
    # On record: the folder and the machine it is on, not a bare path.
    assert done.run_id is not None
    value = healthy.run(done.run_id).inputs["repo"]
    assert value["$dir"] == str((outside / "repo").resolve())
    assert set(value) == {"$dir", "device", "host"}


def test_a_folder_no_daemon_of_its_machine_can_read_is_refused_before_dispatch(
        healthy: Stack, run_skill: RunSkill, folder_vault: Path, outside: Path) -> None:
    """The client says it is another machine: the folder is that machine's, and no online
    daemon runs there."""
    done = run_skill("folder-reader", folder_vault, inputs={"repo": str(outside / "repo")},
                     env={"SKILLQ_DEVICE_ID": "a-laptop-not-online"})
    assert done.code == 1, done.stderr
    assert done.run_id is None, "nothing recorded"
    assert "input 'repo'" in done.stderr and str(outside / "repo") in done.stderr
    assert "no online daemon of that machine serves queue" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_missing_folder_is_refused_naming_the_input(
        healthy: Stack, run_skill: RunSkill, folder_vault: Path, outside: Path) -> None:
    done = run_skill("folder-reader", folder_vault, inputs={"repo": str(outside / "gone")})
    assert done.code == 2, done.stderr
    assert done.run_id is None
    assert "repo" in done.stderr and "does not exist" in done.stderr
    assert json.dumps(str(outside / "gone"))[1:-1] in done.stderr
