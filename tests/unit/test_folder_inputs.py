"""Inputs of type `directory`, without services: a path as the command line, an inputs
file or an MCP client gives it (relative to the caller, checked, named with this machine),
routing to that machine's daemons, what a real script step sees (a plain path, git trusting
exactly that folder) and the checks on a skill's declarations. Through real workers and
bubblewrap: tests/integration/test_folder_steps.py."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from lifecycle.routing import Folder, NoRoute, OnlineDaemon, folder_of, route
from shared.errors import InputError
from shared.inputs import local_paths, parse_cli_inputs, resolve_inputs
from shared.machine import device_id
from shared.manifest import Manifest, Requires
from shared.settings import Settings
from shared.valuetypes import ValueType, dir_value, parse_type, type_error
from workers.folder_inputs import FolderProblem, as_paths, folders, git_trust
from workers.script_executor import ScriptStatus, run_script

PY = shlex.quote(sys.executable)


@pytest.fixture
def manifest() -> Manifest:
    return Manifest.model_validate({
        "name": "reader", "description": "Read folders. Use it for tests.",
        "inputs": [{"name": "repo", "type": "directory", "required": True},
                   {"name": "more", "type": "directory[]"},
                   {"name": "title", "type": "string"}],
    })


def problems(manifest: Manifest, pairs: list[str], **kw: Any) -> list[str]:
    with pytest.raises(InputError) as info:
        parse_cli_inputs(manifest, pairs, **kw)
    return [str(p) for p in info.value.problems]


def here(path: Path) -> dict[str, Any]:
    import socket

    return dir_value(str(path.resolve()), device_id(Settings()), socket.gethostname())


# --- the type and the door ------------------------------------------------------------


def test_directory_is_a_type_and_a_value_names_its_machine() -> None:
    assert parse_type("directory[]") == ValueType("directory", 1)
    value = dir_value("/srv/repo", "m-1", "laptop")
    assert type_error(value, ValueType("directory")) is None
    for wrong in ("/srv/repo", {"$dir": "srv/repo", "device": "m-1", "host": "h"},
                  {"$dir": "/srv/repo", "device": "m-1"}, {"$ref": "sha256:" + "0" * 64}):
        assert "expected a folder" in (type_error(wrong, ValueType("directory")) or "")


def test_a_path_on_the_command_line_is_this_machines_folder(
        manifest: Manifest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "repo").mkdir()
    (tmp_path / "other").mkdir()
    monkeypatch.chdir(tmp_path)
    got = parse_cli_inputs(manifest, ["repo=repo", "more=other", "more=.", "title=t"])
    assert got["repo"] == here(tmp_path / "repo")
    assert got["more"] == [here(tmp_path / "other"), here(tmp_path)]
    assert got["repo"]["device"] == device_id(Settings())


def test_a_folder_through_a_link_is_named_by_its_real_path(
        manifest: Manifest, tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    got = parse_cli_inputs(manifest, ["repo=link"], files_from=tmp_path)
    assert got["repo"]["$dir"] == str((tmp_path / "real").resolve())


def test_a_missing_folder_or_a_file_is_refused_naming_the_input(
        manifest: Manifest, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    said = problems(manifest, ["repo=nowhere"], files_from=tmp_path)
    assert len(said) == 1 and "repo" in said[0] and "folder 'nowhere' does not exist" in said[0]
    said = problems(manifest, ["repo=notes.txt"], files_from=tmp_path)
    assert "'notes.txt' is not a folder" in said[0]
    said = problems(manifest, ["repo="], files_from=tmp_path)
    assert "is empty: give the path of a folder" in said[0]


def test_an_inputs_file_gives_folders_relative_to_itself(
        manifest: Manifest, tmp_path: Path) -> None:
    (tmp_path / "sub" / "repo").mkdir(parents=True)
    inputs = tmp_path / "sub" / "inputs.json"
    inputs.write_text(json.dumps({"repo": "repo", "more": ["repo", "/"]}))
    got = parse_cli_inputs(manifest, [], inputs)
    assert got["repo"] == here(tmp_path / "sub" / "repo")
    assert got["more"][1]["$dir"] == "/"


def test_a_form_served_to_others_takes_no_path(manifest: Manifest, tmp_path: Path) -> None:
    said = problems(manifest, ["repo=."], files_from=tmp_path, local_files=False)
    assert "a directory input takes no folder here" in said[0]


def test_an_mcp_clients_paths_are_checked_the_same_way(
        manifest: Manifest, tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    got = local_paths(manifest, {"repo": "repo", "title": "t"}, tmp_path)
    assert got == {"repo": here(tmp_path / "repo"), "title": "t"}
    with pytest.raises(InputError, match=r"repo.*does not exist"):
        local_paths(manifest, {"repo": "gone"}, tmp_path)


def test_a_plain_string_is_not_a_folder_on_record(manifest: Manifest) -> None:
    with pytest.raises(InputError, match="expected a folder"):
        resolve_inputs(manifest, {"repo": "/srv/repo"})


def test_a_skill_cannot_return_a_folder_default_one_or_cache_over_one(tmp_path: Path) -> None:
    folder = tmp_path / "vault" / "bad-folders"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(textwrap.dedent("""\
        ---
        name: bad-folders
        description: Returns a folder. Use it for tests.
        inputs:
          - name: where
            type: directory
            default: .
        outputs:
          - name: made
            type: directory
        run:
          command: python3 main.py
        cache:
          enabled: true
        ---
        Body.
        """))
    (folder / "main.py").write_text("")
    skillq = Path(sys.executable).parent / "skillq"
    done = subprocess.run([str(skillq), "validate", str(folder)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "outputs[0].type" in said or "outputs.0.type" in said, said
    assert "cannot return a folder" in said
    assert "default does not fit type" in said and "expected a folder" in said
    assert "given a folder must not cache" in said
    assert "Traceback" not in said


# --- routing ----------------------------------------------------------------------------


def daemon(name: str, device: str, *queues: str) -> OnlineDaemon:
    served = frozenset({*queues, *(f"{q}@{name}" for q in queues)})
    return OnlineDaemon(name, "agent", device, served, frozenset(), frozenset(), frozenset())


def test_a_step_given_a_folder_runs_on_that_folders_machine() -> None:
    laptop, server = daemon("laptop", "m-laptop", "default"), daemon("gpu", "m-gpu", "default")
    folder = folder_of({"repo": dir_value("/src/api", "m-laptop", "laptop")})
    assert folder == Folder("repo", "/src/api", "m-laptop", "laptop")
    assert route("default", Requires(), [laptop, server], folder=folder).queues == \
        ("default@laptop",)
    # one machine, every daemon on it: the shared queue serves
    assert route("default", Requires(), [laptop], folder=folder).queues == ("default",)
    assert route("default", Requires(), [laptop, server]).queues == ("default",)


def test_no_daemon_on_the_folders_machine_is_refused_naming_the_input() -> None:
    folder = folder_of({"repo": dir_value("/src/api", "m-laptop", "laptop")})
    with pytest.raises(NoRoute) as info:
        route("default", Requires(), [daemon("gpu", "m-gpu", "default")], folder=folder)
    said = str(info.value)
    assert "input 'repo'" in said and "/src/api on laptop" in said
    assert "serving it elsewhere: gpu" in said and "skillq worker --queues default" in said


def test_folders_on_two_machines_cannot_go_to_one_step() -> None:
    with pytest.raises(NoRoute, match="more than one machine"):
        folder_of({"a": dir_value("/x", "m-1", "one")}, {"a": dir_value("/y", "m-2", "two")})
    assert folder_of({"title": "no folders"}) is None


# --- what the step sees -----------------------------------------------------------------


def test_a_step_sees_plain_paths_and_a_gone_folder_fails_it(
        manifest: Manifest, tmp_path: Path) -> None:
    given = {"repo": here(tmp_path), "more": [here(tmp_path)], "title": "t"}
    assert as_paths(manifest, given) == {"repo": str(tmp_path.resolve()),
                                         "more": [str(tmp_path.resolve())], "title": "t"}
    assert folders(manifest, given) == [str(tmp_path.resolve())] * 2
    with pytest.raises(FolderProblem, match=r"input 'more\[0\]'.*not on this daemon"):
        as_paths(manifest, {"repo": here(tmp_path),
                            "more": [dir_value("/no/such/folder", "m", "elsewhere")]})


def test_git_trusts_exactly_the_folders_given_and_their_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "docs").mkdir()
    env = git_trust([str(repo / "docs"), str(repo), str(tmp_path / "plain")])
    assert env["GIT_CONFIG_COUNT"] == "3"
    assert [env[f"GIT_CONFIG_KEY_{i}"] for i in range(3)] == ["safe.directory"] * 3
    assert [env[f"GIT_CONFIG_VALUE_{i}"] for i in range(3)] == \
        [str(repo / "docs"), str(repo), str(tmp_path / "plain")]
    assert git_trust([]) == {}


def test_a_script_step_reads_a_repository_it_was_given(tmp_path: Path) -> None:
    """A real script, run as this process's user: the repository comes as a path, and git
    in the step trusts it through the step's environment (no config file is written)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=T", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True, timeout=30)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "first"], check=True,
                   timeout=30)
    folder = tmp_path / "skill"
    folder.mkdir()
    (folder / "main.py").write_text(textwrap.dedent("""\
        import json, os, subprocess, sys
        inputs = json.load(open(os.environ["SKILL_INPUTS"]))
        log = subprocess.run(["git", "-C", inputs["repo"], "log", "--format=%s"],
                             capture_output=True, text=True)
        print(json.dumps({"subjects": log.stdout.split(), "repo": inputs["repo"],
                          "trusted": os.environ.get("GIT_CONFIG_VALUE_0", "")}))
        """))
    manifest = Manifest.model_validate({
        "name": "reader", "description": "Read a repository. Use it for tests.",
        "inputs": [{"name": "repo", "type": "directory", "required": True}],
        "outputs": [{"name": "subjects", "type": "string[]"}, {"name": "repo", "type": "string"},
                    {"name": "trusted", "type": "string"}],
        "run": {"command": "python main.py", "timeout": 30}})
    result = run_script(folder, manifest, {"repo": here(repo)}, secrets={}, timeout_s=30,
                        max_output_bytes=65536)
    assert result.status is ScriptStatus.SUCCESS, result.error
    assert result.outputs == {"subjects": ["first"], "repo": str(repo.resolve()),
                              "trusted": str(repo.resolve())}
    trusted = subprocess.run(["git", "config", "--global", "--get-all", "safe.directory"],
                             capture_output=True, text=True, timeout=30, check=False)
    assert str(repo.resolve()) not in trusted.stdout, "trusted in the step's env only"


