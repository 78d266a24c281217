"""Waits for a person (docs/waits.md): an agent step's question and an approval step,
decided from the CLI, the dashboard over HTTP and the deadline, on the stack's real
workers, with the scripted model server (tests/support/fake_llm) for agent steps.

Each question is asked by the model through the real ask_question tool; while it waits
the step holds no worker slot, and its answer reaches the model when the step runs again
with its turns replayed.
"""

from __future__ import annotations

import json
import os
import pty
import select as io_select
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import VAULTS, RunResult, Stack, copy_vault, skillq_argv, wait_until
from sqlalchemy import select
from support.fake_llm import FakeLLM

from lifecycle import transitions
from shared.db.wait_models import Wait
from shared.states import WaitState

pytestmark = pytest.mark.integration
AGENT_WORKER = "agent-gpu-cmd0"
USAGE = {"input": 100, "output": 20}
RunSkill = Callable[..., RunResult]
TOKEN = "tok-s3cr3t-5ca1ab1e"  # ask-secret's declared secret, on the agent worker


@pytest.fixture
def worker_env(llm: FakeLLM) -> dict[str, dict[str, str | None]]:
    # the test window's agent (skillq-try) runs on the daemon's default model
    return {AGENT_WORKER: {**llm.env(), "SKILLQ_AGENT_MODEL": "anthropic:claude-haiku-4-5",
                           "SKILLQ_SECRET_TONE_TOKEN": TOKEN}}


@pytest.fixture
def waits_vault(healthy: Stack, tmp_path: Path) -> Path:
    return copy_vault(VAULTS / "waits", tmp_path / "vault")


def key() -> str:
    return f"wait-{uuid.uuid4().hex[:12]}"


def call(tool: str, arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}], "usage": USAGE}


def answer(**outputs: object) -> dict[str, object]:
    return {"output": outputs, "usage": USAGE}


def inbox(stack: Stack, cwd: Path, run_id: str | None = None) -> list[dict[str, Any]]:
    proc = stack.cli("inbox", *([run_id] if run_id else []), "--json", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stdout))


def waiting_in(stack: Stack, cwd: Path, run_id: str, timeout_s: float = 60.0
               ) -> dict[str, Any]:
    found: list[dict[str, Any]] = []

    def asked() -> bool:
        found[:] = inbox(stack, cwd, run_id)
        return bool(found)

    wait_until(asked, timeout_s, f"run {run_id}'s wait in the inbox")
    assert len(found) == 1, found
    return found[0]


def started(stack: Stack, name: str, vault: Path, cwd: Path, *inputs: str
            ) -> tuple[subprocess.Popen[str], str]:
    """`skillq run NAME --json` in the background, and its run id."""
    before = stack.run_ids(name)
    argv = ["run", name, "--vault", str(vault), "--json"]
    for pair in inputs:
        argv += ["--input", pair]
    proc = stack.cli_popen(*argv, cwd=cwd)
    return proc, stack.new_run(name, before)


def ended(proc: subprocess.Popen[str], timeout_s: float = 120.0) -> tuple[int, Any, str]:
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()  # the run goes on; the command following it does not outlive the test
        proc.communicate()
        raise
    assert "Traceback" not in err, err
    return proc.returncode, json.loads(out) if out.strip() else None, err


def the_wait(stack: Stack, wait_id: int) -> Wait:
    with stack.db() as session:
        found = session.get(Wait, wait_id)
        assert found is not None
        session.expunge(found)
        return found


# -- approvals -------------------------------------------------------------------------

