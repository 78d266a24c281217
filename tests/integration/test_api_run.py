"""`skillq run` and `skillq wait` through the local API (orchestrator/api/) on the real
stack: the API runs as its own process (`python -m orchestrator.api`, as `skillq up`
starts it) and records itself in the stack's SKILLQ_HOME/api.json; the CLI finds it
there and submits through it (orchestrator/cli/run_client.py).

Each command's imports are profiled (PYTHONPROFILEIMPORTTIME) to tell the thin path
(no SQLAlchemy, no Celery) from the direct one. The other modules share this stack's
SKILLQ_HOME and expect the direct path: the fixture removes api.json when it ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import RunResult, Stack, gone_or_zombie, host_pid, tail, wait_until

from orchestrator.api.apifile import api_file, read_api

pytestmark = pytest.mark.integration

HEAVY = ("sqlalchemy", "celery", "kombu", "psycopg", "pydantic", "shared.vault")
PROFILE = {"PYTHONPROFILEIMPORTTIME": "1"}


def imported(stderr: str) -> set[str]:
    """The top packages a command imported, from its -X importtime lines."""
    names = {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines()
             if line.startswith("import time:") and "self [us]" not in line}
    return {n for n in names if any(n == h or n.startswith(h + ".") for h in HEAVY)}


def said(stderr: str) -> list[str]:
    """What a command wrote to stderr, without its import-time lines."""
    return [line for line in stderr.splitlines() if not line.startswith("import time:")]


@pytest.fixture(scope="module")
def api(stack: Stack) -> Iterator[subprocess.Popen[bytes]]:
    log = stack.home / "logs" / "api.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "orchestrator.api"],
                                env=stack.cli_env, cwd=stack.home, stdin=subprocess.DEVNULL,
                                stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: ((found := read_api(stack.home)) is not None
                   and found.pid == proc.pid) or proc.poll() is not None, 60,
                   "the local API to record itself in api.json")
        assert proc.poll() is None, f"the local API exited:\n{tail(log)}"
        assert api_file(stack.home).stat().st_mode & 0o777 == 0o600
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        api_file(stack.home).unlink(missing_ok=True)  # the other modules: the direct path


@pytest.fixture
def thin(api: subprocess.Popen[bytes], healthy: Stack) -> Iterator[Stack]:
    """The healthy stack with its API recorded; api.json put back as it was afterwards
    (a test may point it elsewhere)."""
    saved = api_file(healthy.home).read_bytes()
    try:
        yield healthy
    finally:
        api_file(healthy.home).write_bytes(saved)
        api_file(healthy.home).chmod(0o600)


@contextlib.contextmanager
def direct(stack: Stack) -> Iterator[None]:
    """No api.json for a moment: the CLI takes the direct path."""
    path = api_file(stack.home)
    aside = path.with_name("api.json.aside")
    path.rename(aside)
    try:
        yield
    finally:
        aside.rename(path)


def rewrite_api(stack: Stack, **changes: Any) -> None:
    path = api_file(stack.home)
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, **changes}))


def test_a_run_through_the_api_prints_what_the_direct_path_prints(
        thin: Stack, run_skill: Callable[..., RunResult], vault: Path) -> None:
    ok = run_skill("echo", vault, "--json", inputs={"text": "hi"}, env=PROFILE)
    assert ok.code == 0, ok
    assert not imported(ok.stderr), f"the thin path imported {imported(ok.stderr)}"
    assert json.loads(ok.stdout) == {"run_id": ok.run_id, "state": "succeeded",
                                     "outputs": {"text": "hi"}}
    assert said(ok.stderr)[0] == f"run {ok.run_id}"
    assert thin.run(ok.run_id).triggered_by == "cli"

    plain = run_skill("echo", vault, inputs={"text": "hé"}, env=PROFILE)
    assert plain.code == 0, plain
    assert not imported(plain.stderr)
    assert json.loads(plain.stdout) == {"text": "hé"}
    assert f"✓ echo succeeded (run {plain.run_id})" in said(plain.stderr)
    with direct(thin):
        again = run_skill("echo", vault, inputs={"text": "hé"}, env=PROFILE)
    assert again.code == 0, again
    assert "sqlalchemy" in imported(again.stderr)  # that one went the direct way
    assert again.stdout == plain.stdout

    bad = run_skill("abort-on-failure", vault, "--json",
                    inputs={"items": ["x", "y"], "fail": ["y"]}, env=PROFILE)
    assert bad.code == 1, bad
    assert not imported(bad.stderr)
    doc = json.loads(bad.stdout)
    assert doc == {"run_id": bad.run_id, "state": "failed", "error": doc["error"],
                   "step": "each", "item": 1}
    assert "boom" in doc["error"]
    with direct(thin):
        bad_direct = run_skill("abort-on-failure", vault, "--json",
                               inputs={"items": ["x", "y"], "fail": ["y"]})
    assert bad_direct.code == 1, bad_direct
    doc_direct = json.loads(bad_direct.stdout)
    assert {**doc, "run_id": "", "error": ""} == {**doc_direct, "run_id": "", "error": ""}
    assert doc["error"].replace(bad.run_id, "") == \
        doc_direct["error"].replace(bad_direct.run_id, "")
    assert said(bad.stderr)[-1] == \
        f"error: run {bad.run_id} of abort-on-failure aborted: {doc['error']}"
    assert "Traceback" not in bad.stderr


def test_bad_input_exits_2_with_the_direct_message_and_records_nothing(
        thin: Stack, run_skill: Callable[..., RunResult], vault: Path, tmp_path: Path
) -> None:
    cases: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
        ("echo", {"text": "hi", "delay_s": "soon"}, ()),
        ("echo", {"txt": "hi"}, ()),
        ("echo", {"text": "hi"}, ("--inputs-file", "inputs.json")),  # an unknown key in it
        ("no-such-skil", {}, ()),
    ]
    (tmp_path / "inputs.json").write_text(json.dumps({"nope": 1}))
    for skill, inputs, extra in cases:
        before = thin.run_ids(skill)
        through = run_skill(skill, vault, *extra, inputs=inputs, env=PROFILE)
        with direct(thin):
            local = run_skill(skill, vault, *extra, inputs=inputs)
        assert through.code == local.code == 2, (through, local)
        assert not imported(through.stderr), (skill, inputs, imported(through.stderr))
        assert said(through.stderr) == said(local.stderr), (through, local)
        assert said(through.stderr)[0].startswith("error: ")
        assert thin.run_ids(skill) == before  # nothing recorded, either way


def test_an_unknown_token_or_host_is_refused_and_nothing_runs(
        thin: Stack, run_skill: Callable[..., RunResult], vault: Path) -> None:
    info = read_api(thin.home)
    assert info is not None
    url = f"http://127.0.0.1:{info.port}/v1/runs"
    body = json.dumps({"skill": "echo", "vault": str(vault), "pairs": ["text=x"],
                       "inputs_file": None, "workdir": str(vault), "triggered_by": "cli"})
    before = thin.run_ids("echo")
    for headers, status in (({"Authorization": "Bearer not-the-token"}, 401),
                            ({}, 401),
                            ({"Authorization": f"Bearer {info.token}",
                              "Host": f"evil.example:{info.port}"}, 421)):
        request = urllib.request.Request(url, data=body.encode(), method="POST",
                                         headers={"Content-Type": "application/json",
                                                  **headers})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == status
        assert "error" in json.loads(refused.value.read())

    rewrite_api(thin, token="not-the-token")
    denied = run_skill("echo", vault, inputs={"text": "x"})
    assert denied.code == 2, denied
    assert "error: the local API refused this request's token" in denied.stderr
    assert "Traceback" not in denied.stderr
    assert thin.run_ids("echo") == before


def test_ctrl_c_cancels_through_the_api(thin: Stack, vault: Path, tmp_path: Path) -> None:
    pid_dir, release = tmp_path / "pids", tmp_path / "release"
    pid_dir.mkdir()
    before = thin.run_ids("slow-chain")
    cli = thin.cli_popen("run", "slow-chain", "--vault", str(vault), "--input", "hold_s=60",
                         "--input", f"pid_dir={pid_dir}", "--input", f"release={release}",
                         "--json", cwd=tmp_path, env=PROFILE)
    try:
        run_id = thin.new_run("slow-chain", before)
        written = int(wait_until(lambda: (pid_dir / "slow.pid").exists()
                                 and (pid_dir / "slow.pid").read_text(), 30, "slow.pid"))
        script = int(wait_until(lambda: host_pid(written, str(pid_dir)), 10, "the script"))
        cli.send_signal(signal.SIGINT)
        stdout, stderr = cli.communicate(timeout=30)
        assert cli.returncode == 130, stderr
        assert not imported(stderr)
        lines = said(stderr)
        assert f"run {run_id}" in lines
        assert f"cancelling run {run_id} (Ctrl-C again to exit at once)" in lines
        assert f"run {run_id} cancelled; 1 running step(s) stopped" in lines
        assert json.loads(stdout) == {
            "run_id": run_id, "state": "cancelled", "step": None, "item": None,
            "error": "cancelled: Ctrl-C on the `skillq` command following it"}
        wait_until(lambda: gone_or_zombie(script), 10, "the cancelled step's script")
        assert thin.run(run_id).state == "cancelled"
    finally:
        release.touch()
        if cli.poll() is None:
            cli.kill()


def test_detach_and_wait_through_the_api(thin: Stack, vault: Path, tmp_path: Path) -> None:
    started = thin.cli("run", "echo", "--vault", str(vault), "--input", "text=later",
                       "--input", "delay_s=1", "--detach", cwd=tmp_path, env=PROFILE)
    assert started.returncode == 0, started.stderr
    assert not imported(started.stderr)
    run_id = started.stdout.strip()
    assert f"run {run_id}" in said(started.stderr)
    waited = thin.cli("wait", run_id, "--json", cwd=tmp_path, env=PROFILE)
    assert waited.returncode == 0, waited.stderr
    assert not imported(waited.stderr)
    assert json.loads(waited.stdout) == {"run_id": run_id, "state": "succeeded",
                                         "outputs": {"text": "later"}}
    missing = thin.cli("wait", "run-nosuchrun", cwd=tmp_path)
    assert missing.returncode == 1
    assert "no run run-nosuchrun; `skillq runs` lists them" in missing.stderr


def test_a_dead_api_port_falls_back_to_the_direct_path(
        thin: Stack, run_skill: Callable[..., RunResult], vault: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    rewrite_api(thin, port=port)
    ok = run_skill("echo", vault, "--json", inputs={"text": "anyway"}, env=PROFILE)
    assert ok.code == 0, ok
    assert "sqlalchemy" in imported(ok.stderr)  # submitted from the CLI itself
    assert json.loads(ok.stdout) == {"run_id": ok.run_id, "state": "succeeded",
                                     "outputs": {"text": "anyway"}}


def test_an_attended_run_through_the_api_asks_for_its_approval_in_the_terminal(
        thin: Stack, tmp_path: Path) -> None:
    """The approval step of a run followed through the API is put to the person at the
    terminal (stdin a terminal), and decided through the API: the thin path still
    imports nothing heavy."""
    import pty
    import select
    import time

    from conftest import VAULTS, copy_vault, skillq_argv

    waits_vault = copy_vault(VAULTS / "waits", tmp_path / "waits")
    main, side = pty.openpty()
    proc = subprocess.Popen(
        skillq_argv("run", "review-post", "--vault", str(waits_vault), "--input",
                    "topic=bees", "--json"),
        stdin=side, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**thin.cli_env, **PROFILE}, cwd=tmp_path)
    os.close(side)
    seen = b""

    def until(wanted: bytes, timeout_s: float = 90) -> None:
        nonlocal seen
        deadline = time.monotonic() + timeout_s
        assert proc.stderr is not None
        while wanted not in seen:
            assert time.monotonic() < deadline, seen.decode(errors="replace")
            ready, _, _ = select.select([proc.stderr], [], [], 1.0)
            if ready:
                seen += os.read(proc.stderr.fileno(), 4096)

    try:
        until(b"approve? [y = yes")
        assert b"draft: Draft about bees" in seen
        os.write(main, b"y\n")
        until(b"final_text (string) [Draft about bees] > ")
        os.write(main, b"\n")  # the default stands
        until(b"channel (string) [blog] > ")
        os.write(main, b"newsletter\n")
        out, rest = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main)
    stderr = (seen + rest).decode(errors="replace")
    assert proc.returncode == 0, stderr
    assert not imported(stderr), f"the thin path imported {imported(stderr)}"
    assert json.loads(out)["outputs"] == {"posted": "Draft about bees",
                                          "channel": "newsletter"}
