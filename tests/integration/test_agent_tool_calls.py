"""A model's malformed tool call is a tool error it reads and corrects, never a crashed
step: each tool skillq offers, in an agent step and in `skillq ask`, called with an
unknown argument, a missing field and a wrong type before a good call.

The model is tests/support/fake_llm (the Anthropic Messages wire format), on the stack's
agent worker, as in test_agent_steps.py; each test's conversation key travels in the
step's inputs or the ask's text.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import VAULTS, RunResult, Stack, copy_vault, wait_until
from sqlalchemy import select
from support.fake_llm import FakeLLM

from shared.db.agent_models import AgentTurn
from shared.db.models import PipelineRun
from shared.db.notes_models import ImprovementNote
from workers.agent.executor import TOOL_RETRIES

pytestmark = pytest.mark.integration
AGENT_WORKER = "agent-gpu-cmd0"
MODEL = "anthropic:claude-haiku-4-5"
RunSkill = Callable[..., RunResult]
USAGE = {"input": 100, "output": 20}  # per request: $0.0002 for claude-haiku-4-5
REFUSED = "was not run: its arguments do not fit"


@pytest.fixture
def worker_env(llm: FakeLLM) -> dict[str, dict[str, str | None]]:
    return {AGENT_WORKER: llm.env()}


@pytest.fixture
def agents(healthy: Stack, tmp_path: Path) -> Path:
    return copy_vault(VAULTS / "agents", tmp_path / "vault")


def key() -> str:
    return f"args-{uuid.uuid4().hex[:12]}"


def call(tool: str, arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}], "usage": USAGE}


def answer(**outputs: object) -> dict[str, object]:
    return {"output": outputs, "usage": USAGE}


def refused_then_ran(llm: FakeLLM, k: str, said: list[list[str]]) -> str:
    """Requests 1..n sent back the refusals (each holding its ``said``), and request n+1
    the tool's result, which is returned."""
    results = [r[0] for r in llm.tool_results(k)[1:]]
    assert len(results) >= len(said) + 1, results
    for result, parts in zip(results, said, strict=False):
        assert REFUSED in result, result
        for part in parts:
            assert part in result, result
    assert REFUSED not in results[len(said)], results
    return results[len(said)]


def succeeded(result: RunResult) -> None:
    assert result.code == 0, result
    assert "internal error" not in result.proc.stderr and "Traceback" not in \
        result.proc.stderr, result


def test_skill(healthy: Stack, agents: Path, llm: FakeLLM, run_skill: RunSkill) -> None:
    k = key()
    llm.script(k, call("skill", {"nam": "style-guide"}), call("skill", {}),
               call("skill", {"name": 123}), call("skill", {"name": "style-guide"}),
               answer(summary="plain words", words=2))
    result = run_skill("summarize", agents, "--json",
                       inputs={"text": f"{llm.marker(k)} two words"})
    succeeded(result)
    assert result.json() == {"summary": "plain words", "words": 2}
    loaded = refused_then_ran(llm, k, [
        ["argument 'nam' is not one it takes (did you mean 'name'?)",
         "argument 'name' is required (a string: The skill's name"],
        ["argument 'name' is required"],
        ["argument 'name' must be a string (The skill's name", "not an integer: 123"]])
    assert '<skill_content name="style-guide">' in loaded
    (step,) = healthy.steps(result.run_id or "")
    assert (step.state, step.tokens_in, step.tokens_out) == ("succeeded", 500, 100)


def test_execute_skill(healthy: Stack, agents: Path, llm: FakeLLM, run_skill: RunSkill) -> None:
    mid, leaf = key(), key()
    inputs = {"text": f"{llm.marker(leaf)} go"}
    llm.script(mid, call("execute_skill", {"skill": "relay-leaf", "inputs": inputs}),
               call("execute_skill", {"inputs": inputs}),
               call("execute_skill", {"name": "relay-leaf", "inputs": json.dumps(inputs)}),
               call("execute_skill", {"name": "relay-leaf", "inputs": inputs}),
               answer(text="mid done"))
    llm.script(leaf, answer(text="leaf done"))
    result = run_skill("relay-mid", agents, "--json", timeout_s=180,
                       inputs={"text": f"{llm.marker(mid)} go"})
    succeeded(result)
    assert result.json() == {"text": "mid done"}
    ran = refused_then_ran(llm, mid, [
        ["argument 'skill' is not one it takes; it takes 'name', 'inputs', 'model'",
         "argument 'name' is required (a string: Skill name)"],
        ["argument 'name' is required"],
        ["argument 'inputs' must be an object (Typed input parameters), not a string"]])
    assert "leaf done" in ran
    # the misfits started nothing: one run of relay-leaf, from the good call
    with healthy.db() as session:
        started = session.scalars(select(PipelineRun).where(
            PipelineRun.skill == "relay-leaf",
            PipelineRun.created_at >= healthy.run(result.run_id or "").created_at)).all()
    assert [r.state for r in started] == ["succeeded"]
    # the step waited and ran again from the top: the refusals were replayed, not re-sent
    assert len(llm.requests(mid)) == 5


