"""Inputs and outputs of type `file`, without services: paths as the command line takes
them (relative to the caller, checked, capped), the value on record, and a real script
handed local paths and naming the files it wrote (the store here is a dict: the shared
store itself is tests/integration/test_file_inputs.py's)."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from shared.errors import InputError
from shared.inputs import parse_cli_inputs
from shared.manifest import Manifest
from shared.store import is_ref, unpack
from shared.valuetypes import ValueType, parse_type, type_error
from workers.file_inputs import safe_name
from workers.script_executor import ScriptStatus, run_script

PY = shlex.quote(sys.executable)


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.fixture
def manifest() -> Manifest:
    return Manifest.model_validate({
        "name": "files", "description": "Take files. Use it for tests.",
        "inputs": [{"name": "doc", "type": "file", "required": True},
                   {"name": "more", "type": "file[]"},
                   {"name": "title", "type": "string"}],
    })


def problems(manifest: Manifest, pairs: list[str], **kw: Any) -> list[str]:
    with pytest.raises(InputError) as info:
        parse_cli_inputs(manifest, pairs, **kw)
    return [str(p) for p in info.value.problems]


# --- the type ----------------------------------------------------------------------------


def test_file_is_a_type_and_a_near_miss_is_pointed_at_it() -> None:
    assert parse_type("file") == ValueType("file")
    assert parse_type("file[]") == ValueType("file", 1)
    with pytest.raises(ValueError, match="did you mean 'file'"):
        parse_type("files")


def test_a_stored_file_fits_and_a_path_does_not_once_the_run_is_recorded() -> None:
    stored = {"$ref": sha(b"x"), "name": "x.txt", "size": 1}
    assert type_error(stored, ValueType("file")) is None
    assert type_error({"$ref": sha(b"x")}, ValueType("file")) is None  # a screenshot's
    assert "give its path" in (type_error("x.txt", ValueType("file")) or "")
    assert type_error({"$ref": "sha256:nothex", "name": "x"}, ValueType("file")) is not None
    local = {"$local": "/tmp/x.txt", "name": "x.txt", "size": 1}
    assert type_error(local, ValueType("file")) is not None
    assert type_error(local, ValueType("file"), local_files=True) is None


def test_a_file_value_points_into_the_store_but_is_never_unpacked_as_json() -> None:
    stored = {"$ref": sha(b"x"), "name": "x.txt", "size": 1}
    assert is_ref(stored)  # the dashboard lists it as a download
    assert unpack(None, stored) is stored  # type: ignore[arg-type]  # no session needed


# --- the command line --------------------------------------------------------------------


def test_a_relative_path_is_the_callers_and_is_held_as_a_local_file(
        manifest: Manifest, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_bytes(b"abc")
    got = parse_cli_inputs(manifest, ["doc=in/a.txt"], files_from=tmp_path)
    assert got["doc"] == {"$local": str(tmp_path / "in" / "a.txt"), "name": "a.txt", "size": 3}


def test_a_missing_file_names_the_input_and_the_path(manifest: Manifest,
                                                     tmp_path: Path) -> None:
    [line] = problems(manifest, ["doc=gone/x.csv"], files_from=tmp_path)
    assert line.startswith("--input: doc: file 'gone/x.csv' does not exist")
    assert str(tmp_path / "gone" / "x.csv") in line


def test_a_folder_and_an_empty_path_are_refused(manifest: Manifest, tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    [folder] = problems(manifest, ["doc=dir"], files_from=tmp_path)
    assert "is a folder" in folder
    [empty] = problems(manifest, ["doc="], files_from=tmp_path)
    assert "give the path of a file" in empty


def test_a_file_over_the_cap_names_the_setting(manifest: Manifest, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLQ_FILE_MAX_BYTES", "4")
    (tmp_path / "ok").write_bytes(b"1234")
    (tmp_path / "big").write_bytes(b"12345")
    assert parse_cli_inputs(manifest, ["doc=ok"], files_from=tmp_path)["doc"]["size"] == 4
    [line] = problems(manifest, ["doc=big"], files_from=tmp_path)
    assert "5 bytes, over the 4-byte cap" in line and "SKILLQ_FILE_MAX_BYTES" in line


def test_a_file_list_takes_repeats_and_json(manifest: Manifest, tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        (tmp_path / name).write_text(name)
    got = parse_cli_inputs(manifest, ["doc=a", "more=b", "more=c"], files_from=tmp_path)
    assert [f["name"] for f in got["more"]] == ["b", "c"]
    got = parse_cli_inputs(manifest, ["doc=a", 'more=["c", "a"]'], files_from=tmp_path)
    assert [f["name"] for f in got["more"]] == ["c", "a"]
    [line] = problems(manifest, ["doc=a", 'more=["b", "zz"]'], files_from=tmp_path)
    assert "'zz' does not exist" in line


def test_paths_in_an_inputs_file_are_relative_to_its_folder(manifest: Manifest,
                                                             tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (job / "a.txt").write_text("a")
    stored = {"$ref": sha(b"b"), "name": "b.txt", "size": 1}
    (job / "inputs.json").write_text(json.dumps({"doc": "a.txt", "more": [stored]}))
    got = parse_cli_inputs(manifest, [], job / "inputs.json", files_from=tmp_path / "else")
    assert got["doc"]["$local"] == str(job / "a.txt")
    assert got["more"] == [stored]  # a stored file (a run's output, say) is taken as is


def test_a_stored_file_or_a_bracketed_name_may_be_given_on_the_command_line(
        manifest: Manifest, tmp_path: Path) -> None:
    (tmp_path / "[draft] notes.txt").write_text("draft")
    stored = {"$ref": sha(b"b"), "name": "b.txt", "size": 1}
    got = parse_cli_inputs(manifest, ["doc=[draft] notes.txt", f"more={json.dumps(stored)}"],
                           files_from=tmp_path)
    assert got["doc"]["name"] == "[draft] notes.txt"
    assert got["more"] == [stored]
    [line] = problems(manifest, ['doc={"$ref": "nothing"}'], files_from=tmp_path)
    assert "expected a file" in line


def test_the_dashboard_lists_file_outputs_as_downloads() -> None:
    from orchestrator.dashboard.pages_runs import artifact_keys

    report = {"$ref": sha(b"r"), "name": "r.html", "size": 1}
    outputs = {"report": report, "parts": [{"$ref": sha(b"p"), "name": "p", "size": 1}],
               "title": "not a file"}
    assert artifact_keys(outputs) == [sha(b"r"), sha(b"p")]


def test_a_form_for_others_takes_no_path_on_this_machine(manifest: Manifest,
                                                         tmp_path: Path) -> None:
    (tmp_path / "a").write_text("a")
    [line] = problems(manifest, ["doc=a"], files_from=tmp_path, local_files=False)
    assert "not a path on this machine" in line


# --- a real script -------------------------------------------------------------------------


@dataclass
class DictFiles:
    """The FileStore protocol over a dict."""

    max_bytes: int = 1 << 20
    blobs: dict[str, bytes] = field(default_factory=dict)

    def fetch(self, key: str) -> bytes:
        return self.blobs[key]

    def put(self, data: bytes, name: str) -> str:
        self.blobs[sha(data)] = data
        return sha(data)

    def add(self, data: bytes, name: str) -> dict[str, Any]:
        return {"$ref": self.put(data, name), "name": name, "size": len(data)}


SCRIPT = """\
import json, os, pathlib
inputs = json.load(open(os.environ["SKILL_INPUTS"]))
{body}
"""


def script_skill(tmp_path: Path, body: str) -> tuple[Path, Manifest]:
    folder = tmp_path / "skill"
    folder.mkdir()
    (folder / "main.py").write_text(SCRIPT.format(body=textwrap.dedent(body)))
    manifest = Manifest.model_validate({
        "name": "files", "description": "Files in and out. Use it for tests.",
        "inputs": [{"name": "doc", "type": "file"}, {"name": "more", "type": "file[]"}],
        "outputs": [{"name": "out", "type": "file"}, {"name": "seen", "type": "object"}],
        "run": {"command": f"{PY} main.py", "timeout": 10},
    })
    return folder, manifest


def run(folder: Path, manifest: Manifest, inputs: dict[str, Any], files: DictFiles) -> Any:
    return run_script(folder, manifest, inputs, secrets={}, timeout_s=10,
                      max_output_bytes=1 << 16, files=files)


ECHO = """
doc = pathlib.Path(inputs["doc"])
pathlib.Path("copy.bin").write_bytes(doc.read_bytes()[::-1])
seen = {"doc": str(doc), "cwd": os.getcwd(), "more": inputs.get("more"),
        "bytes": list(doc.read_bytes())}
