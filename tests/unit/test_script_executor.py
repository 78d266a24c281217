"""The script executor, with real subprocesses: tiny skill folders written in tmp_path.

Process checks read /proc: PID 1 in a container often does not reap orphans, so a killed
grandchild may linger as a zombie, which os.killpg(pgid, 0) still counts. A zombie runs
nothing, so "alive" here means a member of the group in any state but Z.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import os
import py_compile
import shlex
import signal
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from shared import atomic
from shared.manifest import Manifest
from workers import script_executor
from workers.script_executor import ScriptResult, ScriptStatus, run_script

PY = shlex.quote(sys.executable)
CAP = 64 * 1024

HEADER = """\
import json, os, subprocess, sys, time
INPUTS = json.load(open(os.environ["SKILL_INPUTS"], encoding="utf-8"))
def emit(outputs):
    with open(os.environ["SKILL_OUTPUT"], "w", encoding="utf-8") as fh:
        json.dump(outputs, fh)
"""


def make_skill(tmp_path: Path, body: str, outputs: dict[str, str] | None = None,
               auth: tuple[str, ...] = ()) -> tuple[Path, Manifest]:
    folder = tmp_path / "demo"
    folder.mkdir()
    (folder / "main.py").write_text(HEADER + textwrap.dedent(body), encoding="utf-8")
    (folder / "SKILL.md").write_text("---\nname: demo\ndescription: test\n---\n", "utf-8")
    manifest = Manifest.model_validate({
        "name": "demo", "description": "A test skill.",
        "outputs": [{"name": k, "type": v} for k, v in (outputs or {}).items()],
        "run": {"command": f"{PY} main.py", "timeout": 5}, "auth": list(auth),
    })
    return folder, manifest


def run(folder: Path, manifest: Manifest, inputs: dict[str, Any] | None = None,
        **kw: Any) -> ScriptResult:
    kw.setdefault("secrets", {})
    kw.setdefault("timeout_s", 10)
    kw.setdefault("max_output_bytes", CAP)
    return run_script(folder, manifest, inputs or {}, **kw)


def live_members(pgid: int) -> list[int]:
    """Pids of the group's processes that are not zombies."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(stat.parent.name))
    return alive


def wait_group_gone(pgid: int, within: float = 2.0) -> list[int]:
    # Delivery of SIGKILL is asynchronous: give the kernel a moment, then report.
    end = time.monotonic() + within
    while (alive := live_members(pgid)) and time.monotonic() < end:
        time.sleep(0.02)
    return alive


def is_alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# --- success ----------------------------------------------------------------------------


def test_success_via_skill_output(tmp_path: Path) -> None:
    folder, manifest = make_skill(tmp_path, """
        emit({"greeting": "hi " + INPUTS["who"], "count": 3})
    """, {"greeting": "string", "count": "integer"})
    result = run(folder, manifest, {"who": "Ada"})
    assert result.status is ScriptStatus.SUCCESS
    assert json.dumps(result.status) == '"success"', "a plain string in records and JSON"
    assert result.outputs == {"greeting": "hi Ada", "count": 3}
    assert (result.exit_code, result.error) == (0, None)
    assert result.output_bytes == len(json.dumps(result.outputs))
    assert result.duration_ms >= 0


def test_success_via_last_stdout_line(tmp_path: Path) -> None:
    folder, manifest = make_skill(tmp_path, """
        print("working on it")
        print(json.dumps({"n": INPUTS["n"] * 2}))
        print()
    """, {"n": "number"})
    result = run(folder, manifest, {"n": 2.5})
    assert result.status == "success", result.error
    assert result.outputs == {"n": 5.0}
    assert "working on it" in result.stdout_tail


def test_no_declared_outputs_means_stdout_is_a_log(tmp_path: Path) -> None:
    folder, manifest = make_skill(tmp_path, 'print("done, nothing to report")\n')
    result = run(folder, manifest)
    assert (result.status, result.outputs) == ("success", {})


def test_inputs_arrive_in_the_file_and_on_stdin_identically(tmp_path: Path) -> None:
    folder, manifest = make_skill(tmp_path, """
        from_file = open(os.environ["SKILL_INPUTS"], encoding="utf-8").read()
        from_stdin = sys.stdin.read()
        emit({"file": from_file, "stdin": from_stdin})
    """, {"file": "string", "stdin": "string"})
    inputs = {"title": "Zürich ✓", "items": list(range(5000)), "nested": {"a": [True, None]}}
    result = run(folder, manifest, inputs)
    assert result.status == "success", result.error
    assert result.outputs is not None
    assert result.outputs["file"] == result.outputs["stdin"]
    assert json.loads(result.outputs["file"]) == inputs