def test_skill_improvement_note(healthy: Stack, agents: Path, llm: FakeLLM,
                                run_skill: RunSkill) -> None:
    note = {"skill_name": "style-guide", "error": "it says nothing about numbers",
            "diagnosis": "the guide predates the word count output",
            "suggested_fix": "add a line on writing counts as digits"}
    k = key()
    llm.script(k, call("skill_improvement_note", {**note, "skill_name": None,
                                                  "skill": "style-guide"}),
               call("skill_improvement_note", {"skill_name": "style-guide",
                                               "error": note["error"]}),
               call("skill_improvement_note", {**note, "error": {"message": "x"}}),
               call("skill_improvement_note", note), answer(summary="plain", words=1))
    result = run_skill("summarize-any", agents, "--json",
                       inputs={"text": f"{llm.marker(k)} x"})
    succeeded(result)
    filed = refused_then_ran(llm, k, [
        ["argument 'skill' is not one it takes (did you mean 'skill_name'?)",
         "argument 'skill_name' must be a string, not null"],
        ["argument 'diagnosis' is required (a string: Root cause analysis)",
         "argument 'suggested_fix' is required (a string: How to fix this)"],
        ["argument 'error' must be a string (Error message or description), not an object"]])
    assert "filed improvement note" in filed
    with healthy.db() as session:
        notes = session.scalars(select(ImprovementNote).where(
            ImprovementNote.skill == "style-guide",
            ImprovementNote.run_id == result.run_id)).all()
    assert [n.summary for n in notes] == ["the guide predates the word count output"]


def test_skill_resource(healthy: Stack, agents: Path, llm: FakeLLM, run_skill: RunSkill) -> None:
    k = key()
    llm.script(k, call("skill_resource", {"answer": 1}),
               call("skill_resource", {"skill": "big-brief"}),
               call("skill_resource", {"skill": "big-brief", "path": ["references/facts.md"]}),
               call("skill_resource", {"skill": "big-brief", "path": "references/facts.md"}),
               answer(answer="forty-two"))
    result = run_skill("big-brief", agents, "--json",
                       inputs={"question": f"{llm.marker(k)} what is the answer?"})
    succeeded(result)
    read = refused_then_ran(llm, k, [
        ["argument 'answer' is not one it takes; it takes 'skill', 'path'",
         "argument 'skill' is required", "argument 'path' is required"],
        ["argument 'path' is required (a string: The path as listed)"],
        ["argument 'path' must be a string (The path as listed), not an array"]])
    assert "The answer is forty-two." in read


def test_bash(healthy: Stack, agents: Path, llm: FakeLLM, run_skill: RunSkill) -> None:
    k = key()
    llm.script(k, call("bash", {"cmd": "wc -w < notes.txt"}), call("bash", {}),
               call("bash", {"command": ["wc", "-w", "notes.txt"]}),
               call("bash", {"command": "wc -w < notes.txt"}), answer(words=3))
    result = run_skill("count-words", agents, "--json", inputs={"label": llm.marker(k)})
    succeeded(result)
    assert result.json() == {"words": 3}
    ran = refused_then_ran(llm, k, [
        ["argument 'cmd' is not one it takes", "argument 'command' is required"],
        ["argument 'command' is required (a string: The command line to run)"],
        ["argument 'command' must be a string (The command line to run), not an array"]])
    assert json.loads(ran)["stdout"].startswith("3\n")


def test_a_step_that_never_gets_it_right_fails_clearly_and_is_charged(
        healthy: Stack, agents: Path, llm: FakeLLM, run_skill: RunSkill) -> None:
    k = key()
    llm.script(k, *[call("skill", {"name": n}) for n in range(TOOL_RETRIES + 1)])
    result = run_skill("summarize", agents, inputs={"text": f"{llm.marker(k)} x"})
    assert result.code == 1, result
    stderr = result.proc.stderr
    assert f"the model called skill with arguments that did not fit {TOOL_RETRIES + 1} " \
        "times without a good call between; the last: argument 'name' must be a string" \
        in stderr, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr
    (step,) = healthy.steps(result.run_id or "")
    assert (step.state, step.error_kind) == ("failed", "bad_tool_call")
    assert (step.tokens_in, step.tokens_out) == (100 * (TOOL_RETRIES + 1),
                                                 20 * (TOOL_RETRIES + 1))


# -- skillq ask ---------------------------------------------------------------------------

def ask(stack: Stack, vault: Path, cwd: Path, *args: str
        ) -> subprocess.CompletedProcess[str]:
    return stack.cli("ask", *args, "--vault", str(vault), "--model", MODEL, cwd=cwd)


def ask_runs(stack: Stack) -> list[PipelineRun]:
    with stack.db() as session:
        found = list(session.scalars(select(PipelineRun).where(PipelineRun.source == "ask")
                                     .order_by(PipelineRun.created_at)))
        session.expunge_all()
        return found


