"""Input no run record can hold (issue 40, item 3) through the real doors, on the real
stack: a NUL byte in any string of an input, and argv bytes that are not UTF-8, are
refused before anything is recorded (exit 2 on the command line, one line on stderr, no
traceback; HTTP 400 from the dashboard and the local API; a tool error from MCP and to an
agent), and a script whose output holds a NUL fails its step clearly.

PostgreSQL's text and jsonb cannot hold U+0000 (``UntranslatableCharacter``), and a lone
surrogate (what Python makes of undecodable argv bytes) cannot even be sent to it.
Before: exit 1 "the local API failed (DataError)", a 96-line traceback on the direct
path, a 500 from the dashboard, a 42-line traceback in run_client.py for argv.
Pure seams of the same paths: tests/unit/test_unstorable_inputs.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import VAULTS, Stack, copy_vault, skillq_argv, tail, wait_until
from mcp import Client, StdioServerParameters
from sqlalchemy import func, select
from support.fake_llm import FakeLLM
from test_dashboard import serve
from test_dashboard_guard import post_run, session

from orchestrator.api.apifile import api_file, read_api
from orchestrator.testing import last_results
from shared.db.models import PipelineRun
from shared.db.schedule_models import Schedule

pytestmark = pytest.mark.integration

NUL = "contains a NUL byte (\\u0000), which cannot be stored; remove it"
NOT_UTF8 = "is not valid UTF-8 (byte 0xff at character 2), which cannot be stored; " \
    "give UTF-8 text"
AGENT_WORKER = "agent-gpu-cmd0"
HEAVY = ("sqlalchemy", "celery", "psycopg")

KEEP = """\
---
name: keep
description: "Give back a title, tags and options. Use it to test what inputs are kept."
version: 1
inputs:
  - name: title
    type: string
    required: true
  - name: tags
    type: string[]
  - name: opts
    type: object
outputs:
  - name: title
    type: string
approach: code
run:
  command: python3 keep.py
  timeout: 30
  retries: 0
---

# keep
"""
KEEP_PY = """\
import json, os
inputs = json.load(open(os.environ["SKILL_INPUTS"], encoding="utf-8"))
print(json.dumps({"title": inputs["title"]}))
"""
NUL_OUT = """\
---
name: nul-out
description: "Answer with an output holding a NUL byte. Use it to test output checks."
version: 1
outputs:
  - name: text
    type: string
approach: code
run:
  command: python3 out.py
  timeout: 30
  retries: 0
---