# --- failures ---------------------------------------------------------------------------


def test_exit_75_is_transient(tmp_path: Path) -> None:
    folder, manifest = make_skill(tmp_path, """
        print("rate limited by the API; try again later", file=sys.stderr)
        sys.exit(75)
    """, {"x": "string"})
    result = run(folder, manifest)
    assert (result.status, result.exit_code) == ("transient", 75)
    assert result.error == "rate limited by the API; try again later"


def test_exit_1_is_failed_with_the_last_stderr_lines(tmp_path: Path) -> None:
    folder, manifest = make_skill(tmp_path, """
        print("step 1 ok", file=sys.stderr)
        raise ValueError("the channel URL is not a YouTube channel")
    """, {"x": "string"})
    result = run(folder, manifest)
    assert (result.status, result.exit_code, result.outputs) == ("failed", 1, None)
    assert result.error is not None
    assert result.error.endswith("ValueError: the channel URL is not a YouTube channel")
    assert "Traceback" in result.stderr_tail


def test_a_command_that_cannot_start_is_failed(tmp_path: Path) -> None:
    folder, _ = make_skill(tmp_path, "")
    manifest = Manifest.model_validate({"name": "demo", "description": "x",
                                        "run": {"command": "no-such-binary-skillq --x"}})
    result = run(folder, manifest)
    assert (result.status, result.exit_code) == ("failed", None)
    assert result.error is not None and "no-such-binary-skillq" in result.error


# --- timeouts and stray processes -------------------------------------------------------


def spawner(tmp_path: Path, body: str) -> tuple[Path, Manifest, Path]:
    """A skill whose script starts `sleep 60` and reports its pids in a file first."""
    folder, manifest = make_skill(tmp_path, textwrap.dedent("""
        kid = subprocess.Popen(["sleep", "60"])
        with open(INPUTS["report"], "w") as fh:
            json.dump({"pgid": os.getpgrp(), "grandchild": kid.pid}, fh)
    """) + textwrap.dedent(body), {"ok": "boolean"})
    return folder, manifest, tmp_path / "pids.json"


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    folder, manifest, report = spawner(tmp_path, "time.sleep(60)\n")
    start = time.monotonic()
    result = run(folder, manifest, {"report": str(report)}, timeout_s=1)
    elapsed = time.monotonic() - start
    assert result.status == "timeout"
    assert result.error == "timed out after 1 s (process group killed)"
    assert elapsed < 20, "hang check: the call must not wait for the sleeps"
    pids = json.loads(report.read_text())
    assert wait_group_gone(pids["pgid"]) == []
    assert not is_alive(pids["grandchild"])


def test_timeout_escalates_to_sigkill_when_sigterm_is_ignored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(script_executor, "TERM_GRACE_S", 0.3)
    folder, manifest, report = spawner(tmp_path, """
        import signal
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(60)
    """)
    start = time.monotonic()
    result = run(folder, manifest, {"report": str(report)}, timeout_s=0.5)
    assert result.status == "timeout"
    assert result.exit_code == -signal.SIGKILL
    assert time.monotonic() - start < 20
    assert wait_group_gone(json.loads(report.read_text())["pgid"]) == []


def test_a_grandchild_holding_stdout_does_not_hang_the_call(tmp_path: Path) -> None:
    # The script exits at once; its `sleep 60` inherited stdout and stderr.
    folder, manifest, report = spawner(tmp_path, 'emit({"ok": True})\n')
    start = time.monotonic()
    result = run(folder, manifest, {"report": str(report)})
    assert time.monotonic() - start < 10
    assert (result.status, result.outputs) == ("success", {"ok": True})
    pids = json.loads(report.read_text())
    assert wait_group_gone(pids["pgid"]) == []
    assert not is_alive(pids["grandchild"])


def test_a_grandchild_that_left_the_group_cannot_hang_the_call(tmp_path: Path) -> None:
    # start_new_session puts `sleep` out of reach of the group kill; it still holds the
    # pipes, so only the bounded drain lets the call return.
    folder, manifest = make_skill(tmp_path, """
        kid = subprocess.Popen(["sleep", "60"], start_new_session=True)
        open(INPUTS["report"], "w").write(str(kid.pid))
        emit({"ok": True})
    """, {"ok": "boolean"})
    report = tmp_path / "pid.txt"
    start = time.monotonic()
    try:
        result = run(folder, manifest, {"report": str(report)})
        assert time.monotonic() - start < 10
        assert result.status == "success"
    finally:
        if report.exists():
            os.kill(int(report.read_text()), signal.SIGKILL)


# --- environment and the skill folder ---------------------------------------------------