def turns_of(stack: Stack, run_id: str) -> list[AgentTurn]:
    with stack.db() as session:
        return list(session.scalars(select(AgentTurn).where(AgentTurn.run_id == run_id)))


def run_show(stack: Stack, run_id: str, cwd: Path) -> dict[str, Any]:
    shown = stack.cli("run-show", run_id, "--json", cwd=cwd)
    assert shown.returncode == 0, shown.stderr
    (step,) = json.loads(shown.stdout)["steps"]
    (attempt,) = step["attempts"]
    found: dict[str, Any] = attempt
    return found


def test_ask_corrects_its_calls_and_reports_what_it_used(
        healthy: Stack, agents: Path, llm: FakeLLM, tmp_path: Path) -> None:
    k = key()
    llm.script(k, call("skill", {"nam": "style-guide"}), call("skill", {"name": 123}),
               call("skill_resource", {"skill": "style-guide"}),
               call("skill", {"name": "style-guide"}),
               {"text": "Write it plainly.", "usage": USAGE})
    proc = ask(healthy, agents, tmp_path, "--json", f"{llm.marker(k)} how do I write?")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    said = json.loads(proc.stdout)
    assert (said["state"], said["answer"]) == ("succeeded", "Write it plainly.")
    loaded = refused_then_ran(llm, k, [
        ["argument 'nam' is not one it takes (did you mean 'name'?)"],
        ["argument 'name' must be a string", "not an integer: 123"],
        ["argument 'path' is required (a string: The path as listed)"]])
    assert '<skill_content name="style-guide">' in loaded
    # what it recorded: five turns of 100 in / 20 out, as run-show reads them
    assert (said["tokens_in"], said["tokens_out"]) == (500, 100)
    assert said["cost_usd"] == pytest.approx(0.001)
    shown = run_show(healthy, said["run_id"], tmp_path)
    assert (shown["tokens"]["input"], shown["tokens"]["output"]) == (500, 100)
    assert shown["cost_usd"] == pytest.approx(said["cost_usd"])


def test_a_failed_ask_reports_the_tokens_it_paid_for(
        healthy: Stack, agents: Path, llm: FakeLLM, tmp_path: Path) -> None:
    """Once reported 0 tokens and $0: a misfit call crashed the step, so the step's
    record was never charged, while run-show read the turns it had paid for."""
    k = key()
    llm.script(k, *[call("skill", {"nam": "style-guide"}) for _ in range(TOOL_RETRIES + 1)])
    proc = ask(healthy, agents, tmp_path, "--json", f"{llm.marker(k)} hello")
    assert proc.returncode == 1, proc.stderr
    said = json.loads(proc.stdout)
    assert said["state"] == "failed"
    assert f"the model called skill with arguments that did not fit {TOOL_RETRIES + 1} " \
        "times" in said["error"]
    turns = TOOL_RETRIES + 1
    assert (said["tokens_in"], said["tokens_out"]) == (100 * turns, 20 * turns)
    assert said["cost_usd"] == pytest.approx(0.0002 * turns)
    shown = run_show(healthy, said["run_id"], tmp_path)
    assert (shown["tokens"]["input"], shown["tokens"]["output"]) == (100 * turns, 20 * turns)
    assert f"{100 * turns} tokens in, {20 * turns} out" in proc.stderr


def test_a_cancelled_ask_reports_the_turns_it_paid_for(
        healthy: Stack, agents: Path, llm: FakeLLM, tmp_path: Path) -> None:
    """Its step's record is the cancellation's, never charged: the turns are the record
    of what was paid for, as run-show reads them."""
    k = key()
    # turn 0 at once; turn 1 in flight (8 s) when the run is cancelled
    llm.script(k, call("skill", {"name": "style-guide"}),
               {"text": "Too late.", "usage": USAGE, "delay_s": 8})
    before = {r.id for r in ask_runs(healthy)}
    proc = healthy.cli_popen("ask", f"{llm.marker(k)} hello", "--json", "--vault",
                             str(agents), "--model", MODEL, cwd=tmp_path)
    wait_until(lambda: len(llm.requests(k)) == 2, 60, "the second model request")
    (run,) = [r for r in ask_runs(healthy) if r.id not in before]
    cancelled = healthy.cli("cancel", run.id, cwd=tmp_path)
    assert cancelled.returncode == 0, cancelled.stderr
    out, err = proc.communicate(timeout=60)
    said = json.loads(out)
    assert said["state"] == "cancelled", err
    assert (said["tokens_in"], said["tokens_out"]) == (100, 20)  # turn 0's
    assert said["cost_usd"] == pytest.approx(0.0002)
    # the in-flight turn lands, paid for, and the step ends there
    wait_until(lambda: len(turns_of(healthy, run.id)) == 2, 60, "the in-flight turn")
    (step,) = healthy.steps(run.id)
    assert step.state == "cancelled"
