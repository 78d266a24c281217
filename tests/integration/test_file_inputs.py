"""Inputs and outputs of type `file` through the real CLI, store and workers: a relative
path given to `skillq run` (or in an --inputs-file) reaches the step as a local path to
the same bytes, the file the step writes comes back as an artifact, `skillq artifact get`
writes those bytes, and a file output is handed on to the next step through the store.
A missing file is refused before any run is recorded."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import VAULTS, RunResult, Stack, copy_vault

from shared.db.models import Artifact
from shared.store import unpack

pytestmark = pytest.mark.integration

RunSkill = Callable[..., RunResult]
# Every byte value, a NUL and invalid UTF-8 included: the bytes travel, not a text.
BINARY = b"hello, files\n" + bytes(range(256))


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.fixture
def files_vault(tmp_path: Path) -> Path:
    return copy_vault(VAULTS / "files", tmp_path / "vault")


def outputs_of(stack: Stack, result: RunResult) -> dict[str, Any]:
    assert result.code == 0, result
    assert result.run_id is not None, result
    run = stack.run(result.run_id)
    with stack.db() as session:
        outputs: dict[str, Any] = unpack(session, run.outputs)
    return outputs


def umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def test_a_relative_path_reaches_the_step_and_its_file_comes_back_by_artifact_get(
        healthy: Stack, run_skill: RunSkill, files_vault: Path, tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "notes.txt").write_bytes(BINARY)

    done = run_skill("shout-file", files_vault, inputs={"doc": "data/notes.txt"})

    out = outputs_of(healthy, done)
    # On record: the file by its content's hash, not the caller's path.
    assert healthy.run(done.run_id).inputs["doc"] == {  # type: ignore[arg-type]
        "$ref": sha(BINARY), "name": "notes.txt", "size": len(BINARY)}
    seen = out["seen"]["doc"]
    assert seen["sha256"] == sha(BINARY).removeprefix("sha256:")
    assert seen["name"] == "notes.txt" and seen["size"] == len(BINARY)
    # A local copy in the step's own scratch folder, not the caller's file.
    assert seen["absolute"] and seen["in_scratch"], seen
    assert seen["path"] != str(tmp_path / "data" / "notes.txt")

    loud = BINARY.upper()
    assert out["loud"] == {"$ref": sha(loud), "name": "LOUD-notes.txt", "size": len(loud)}
    with healthy.db() as session:
        row = session.get(Artifact, sha(loud))
        assert row is not None and bytes(row.content) == loud
        assert row.media_type == "text/plain"

    got = healthy.cli("artifact", "get", out["loud"]["$ref"], "-o", "got.txt", cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    written = tmp_path / "got.txt"
    assert written.read_bytes() == loud
    assert stat.S_IMODE(written.stat().st_mode) == 0o666 & ~umask()  # 0644 under 022
    into_folder = healthy.cli("artifact", "get", json.dumps(out["loud"]), "-o", ".",
                              cwd=tmp_path)
    assert into_folder.returncode == 0, into_folder.stderr
    assert (tmp_path / "LOUD-notes.txt").read_bytes() == loud


def test_artifact_get_prints_to_a_pipe_and_refuses_an_unknown_key(
        healthy: Stack, run_skill: RunSkill, files_vault: Path, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"quiet words\n")
    out = outputs_of(healthy, run_skill("shout-file", files_vault, inputs={"doc": "a.txt"}))
    argv = ["artifact", "get", out["loud"]["$ref"]]
    piped = healthy.cli(*argv, cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == "QUIET WORDS\n"

    unknown = "sha256:" + "0" * 64
    missing = healthy.cli("artifact", "get", unknown, "-o", "x.bin", cwd=tmp_path)
    assert missing.returncode == 1, missing
    assert f"no artifact {unknown}" in missing.stderr
    assert "Traceback" not in missing.stderr
    assert not (tmp_path / "x.bin").exists()


def test_paths_in_an_inputs_file_are_relative_to_its_folder(
        healthy: Stack, run_skill: RunSkill, files_vault: Path, tmp_path: Path) -> None:
    job = tmp_path / "job"
    (job / "in").mkdir(parents=True)
    files = {"a.md": b"# a\n", "b.csv": b"x,y\n1,2\n", "c.bin": bytes(range(255, -1, -1))}
    for name, data in files.items():
        (job / "in" / name).write_bytes(data)
    (job / "inputs.json").write_text(json.dumps(
        {"doc": "in/a.md", "extras": ["in/b.csv", "in/c.bin"]}), encoding="utf-8")

    # The command runs in tmp_path, where no in/ folder is.
    done = run_skill("shout-file", files_vault, "--inputs-file", str(job / "inputs.json"))

    seen = outputs_of(healthy, done)["seen"]
    assert [(e["name"], e["size"], e["sha256"]) for e in seen["extras"]] == [
        (n, len(files[n]), hashlib.sha256(files[n]).hexdigest()) for n in ("b.csv", "c.bin")]
    assert all(e["absolute"] and e["in_scratch"] for e in seen["extras"]), seen
    assert seen["doc"]["sha256"] == hashlib.sha256(b"# a\n").hexdigest()


def test_a_missing_file_names_the_input_and_the_path_and_records_no_run(
        healthy: Stack, run_skill: RunSkill, files_vault: Path, tmp_path: Path) -> None:
    (tmp_path / "here.txt").write_text("here\n")
    done = run_skill("shout-file", files_vault, "--input", "extras=here.txt",
                     inputs={"doc": "gone/nope.txt"})

    assert done.code == 2, done
    assert done.run_id is None, "a run was recorded for inputs that were refused"
    assert "doc" in done.stderr
    assert str(tmp_path / "gone" / "nope.txt") in done.stderr, done.stderr
    assert "does not exist" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_file_output_is_handed_to_the_next_step_through_the_store(
        healthy: Stack, run_skill: RunSkill, files_vault: Path, tmp_path: Path) -> None:
    (tmp_path / "doc.txt").write_bytes(BINARY)

    done = run_skill("shout-then-sum", files_vault, inputs={"doc": "doc.txt"})

    out = outputs_of(healthy, done)
    loud = BINARY.upper()
    assert out["sha256"] == sha(loud).removeprefix("sha256:")  # what the second step read
    assert out["loud"]["$ref"] == sha(loud)
    assert done.run_id is not None
    [summed] = healthy.steps(done.run_id, "sum")
    with healthy.db() as session:
        handed = unpack(session, summed.inputs)
    assert handed["doc"] == out["loud"]  # by reference: no worker's path on record