def test_environment_is_scrubbed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLQ_TEST_LEAK", "1")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake-aws-secret")
    monkeypatch.delenv("LANG", raising=False)
    folder, manifest = make_skill(tmp_path, """
        emit({"env": dict(os.environ), "cwd": os.getcwd()})
    """, {"env": "object", "cwd": "string"}, auth=("api_token",))
    workdir = tmp_path / "work"
    result = run(folder, manifest, secrets={"api_token": "s3cret", "other_token": "nope"},
                 workdir=workdir, extra_env={"SKILLQ_RUN_ID": "run-1"})
    assert result.status == "success", result.error
    assert result.outputs is not None
    env, cwd = result.outputs["env"], Path(result.outputs["cwd"])
    assert set(env) == {"PATH", "HOME", "LANG", "SKILL_INPUTS", "SKILL_OUTPUT",
                        "SKILLQ_WORKDIR", "API_TOKEN", "SKILLQ_RUN_ID",
                        "PYTHONDONTWRITEBYTECODE"}
    assert env["API_TOKEN"] == "s3cret"
    assert "nope" not in env.values() and "fake-aws-secret" not in env.values()
    # the worker's PATH, behind the folder of the worker's `python` and `python3`
    assert env["PATH"] == f"{cwd.parent / 'bin'}:{os.environ['PATH']}"
    assert env["LANG"] == "C.UTF-8"
    assert env["SKILLQ_WORKDIR"] == str(workdir)
    assert Path(env["HOME"]) == cwd.parent != folder.parent
    assert not cwd.parent.exists(), "the scratch directory is removed afterwards"


@pytest.mark.parametrize(("auth", "extra"), [
    (("path",), {}),
    (("skill_output",), {}),
    ((), {"SKILL_INPUTS": "/etc/passwd"}),
])
def test_names_that_would_shadow_the_protocol_are_refused(
        tmp_path: Path, auth: tuple[str, ...], extra: dict[str, str]) -> None:
    folder, manifest = make_skill(tmp_path, "", auth=auth)
    with pytest.raises(ValueError, match=r"shadow|may not set"):
        run(folder, manifest, secrets={a: "v" for a in auth}, extra_env=extra)