def test_a_step_cannot_return_a_machines_file_or_folder(tmp_path: Path) -> None:
    """An output holding a folder or an unstored file ($dir, $local) would show a later step
    that folder, or store that file, with the worker's rights: a bad output, in a script's
    answer and in a model's."""
    from pydantic import ValidationError

    from workers.agent.outputs import output_model

    folder = tmp_path / "skill"
    folder.mkdir()
    (folder / "main.py").write_text(
        'import json\nprint(json.dumps({"where": {"repo": {"$dir": "/root", '
        '"device": "d", "host": "h"}}}))\n')
    manifest = Manifest.model_validate({
        "name": "leaker", "description": "Return a folder. Use it for tests.",
        "outputs": [{"name": "where", "type": "object"}],
        "run": {"command": "python main.py", "timeout": 30}})
    result = run_script(folder, manifest, {}, secrets={}, timeout_s=30,
                        max_output_bytes=65536)
    assert result.status is ScriptStatus.BAD_OUTPUT
    assert "output 'where' holds /root as a machine's file or folder" in (result.error or "")
    with pytest.raises(ValidationError, match="names /etc/shadow as a machine's file"):
        output_model(manifest).model_validate(
            {"where": {"f": {"$local": "/etc/shadow", "name": "s", "size": 1}}})