json.dump({"out": "copy.bin", "seen": seen}, open(os.environ["SKILL_OUTPUT"], "w"))
"""


def test_the_script_reads_a_local_copy_and_its_file_comes_back_stored(tmp_path: Path) -> None:
    folder, manifest = script_skill(tmp_path, ECHO)
    files = DictFiles()
    data = bytes(range(256))
    doc = files.add(data, "../../etc/pass wd?.bin")  # a name cannot lead out of the folder
    more = [files.add(b"1", "same.txt"), files.add(b"2", "same.txt")]

    done = run(folder, manifest, {"doc": doc, "more": more}, files)

    assert done.status == ScriptStatus.SUCCESS, done.error
    seen = done.outputs["seen"]
    scratch = Path(seen["cwd"]).parent
    assert Path(seen["doc"]).parent == scratch / "files" / "doc"
    assert Path(seen["doc"]).name == "pass wd_.bin"
    assert seen["bytes"] == list(data)
    assert [Path(p).name for p in seen["more"]] == ["same.txt", "same.txt"]
    assert len(set(seen["more"])) == 2  # same names, two files
    assert done.outputs["out"] == {"$ref": sha(data[::-1]), "name": "copy.bin", "size": 256}
    assert files.blobs[sha(data[::-1])] == data[::-1]
    assert not scratch.exists()  # cleaned up, the outputs stored first


@pytest.mark.parametrize(("body", "phrase"), [
    ('json.dump({"out": "/etc/hostname", "seen": {}}, open(os.environ["SKILL_OUTPUT"], "w"))',
     "outside the step's scratch folder"),
    ('os.symlink("/etc/hostname", "link")\n'
     'json.dump({"out": "link", "seen": {}}, open(os.environ["SKILL_OUTPUT"], "w"))',
     "outside the step's scratch folder"),
    ('os.symlink("main.py", "link")\n'
     'json.dump({"out": "link", "seen": {}}, open(os.environ["SKILL_OUTPUT"], "w"))',
     "not a regular file"),
    ('json.dump({"out": "never.txt", "seen": {}}, open(os.environ["SKILL_OUTPUT"], "w"))',
     "which the step did not write"),
    ('pathlib.Path("big").write_bytes(b"x" * 65)\n'
     'json.dump({"out": "big", "seen": {}}, open(os.environ["SKILL_OUTPUT"], "w"))',
     "over SKILLQ_FILE_MAX_BYTES"),
    ('json.dump({"out": 7, "seen": {}}, open(os.environ["SKILL_OUTPUT"], "w"))',
     "output 'out' names the file(s) the step wrote, as a path"),
], ids=["outside", "link-outside", "link-inside", "not-written", "too-big", "not-a-path"])
def test_a_file_output_that_is_not_the_steps_own_file_is_refused(
        tmp_path: Path, body: str, phrase: str) -> None:
    folder, manifest = script_skill(tmp_path, body)
    files = DictFiles(max_bytes=64)
    done = run(folder, manifest, {}, files)
    assert done.status == ScriptStatus.BAD_OUTPUT
    assert phrase in (done.error or ""), done.error
    assert done.outputs is None and not files.blobs


def test_a_stored_file_that_is_gone_or_altered_fails_before_the_script_starts(
        tmp_path: Path) -> None:
    folder, manifest = script_skill(tmp_path, 'open("ran", "w")')
    files = DictFiles()
    doc = files.add(b"right", "a.txt")
    files.blobs[doc["$ref"]] = b"wrong"
    done = run(folder, manifest, {"doc": doc}, files)
    assert done.status == ScriptStatus.FAILED and done.exit_code is None
    assert "do not match their hash" in (done.error or "")
    gone = run(folder, manifest, {"doc": {"$ref": sha(b"never"), "name": "n"}}, files)
    assert "is not in the shared store" in (gone.error or "")
    assert not (folder / "ran").exists()


def test_file_types_need_a_store(tmp_path: Path) -> None:
    folder, manifest = script_skill(tmp_path, "")
    with pytest.raises(ValueError, match="pass files="):
        run_script(folder, manifest, {}, secrets={}, timeout_s=5, max_output_bytes=100)


@pytest.mark.parametrize(("name", "safe"), [
    ("report.csv", "report.csv"), ("../../x", "x"), ("a\\b\\c.txt", "c.txt"),
    ("", "file"), ("..", "file"), ("ü ñ.md", "ü ñ.md"), ("a;rm -rf$.sh", "a_rm -rf_.sh"),
])
def test_safe_names(name: str, safe: str) -> None:
    assert safe_name(name) == safe
    assert os.sep not in safe_name(name)


# --- skillq artifact get -------------------------------------------------------------------


@pytest.mark.parametrize("ref", [
    "sha256:" + "ab" * 32, "sha256-" + "ab" * 32, "ab" * 32, "SHA256:" + "AB" * 32,
    json.dumps({"$ref": "sha256:" + "ab" * 32, "name": "../r.html", "size": 3}),
])
def test_artifact_get_takes_a_key_in_any_form_it_is_shown_in(ref: str) -> None:
    from orchestrator.cli.artifact_cmds import parse_ref

    key, name = parse_ref(ref)
    assert key == "sha256:" + "ab" * 32
    assert name == ("r.html" if ref.startswith("{") else None)


@pytest.mark.parametrize("ref", ["sha256:abc", "run-1234", '{"name": "x"}', "{not json"])
def test_artifact_get_refuses_what_is_not_a_key(ref: str) -> None:
    from orchestrator.cli.artifact_cmds import parse_ref
    from shared.errors import ArtifactError

    with pytest.raises(ArtifactError, match="sha256:<"):
        parse_ref(ref)


def test_artifact_get_writes_whole_files_with_the_umask_mode(tmp_path: Path) -> None:
    from orchestrator.cli.artifact_cmds import write_file
    from shared.errors import ArtifactError

    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    old = os.umask(0o022)
    try:
        write_file(target, b"\x00new")
    finally:
        os.umask(old)
    assert target.read_bytes() == b"\x00new"
    assert target.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]  # no temporary left
    with pytest.raises(ArtifactError, match="does not exist"):
        write_file(tmp_path / "no" / "such.bin", b"x")