def test_bytecode_beside_the_sources_is_never_run_nor_written(tmp_path: Path) -> None:
    # An unchecked-hash .pyc is what Python trusts most: it never looks at the .py.
    folder, manifest = make_skill(tmp_path, """
        import wording
        emit({"word": wording.WORD})
    """, {"word": "string"})
    (folder / "wording.py").write_text("WORD = 'from the source'\n")
    forged = tmp_path / "forged.py"
    forged.write_text("WORD = 'forged bytecode'\n")
    cache = Path(importlib.util.cache_from_source(str(folder / "wording.py")))
    py_compile.compile(str(forged), cfile=str(cache), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    result = run(folder, manifest)
    assert result.status == "success", result.error
    assert result.outputs == {"word": "from the source"}
    assert sorted(p.name for p in (folder / "__pycache__").iterdir()) == [cache.name]


def snapshot(folder: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None
            for p in sorted(folder.rglob("*"))}


def test_the_skill_folder_is_never_written(tmp_path: Path) -> None:
    folder, manifest = make_skill(tmp_path, """
        open("notes.txt", "a").write("scribble")
        open("main.py", "w").write("# overwritten")
        os.remove("SKILL.md")
        os.mkdir("cache")
        open(os.path.join(os.environ["HOME"], ".rc"), "w").write("home is scratch")
        emit({"seen": sorted(os.listdir("."))})
    """, {"seen": "string[]"})
    (folder / "notes.txt").write_text("original\n")
    (folder / "data").mkdir()
    (folder / "data" / "table.csv").write_bytes(b"a,b\n1,2\n")
    before = snapshot(folder)
    result = run(folder, manifest)
    assert result.status == "success", result.error
    assert result.outputs == {"seen": ["cache", "data", "main.py", "notes.txt"]}
    assert snapshot(folder) == before


# --- outputs ----------------------------------------------------------------------------


@pytest.mark.parametrize("via", ["file", "stdout"])
def test_outputs_over_the_cap_are_refused(tmp_path: Path, via: str) -> None:
    folder, manifest = make_skill(tmp_path, f"""
        outputs = {{"blob": "x" * 5000}}
        emit(outputs) if {via == "file"} else print(json.dumps(outputs))
    """, {"blob": "string"})
    result = run(folder, manifest, max_output_bytes=1000)
    assert (result.status, result.outputs) == ("bad_output", None)
    assert result.error == ("outputs are 5012 bytes, over the 1000-byte cap; write large "
                            "data to a file/store and return a reference")
    assert result.output_bytes == 5012


def test_a_stdout_line_longer_than_everything_kept_is_refused(tmp_path: Path) -> None:
    folder, manifest = make_skill(tmp_path, """
        print(json.dumps({"blob": "x" * 200_000}))
    """, {"blob": "string"})
    result = run(folder, manifest, max_output_bytes=1000)
    assert result.status == "bad_output"
    assert result.error is not None
    assert result.error.startswith("outputs are more than 1000 bytes, over the 1000-byte cap")


@pytest.mark.parametrize(("outputs", "message"), [
    ({"count": "three", "name": "a"}, "output 'count': expected integer, got \"three\""),
    ({"count": True, "name": "a"}, "output 'count': expected integer, got true"),
    ({"name": "a"}, "missing declared output 'count' (integer)"),
    ({"count": 1, "name": "a", "extra": 1, "debug": 2},
     "undeclared output(s) 'debug', 'extra' (declared: count, name)"),
])
def test_outputs_are_checked_against_the_manifest(
        tmp_path: Path, outputs: dict[str, Any], message: str) -> None:
    folder, manifest = make_skill(tmp_path, f"emit({outputs!r})\n",
                                  {"count": "integer", "name": "string"})
    result = run(folder, manifest)
    assert (result.status, result.exit_code, result.outputs) == ("bad_output", 0, None)
    assert result.error == message


@pytest.mark.parametrize(("body", "message"), [
    ('print("all done!")', "the last stdout line is not valid JSON"),
    ('print("[1, 2]")', "the last stdout line must be a JSON object, got [1, 2]"),
    ('open(os.environ["SKILL_OUTPUT"], "w").write("{oops")', "SKILL_OUTPUT is not valid JSON"),
    ('open(os.environ["SKILL_OUTPUT"], "w").write(\'{"x": NaN}\')', "NaN is not JSON"),
    ("pass", "no outputs: no SKILL_OUTPUT file and stdout empty; expected x"),
])
def test_non_json_outputs_are_bad_output(tmp_path: Path, body: str, message: str) -> None:
    folder, manifest = make_skill(tmp_path, body + "\n", {"x": "number"})
    result = run(folder, manifest)
    assert result.status == "bad_output"
    assert result.error is not None and message in result.error


def test_huge_stdout_keeps_only_the_tail(tmp_path: Path) -> None:
    folder, manifest = make_skill(tmp_path, """
        chunk = b"x" * (1 << 20)
        for _ in range(50):
            sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.write(b"\\n")
        print(json.dumps({"ok": True}))
    """, {"ok": "boolean"})
    result = run(folder, manifest)
    assert (result.status, result.outputs) == ("success", {"ok": True})
    assert len(result.stdout_tail) == script_executor.TAIL_BYTES
    assert result.stdout_tail.endswith('x\n{"ok": true}\n')


def test_a_rewrite_in_flight_beside_the_skill_is_not_copied(tmp_path: Path) -> None:
    """Regression (CI, 2026-12-02): a run's end rewrites the skill's benchmarks.json
    through a temporary file beside it (shared/atomic.py); a step of the same skill
    starting then listed that file, and copying it after its rename failed the step
    ("internal error: ... No such file or directory: .benchmarks.json.6d44a5b3.tmp")."""
    folder, manifest = make_skill(tmp_path, """
        emit({"seen": sorted(os.listdir("."))})
    """, {"seen": "string[]"})
    in_flight = folder / ".benchmarks.json.6d44a5b3.tmp"
    in_flight.write_text("{}")
    (folder / "kept.tmp").write_text("a skill's own file")
    result = run(folder, manifest)
    assert result.status == "success", result.error
    assert in_flight.name not in result.outputs["seen"]
    assert "kept.tmp" in result.outputs["seen"]
    fd, tmp = atomic._create_beside(folder / "benchmarks.json", None)  # what the writer names
    os.close(fd)
    assert fnmatch.fnmatch(tmp.name, atomic.TEMP_PATTERN)


def test_python_and_python3_are_the_workers_interpreter(tmp_path: Path) -> None:
    """A skill that says `python script.py` runs where Debian has no `python`: both names
    are this worker's interpreter; an interpreter named by its path is left alone."""
    for n, command in enumerate(("python main.py", "python3 main.py",
                                 f"{sys.executable} main.py")):
        (tmp_path / str(n)).mkdir()
        folder, manifest = make_skill(tmp_path / str(n), """
            emit({"exe": sys.executable, "prefix": sys.prefix})
        """, {"exe": "string", "prefix": "string"})
        assert manifest.run is not None
        manifest = manifest.model_copy(
            update={"run": manifest.run.model_copy(update={"command": command})})
        result = run(folder, manifest)
        assert result.status == "success", result.error
        assert result.outputs == {"exe": sys.executable, "prefix": sys.prefix}