# nul-out
"""
NUL_OUT_PY = """\
import sys
sys.stdout.buffer.write(b"noise \\x00 on stdout\\n")
sys.stderr.buffer.write(b"noise \\x00 on stderr\\n")
print('{"text": "a\\\\u0000b"}')
"""


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    for name, md, script, text in (("keep", KEEP, "keep.py", KEEP_PY),
                                   ("nul-out", NUL_OUT, "out.py", NUL_OUT_PY)):
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_text(md, encoding="utf-8")
        (root / name / script).write_text(text, encoding="utf-8")
    return root


def nul_file(folder: Path, **values: Any) -> Path:
    path = folder / "in.json"
    path.write_text(json.dumps({"title": "T", **values}), encoding="utf-8")
    return path


def said(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """What a command wrote to stderr, without -X importtime lines."""
    return [line for line in proc.stderr.splitlines() if not line.startswith("import time:")]


def imported_heavy(proc: subprocess.CompletedProcess[str]) -> bool:
    return any(line.startswith("import time:") and line.rsplit("|", 1)[1].strip()
               .split(".")[0] in HEAVY for line in proc.stderr.splitlines())


def refused_in_one_line(proc: subprocess.CompletedProcess[str], message: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert said(proc) == [f"error: {message}"], proc.stderr


def run_count(stack: Stack) -> int:
    with stack.db() as db:
        return int(db.scalar(select(func.count()).select_from(PipelineRun)) or 0)


# --- `skillq run`, the direct path --------------------------------------------------------


def test_the_direct_path_refuses_a_nul_or_bad_utf8_in_one_line_and_records_nothing(
        healthy: Stack, vault: Path, tmp_path: Path) -> None:
    assert not api_file(healthy.home).exists()  # no local API: `skillq run` submits itself
    before = run_count(healthy)
    run = ("run", "keep", "--vault", str(vault))
    refused_in_one_line(healthy.cli(*run, "--inputs-file", str(nul_file(
        tmp_path, opts={"deep": ["ok", "x\x00"]})), cwd=tmp_path),
        f"in.json: opts: at deep[1]: {NUL}")
    refused_in_one_line(healthy.cli(*run, "--input", "title=T", "--input",
                                    'tags=["a", "b\\u0000"]', cwd=tmp_path),
                        f"--input: tags: at [1]: {NUL} (declared type string[])")
    # argv is bytes: Python decodes what is not UTF-8 to lone surrogates
    refused_in_one_line(healthy.cli(*run, "--input", "title=a\udcffb", cwd=tmp_path),
                        f"--input: title: {NOT_UTF8}")
    refused_in_one_line(healthy.cli("wait", "run-\udcff", cwd=tmp_path),
                        "the argument 'run-\\udcff' is not valid UTF-8 text; give it in "
                        "UTF-8 (check the bytes given, or the terminal's locale)")
    assert run_count(healthy) == before
    ok = healthy.cli(*run, "--input", "title=caf\u00e9 \U0001f600", "--json", cwd=tmp_path)
    assert ok.returncode == 0 and json.loads(ok.stdout)["outputs"] == {
        "title": "caf\u00e9 \U0001f600"}, ok.stderr


# --- `skillq run` through the local API -------------------------------------------------


@pytest.fixture
def api(healthy: Stack) -> Iterator[Stack]:
    """The local API as `skillq up` starts it, recorded in the stack's api.json; removed
    afterwards (the other tests take the direct path)."""
    log = healthy.home / "logs" / "api-unstorable.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "orchestrator.api"],
                                env=healthy.cli_env, cwd=healthy.home,
                                stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        wait_until(lambda: ((found := read_api(healthy.home)) is not None
                   and found.pid == proc.pid) or proc.poll() is not None, 60,
                   "the local API to record itself in api.json")
        assert proc.poll() is None, f"the local API exited:\n{tail(log)}"
        yield healthy
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        api_file(healthy.home).unlink(missing_ok=True)


def test_through_the_local_api_a_nul_is_a_400_and_exit_2_and_bad_argv_one_line(
        api: Stack, vault: Path, tmp_path: Path) -> None:
    before = run_count(api)
    profile = {"PYTHONPROFILEIMPORTTIME": "1"}
    run = ("run", "keep", "--vault", str(vault))
    relayed = api.cli(*run, "--inputs-file", str(nul_file(tmp_path, title="a\x00b")),
                      cwd=tmp_path, env=profile)
    refused_in_one_line(relayed, f"in.json: title: {NUL}")
    assert not imported_heavy(relayed), "the API refused it, not a direct path"
    refused_in_one_line(api.cli(*run, "--input", 'opts={"k\\u0000": 1}', "--input", "title=T",
                                cwd=tmp_path),
                        f"--input: opts: key 'k\\u0000': {NUL} (declared type object)")
    # Not UTF-8: nothing is sent; the direct path names the argument.
    refused_in_one_line(api.cli(*run, "--input", "title=a\udcffb", cwd=tmp_path),
                        f"--input: title: {NOT_UTF8}")

    info = read_api(api.home)
    assert info is not None
    body = {"skill": "keep", "vault": str(vault), "pairs": ["title=a\x00b"],
            "inputs_file": None, "workdir": str(tmp_path), "triggered_by": "cli"}
    request = urllib.request.Request(
        f"http://127.0.0.1:{info.port}/v1/runs", data=json.dumps(body).encode(),
        method="POST", headers={"Authorization": f"Bearer {info.token}",
                                "Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as answered:
        urllib.request.urlopen(request, timeout=60)
    assert answered.value.code == 400
    assert json.loads(answered.value.read()) == {"error": f"--input: title: {NUL}",
                                                 "exit_code": 2}
    assert run_count(api) == before


# --- the dashboard's run form -------------------------------------------------------------


def test_the_dashboard_form_answers_400_with_the_message_and_starts_nothing(
        stack: Stack, tmp_path: Path) -> None:
    stack.ensure_standard_workers()
    guard = copy_vault(VAULTS / "guard", tmp_path / "guard")
    served = serve(stack, guard)
    try:
        cookie, token = session(served)
        before = run_count(stack)
        reply = post_run(served, {"name": "a\x00b"}, cookie=cookie, token=token)
        assert reply.status == 400, reply.text[:2000]
        assert f"--input: name: {NUL}" in reply.text, reply.text[:2000]
        assert run_count(stack) == before
    finally:
        served.stop()


# --- MCP's run_skill --------------------------------------------------------------------


def test_mcp_run_skill_refuses_a_nul_as_a_tool_error(healthy: Stack, vault: Path,
                                                      tmp_path: Path) -> None:
    argv = skillq_argv("mcp", "--vault", str(vault))
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=healthy.cli_env,
                                   cwd=str(tmp_path))
    before = run_count(healthy)

    async def call() -> Any:
        async with Client(params, read_timeout_seconds=120) as client:
            return await client.call_tool("run_skill", {"name": "keep", "inputs": {
                "title": "T", "tags": ["ok", "x\x00"]}})

    result = anyio.run(call)
    text = "\n".join(getattr(block, "text", "") for block in result.content)
    assert result.is_error and f"tags: at [1]: {NUL}" in text, text
    assert run_count(healthy) == before


# --- `skillq schedule add` ---------------------------------------------------------------


def test_schedule_add_refuses_a_nul_and_adds_nothing(healthy: Stack, vault: Path,
                                                     tmp_path: Path) -> None:
    with healthy.db() as db:
        before = db.scalar(select(func.count()).select_from(Schedule))
    added = healthy.cli("schedule", "add", "keep", "--vault", str(vault), "--cron",
                        "0 7 * * *", "--inputs-file", str(nul_file(tmp_path, tags=["\x00"])),
                        cwd=tmp_path)
    refused_in_one_line(added, f"in.json: tags: at [0]: {NUL}")
    with healthy.db() as db:
        assert db.scalar(select(func.count()).select_from(Schedule)) == before


# --- a skill's test cases ------------------------------------------------------------------


def test_a_test_case_with_a_nul_is_refused_before_it_runs(healthy: Stack, vault: Path,
                                                          tmp_path: Path) -> None:
    cases = [{"id": "nul-refused", "inputs": {"title": "a\x00b"},
              "expected": {"success": False, "error_contains": "NUL byte"}}]
    (vault / "keep" / "benchmarks.json").write_text(json.dumps(
        {"skill": "keep", "version": 1, "tests": cases}), encoding="utf-8")
    before = healthy.run_ids("keep")
    tested = healthy.cli("test", "keep", "--vault", str(vault), cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "Traceback" not in tested.stderr and "1 test case(s) passed" in tested.stdout
    assert healthy.run_ids("keep") == before  # refused: nothing recorded
    with healthy.db() as db:
        assert last_results(db, "keep")["nul-refused"].passed

    cases[0]["expected"] = {"success": True}  # a case meant to run: the skill is invalid
    (vault / "keep" / "benchmarks.json").write_text(json.dumps(
        {"skill": "keep", "version": 1, "tests": cases}), encoding="utf-8")
    checked = healthy.cli("validate", str(vault / "keep"), cwd=tmp_path)
    assert checked.returncode != 0 and "Traceback" not in checked.stderr
    assert f"benchmarks.json: tests[0].inputs.title: {NUL}" in checked.stdout + checked.stderr


# --- a script's output --------------------------------------------------------------------


def test_a_script_answering_a_nul_fails_its_step_clearly(healthy: Stack, vault: Path,
                                                         tmp_path: Path) -> None:
    before = healthy.run_ids("nul-out")
    done = healthy.cli("run", "nul-out", "--vault", str(vault), cwd=tmp_path)
    run_id = healthy.new_run("nul-out", before)
    assert done.returncode == 1, done.stderr
    assert said(done)[-1] == (f"error: run {run_id} of nul-out aborted: step 'nul-out' "
                              f"failed: output 'text': {NUL}"), done.stderr
    assert "Traceback" not in done.stderr
    (step,) = healthy.steps(run_id)
    assert step.state == "failed" and step.outputs is None
    # the NUL bytes it printed are in its log as U+FFFD: recorded, not a crash
    assert step.stdout_tail == 'noise \ufffd on stdout\n{"text": "a\\u0000b"}\n'
    assert step.stderr_tail == "noise \ufffd on stderr\n"


# --- an agent's execute_skill --------------------------------------------------------------


@pytest.fixture
def worker_env(request: pytest.FixtureRequest) -> dict[str, dict[str, str | None]]:
    if "agents" not in request.fixturenames:
        return {}
    return {AGENT_WORKER: request.getfixturevalue("llm").env()}


@pytest.fixture
def agents(tmp_path: Path) -> Path:
    root = copy_vault(VAULTS / "agents", tmp_path / "agents")
    for name in os.listdir(root):
        if name not in ("relay-mid", "relay-leaf"):
            shutil.rmtree(root / name)
    return root


def test_an_agents_execute_skill_with_a_nul_gets_a_tool_error_and_runs_nothing(
        llm: FakeLLM, agents: Path, healthy: Stack, tmp_path: Path) -> None:
    key = f"nul-{uuid.uuid4().hex[:12]}"
    usage = {"input": 100, "output": 20}
    llm.script(key, {"tool_calls": [{"name": "execute_skill", "arguments": {
        "name": "relay-leaf", "inputs": {"text": "a\x00b"}}}], "usage": usage},
        {"output": {"text": "refused"}, "usage": usage})
    leaf_before = healthy.run_ids("relay-leaf")
    done = healthy.cli("run", "relay-mid", "--vault", str(agents), "--json", "--input",
                       f"text={llm.marker(key)} go", cwd=tmp_path, timeout_s=180)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outputs"] == {"text": "refused"}
    (result,) = llm.tool_results(key)[1]
    error = json.loads(result)["error"]
    assert error.startswith("inputs of relay-leaf: ") and error.endswith(
        f"relay-leaf.text: {NUL}"), error
    assert healthy.run_ids("relay-leaf") == leaf_before