def test_approval_inputs_are_read_by_the_next_step(healthy: Stack, waits_vault: Path,
                                                   tmp_path: Path) -> None:
    proc, run_id = started(healthy, "review-post", waits_vault, tmp_path, "topic=cats")
    asked = waiting_in(healthy, tmp_path, run_id)
    assert asked["kind"] == "approval" and asked["step"] == "review"
    assert asked["asks"] == "Publish the draft about cats?"
    assert asked["shown"] == {"draft": "Draft about cats"}
    assert {i["name"]: i.get("default") for i in asked["inputs"]} == {
        "final_text": "Draft about cats", "channel": "blog"}
    # waiting is a recorded state, shown by run-show
    (review,) = healthy.steps(run_id, "review")
    assert review.state == "waiting"
    shown = healthy.cli("run-show", run_id, cwd=tmp_path)
    assert "waiting" in shown.stdout, shown.stdout
    # a bad input is refused, naming it, and nothing is decided
    bad = healthy.cli("approve", run_id, "--input", "colour=red", cwd=tmp_path)
    assert bad.returncode == 2 and "colour" in bad.stderr and "Traceback" not in bad.stderr
    assert the_wait(healthy, asked["id"]).state == "open"

    done = healthy.cli("approve", run_id, "--input", "final_text=Cats, edited", "--json",
                       cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["value"] == {"final_text": "Cats, edited",
                                                "channel": "blog"}
    code, printed, err = ended(proc)
    assert code == 0, err
    assert printed["outputs"] == {"posted": "Cats, edited", "channel": "blog"}
    wait = the_wait(healthy, asked["id"])
    assert wait.state == "approved" and wait.decided_by and wait.decided_by.startswith("cli:")
    assert wait.decided_at is not None
    assert inbox(healthy, tmp_path, run_id) == []


def test_a_rejection_ends_the_run_rejected(healthy: Stack, waits_vault: Path,
                                           tmp_path: Path) -> None:
    proc, run_id = started(healthy, "review-post", waits_vault, tmp_path, "topic=dogs")
    waiting_in(healthy, tmp_path, run_id)
    no_reason = healthy.cli("reject", run_id, "--reason", " ", cwd=tmp_path)
    assert no_reason.returncode == 2 and "why" in no_reason.stderr
    done = healthy.cli("reject", run_id, "--reason", "off brand", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    code, _, err = ended(proc)
    assert code == 1 and "was rejected" in err and "off brand" in err, err
    run = healthy.run(run_id)
    assert run.state == "rejected" and run.failed_step == "review"
    # the publish step never ran
    assert healthy.steps(run_id, "publish") == []
    # a second decision is refused: the first counts
    again = healthy.cli("approve", run_id, cwd=tmp_path)
    assert again.returncode == 2 and "no open approval" in again.stderr


def test_a_rejection_follows_on_failure(healthy: Stack, waits_vault: Path,
                                        tmp_path: Path) -> None:
    proc, run_id = started(healthy, "review-lenient", waits_vault, tmp_path, "topic=fish")
    waiting_in(healthy, tmp_path, run_id)
    assert healthy.cli("reject", run_id, "-r", "not now", cwd=tmp_path).returncode == 0
    code, printed, err = ended(proc)
    assert code == 0, err
    assert printed["outputs"] == {"text": "went on with fish"}


def test_an_approval_past_its_timeout_rejects(healthy: Stack, waits_vault: Path,
                                              tmp_path: Path) -> None:
    proc, run_id = started(healthy, "review-timeout", waits_vault, tmp_path)
    code, _, err = ended(proc)
    assert code == 1 and "no decision within 2 s" in err, err
    assert healthy.run(run_id).state == "rejected"
    with healthy.db() as session:
        wait = session.scalars(select(Wait).where(Wait.run_id == run_id)).one()
        assert (wait.state, wait.decided_by) == ("timed_out", "timeout")


def test_an_approval_past_its_timeout_may_approve(healthy: Stack, waits_vault: Path,
                                                 tmp_path: Path) -> None:
    proc, run_id = started(healthy, "review-auto", waits_vault, tmp_path)
    code, printed, err = ended(proc)
    assert code == 0, err
    assert printed["outputs"] == {"text": "approved by silence"}
    with healthy.db() as session:
        wait = session.scalars(select(Wait).where(Wait.run_id == run_id)).one()
        assert (wait.state, wait.decided_by) == ("approved", "timeout")


# -- questions -------------------------------------------------------------------------

def test_a_question_answered_from_the_cli(healthy: Stack, waits_vault: Path, llm: FakeLLM,
                                          tmp_path: Path) -> None:
    k = key()
    llm.script(k, call("ask_question", {"question": "Which tone?",
                                        "choices": ["dry", "warm"]}),
               answer(line="a warm line"))
    proc, run_id = started(healthy, "ask-tone", waits_vault, tmp_path,
                           f"topic={llm.marker(k)} tea")
    asked = waiting_in(healthy, tmp_path, run_id)
    assert (asked["kind"], asked["asks"], asked["choices"]) == (
        "question", "Which tone?", ["dry", "warm"])
    # only the choices are taken when the question offers no free text
    off = healthy.cli("answer", run_id, "spicy", cwd=tmp_path)
    assert off.returncode == 2 and "--choice" in off.stderr, off.stderr
    out_of_range = healthy.cli("answer", run_id, "--choice", "3", cwd=tmp_path)
    assert out_of_range.returncode == 2 and "1 to 2" in out_of_range.stderr
    assert healthy.cli("answer", run_id, "--choice", "2", cwd=tmp_path).returncode == 0
    code, printed, err = ended(proc)
    assert code == 0, err
    assert printed["outputs"] == {"line": "a warm line"}
    # the model read the answer as the tool's result
    results = [r[0] for r in llm.tool_results(k)[1:]]
    assert any('"warm"' in r for r in results), results
    wait = the_wait(healthy, asked["id"])
    assert (wait.state, wait.answer) == ("answered", "warm")


def test_no_secret_reaches_a_questions_record(healthy: Stack, waits_vault: Path,
                                              llm: FakeLLM, tmp_path: Path) -> None:
    k = key()
    llm.script(k, call("ask_question", {"question": f"Post with key {TOKEN}?",
                                        "choices": [f"yes, {TOKEN}", "no"],
                                        "default": TOKEN}),
               answer(line="done"))
    proc, run_id = started(healthy, "ask-secret", waits_vault, tmp_path,
                           f"topic={llm.marker(k)} tea")
    asked = waiting_in(healthy, tmp_path, run_id)
    assert TOKEN not in json.dumps(asked)
    assert asked["asks"] == "Post with key ***?" and asked["choices"] == ["yes, ***", "no"]
    assert healthy.cli("answer", run_id, "--choice", "2", cwd=tmp_path).returncode == 0
    code, _, err = ended(proc)
    assert code == 0, err
    shown = healthy.cli("run-show", run_id, "--json", cwd=tmp_path)
    assert TOKEN not in shown.stdout and "Post with key ***?" in shown.stdout


def test_an_answer_that_woke_nobody_is_caught_by_the_watchdog(
        healthy: Stack, waits_vault: Path, llm: FakeLLM, tmp_path: Path) -> None:
    """An answer decided while its step was still being recorded waiting finds the step
    running, and the record finds the wait open: nobody wakes the step. Made here by
    deciding the wait without waking it; the run's watchdog resumes the step."""
    k = key()
    llm.script(k, call("ask_question", {"question": "Which tone?"}), answer(line="calm"))
    proc, run_id = started(healthy, "ask-tone", waits_vault, tmp_path,
                           f"topic={llm.marker(k)} tea")
    asked = waiting_in(healthy, tmp_path, run_id)
    wait_until(lambda: healthy.steps(run_id)[0].state == "waiting", 30, "the step waiting")
    with healthy.db() as session:  # the decision alone, as the race leaves it
        assert transitions.decide(session, asked["id"], WaitState.ANSWERED, answer="calm",
                                  by="test") is not None
    code, printed, err = ended(proc)
    assert code == 0, err
    assert printed["outputs"] == {"line": "calm"}


def test_a_question_past_its_timeout_takes_its_default(healthy: Stack, waits_vault: Path,
                                                       llm: FakeLLM, tmp_path: Path) -> None:
    k = key()
    llm.script(k, call("ask_question", {"question": "Which tone?", "default": "plain"}),
               answer(line="a plain line"))
    proc, _ = started(healthy, "ask-quick", waits_vault, tmp_path,
                      f"topic={llm.marker(k)} tea")
    code, printed, err = ended(proc)
    assert code == 0, err
    assert printed["outputs"] == {"line": "a plain line"}
    results = [r[0] for r in llm.tool_results(k)[1:]]
    assert any("plain" in r and "default" in r for r in results), results


def test_a_question_past_its_timeout_without_default_fails_the_step(
        healthy: Stack, waits_vault: Path, llm: FakeLLM, tmp_path: Path) -> None:
    k = key()
    llm.script(k, call("ask_question", {"question": "Which creators?"}),
               answer(line="never sent"))
    proc, run_id = started(healthy, "ask-quick", waits_vault, tmp_path,
                           f"topic={llm.marker(k)} tea")
    code, _, err = ended(proc)
    assert code == 1 and "Which creators?" in err, err
    (step,) = healthy.steps(run_id)
    assert step.error_kind == "question_unanswered"


def offered(llm: FakeLLM, k: str) -> list[str]:
    return [t["name"] for t in llm.bodies(k)[0].get("tools", [])]


def test_the_question_is_offered_only_where_someone_can_answer(
        healthy: Stack, waits_vault: Path, llm: FakeLLM, tmp_path: Path) -> None:
    """A skill that does not say `interactive: true` may ask only in a run a person
    started: a test case's run (`skillq test`) has nobody to answer, nor does a
    schedule's."""
    attended, unattended = key(), "wait-unattended"  # the case's marker (benchmarks.json)
    llm.script(attended, answer(line="asked nobody"))
    llm.script(unattended, answer(line="asked nobody"))
    ran = healthy.cli("run", "plain-line", "--vault", str(waits_vault), "--input",
                      f"topic={llm.marker(attended)} tea", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "ask_question" in offered(llm, attended)
    tested = healthy.cli("test", "plain-line", "--vault", str(waits_vault), cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "ask_question" not in offered(llm, unattended)


# -- the test window's session ---------------------------------------------------------

def test_a_try_session_makes_typed_calls_and_asks(healthy: Stack, waits_vault: Path,
                                                  llm: FakeLLM, tmp_path: Path) -> None:
    """`skillq try echo "request"`: the agent has only echo; it calls it twice (typed
    inputs), asks one question in between (answered on stdin), answers; a second
    request from stdin carries the first exchange, and the session ends with stdin."""
    k = key()
    llm.script(k, call("execute_skill", {"name": "echo", "inputs": {"text": "one"}}),
               call("ask_question", {"question": "What should the second say?"}),
               call("execute_skill", {"name": "echo", "inputs": {"text": "two"}}),
               {"text": "echo said one, then two", "usage": USAGE},
               {"text": "still only echo here", "usage": USAGE})
    before = healthy.run_ids("echo")
    proc = subprocess.run(
        [*skillq_argv("try", "echo", f"{llm.marker(k)} echo one, then whatever I say",
                      "--vault", str(waits_vault))],
        input="two\nwhat else can it do?\n", env=healthy.cli_env, cwd=tmp_path,
        capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "echo said one, then two" in proc.stdout
    assert "still only echo here" in proc.stdout
    assert "? What should the second say?" in proc.stderr
    assert '→ echo {"text": "one"' in proc.stderr, proc.stderr
    calls = [r for r in healthy.runs_of("echo") if r.id not in before]
    assert sorted(str(r.outputs) for r in calls) and len(calls) == 2
    assert {(r.source, r.triggered_by) for r in calls} == {("test_window", "skillq-try")}
    # the model read the person's answer, and the second request the first exchange
    assert any('"two"' in r[0] for r in llm.tool_results(k)[1:])
    last = json.dumps(llm.bodies(k)[-1]["messages"])
    assert "echo said one, then two" in last and "what else can it do?" in last
    # the tried skill's catalog was that skill alone
    first = json.dumps(llm.bodies(k)[0])
    assert "review-post" not in first and "ask-tone" not in first


# -- an attended run asks in its terminal ----------------------------------------------

def read_until(fd: int, wanted: str, timeout_s: float) -> str:
    seen = b""
    deadline = time.monotonic() + timeout_s
    while wanted.encode() not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"no {wanted!r} in the terminal: {seen.decode(errors='replace')}"
        ready, _, _ = io_select.select([fd], [], [], min(left, 1.0))
        if ready:
            try:
                seen += os.read(fd, 4096)
            except OSError:  # the process ended and closed its side
                break
    return seen.decode(errors="replace")


def test_an_attended_run_asks_in_its_terminal(healthy: Stack, waits_vault: Path,
                                              llm: FakeLLM, tmp_path: Path) -> None:
    """`skillq run` with a terminal for stdin puts the question to the person there."""
    k = key()
    llm.script(k, call("ask_question", {"question": "Which tone?",
                                        "choices": ["dry", "warm"]}),
               answer(line="a dry line"))
    before = healthy.run_ids("ask-tone")
    main, side = pty.openpty()
    proc = subprocess.Popen(
        skillq_argv("run", "ask-tone", "--vault", str(waits_vault), "--input",
                    f"topic={llm.marker(k)} tea"),
        stdin=side, stdout=side, stderr=side, env=healthy.cli_env, cwd=tmp_path,
        start_new_session=True)
    os.close(side)
    try:
        shown = read_until(main, "2. warm", 90)
        assert "? Which tone?" in shown
        os.write(main, b"1\n")
        assert proc.wait(timeout=120) == 0, read_until(main, "\n", 1)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main)
    run_id = healthy.new_run("ask-tone", before)
    with healthy.db() as session:
        wait = session.scalars(select(Wait).where(Wait.run_id == run_id)).one()
        assert (wait.state, wait.answer) == ("answered", "dry")
        assert wait.decided_by and wait.decided_by.startswith("terminal:")
