"""`skillq ask` for real: the built-in skillq-ask skill on the `agent` queue, its answer
streamed to stdout, slash tokens resolved against the library, and nothing of the
invoked skills' instructions stored.

The model is tests/support/fake_llm (the Anthropic Messages wire format, streamed as
server-sent events when asked), as in test_agent_steps.py.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest
from conftest import VAULTS, Stack, copy_vault
from sqlalchemy import select, text
from support.fake_llm import FakeLLM

from shared.db.agent_models import AgentTurn
from shared.db.models import PipelineRun

pytestmark = pytest.mark.integration
AGENT_WORKER = "agent-gpu-cmd0"
MODEL = "anthropic:claude-haiku-4-5"
USAGE = {"input": 1000, "output": 200}  # $0.002 a request for claude-haiku-4-5
STYLE = "Write plainly: short words, no adjectives, one line."  # style-guide's body


@pytest.fixture
def worker_env(llm: FakeLLM) -> dict[str, dict[str, str | None]]:
    return {AGENT_WORKER: llm.env()}


@pytest.fixture
def agents(healthy: Stack, tmp_path: Path) -> Path:
    return copy_vault(VAULTS / "agents", tmp_path / "vault")


def key() -> str:
    return f"ask-{uuid.uuid4().hex[:12]}"


def ask(stack: Stack, vault: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return stack.cli("ask", *args, "--vault", str(vault), "--model", MODEL, cwd=cwd)


def ask_runs(stack: Stack) -> list[PipelineRun]:
    with stack.db() as session:
        found = list(session.scalars(select(PipelineRun).where(PipelineRun.source == "ask")
                                     .order_by(PipelineRun.created_at)))
        session.expunge_all()
        return found


def stored_anywhere(stack: Stack, needle: str) -> list[str]:
    """The tables whose rows hold ``needle`` in any column (as text)."""
    with stack.db() as session:
        tables = session.scalars(text(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")).all()
        return [t for t in tables if session.scalar(text(
            f'SELECT count(*) FROM "{t}" r WHERE r::text LIKE :n'), {"n": f"%{needle}%"})]


def test_the_answer_streams_while_the_run_goes_on_and_is_recorded_as_an_ask(
        healthy: Stack, agents: Path, llm: FakeLLM, tmp_path: Path) -> None:
    k = key()
    llm.script(k, {"text": "Looking at style-guide first.",
                   "tool_calls": [{"name": "skill", "arguments": {"name": "style-guide"}}],
                   "usage": USAGE},
               {"text": "Write it plainly, in one line.", "usage": USAGE, "delay_s": 6})
    before = {r.id for r in ask_runs(healthy)}
    proc = healthy.cli_popen("ask", f"{llm.marker(k)} how do I write a summary?",
                             "--vault", str(agents), "--model", MODEL, cwd=tmp_path)
    assert proc.stdout is not None
    first = proc.stdout.read(len("Looking at style-guide first."))
    # Turn 1 answers 6 s after it is asked: text seen before then came as it streamed.
    assert first == "Looking at style-guide first.", first
    (run,) = [r for r in ask_runs(healthy) if r.id not in before]
    assert healthy.run(run.id).state == "running"  # the answer is still to come
    rest, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert rest == "\n\nWrite it plainly, in one line.\n", rest
    assert "Traceback" not in err
    assert f"run {run.id}: 2000 tokens in, 400 out, $0.0040" in err
    assert all(r["stream"] for r in llm.requests(k))  # the worker asked for a stream
    done = healthy.run(run.id)
    assert (done.skill, done.source, done.state, done.triggered_by) == (
        "skillq-ask", "ask", "succeeded", "cli")
    (step,) = healthy.steps(run.id)
    assert (step.queue, step.tokens_in, step.tokens_out) == ("agent", 2000, 400)
    assert step.cost_usd == pytest.approx(0.004)
    with healthy.db() as session:
        turns = session.scalars(select(AgentTurn).where(AgentTurn.run_id == run.id)).all()
        assert len(turns) == 2
    listed = healthy.cli("runs", "--source", "ask", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert run.id in listed.stdout
    shown = healthy.cli("run-show", run.id, "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "Write it plainly, in one line." in shown.stdout


def test_slash_tokens_send_their_instructions_once_and_store_none(
        healthy: Stack, agents: Path, llm: FakeLLM, tmp_path: Path) -> None:
    k = key()
    llm.script(k, {"text": "Done.", "usage": USAGE})
    disabled = healthy.cli("disable", "big-brief", "--vault", str(agents), cwd=tmp_path)
    assert disabled.returncode == 0, disabled.stderr
    try:
        proc = ask(healthy, agents, tmp_path,
                   f"/Style Guide {llm.marker(k)} then /big-brief and /no-such-skill and "
                   "docs/style-guide")
    finally:
        healthy.cli("enable", "big-brief", "--vault", str(agents), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Done.\n"
    assert "note: /big-brief is disabled: `skillq enable big-brief`" in proc.stderr
    assert "note: /no-such-skill is no skill: `skillq new no-such-skill`" in proc.stderr
    (body,) = llm.bodies(k)
    system = json.dumps(body.get("system"))
    assert system.count(STYLE) == 1  # invoked once, by its display name
    assert "<name>big-brief</name>" not in system  # disabled: not even in the catalog
    user = json.dumps(body["messages"])
    assert "/style-guide" in user and "/Style Guide" not in user  # normalized to its slug
    run = ask_runs(healthy)[-1]
    assert run.inputs["text"].startswith("/style-guide ")
    assert stored_anywhere(healthy, STYLE) == []  # sent for that request only


def test_dry_run_prints_the_prompt_and_its_estimate_and_sends_nothing(
        healthy: Stack, agents: Path, llm: FakeLLM, tmp_path: Path) -> None:
    k = key()
    before = len(ask_runs(healthy))
    proc = ask(healthy, agents, tmp_path, "--dry-run", f"/style-guide {llm.marker(k)} x")
    assert proc.returncode == 0, proc.stderr
    assert STYLE in proc.stdout
    assert "<name>summarize</name>" in proc.stdout  # the catalog
    assert f"/style-guide {llm.marker(k)} x" in proc.stdout  # the user message
    assert "input tokens for the first request" in proc.stdout
    assert "nothing was sent" in proc.stdout
    assert llm.requests(k) == []
    assert len(ask_runs(healthy)) == before


def test_a_model_failure_is_a_clear_error_and_a_recorded_run(
        healthy: Stack, agents: Path, llm: FakeLLM, tmp_path: Path) -> None:
    k = key()
    llm.script(k, {"error": {"status": 400, "message": "prompt is too long"}})
    proc = ask(healthy, agents, tmp_path, f"{llm.marker(k)} hello")
    assert proc.returncode == 1, proc.stderr
    assert "HTTP 400" in proc.stderr and "prompt is too long" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert ask_runs(healthy)[-1].state == "failed"


def test_empty_text_is_a_usage_error_before_anything_runs(
        healthy: Stack, agents: Path, tmp_path: Path) -> None:
    before = len(ask_runs(healthy))
    proc = ask(healthy, agents, tmp_path, "  ")
    assert proc.returncode == 2, proc.stderr
    assert "skillq ask: TEXT: give the request's text" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(ask_runs(healthy)) == before
