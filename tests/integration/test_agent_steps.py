"""Agent steps for real: an instruction-only skill run by a model on the `agent` queue.

The model is the local wire-format server of tests/support/fake_llm (the real anthropic
SDK and Pydantic AI speak the Anthropic Messages API to it); the stack's agent worker is
restarted with its base URL and a key (``worker_env``: once for the tests that want just
that, once for each test marked ``agent_env`` with settings of its own). Each test's
conversation key travels in the step's inputs (`[[fake:KEY]]`), so the turns scripted
for it answer only its requests.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import (
    REPO,
    VAULTS,
    RunResult,
    Stack,
    copy_vault,
    kill_pids,
    wait_until,
)
from sqlalchemy import select
from support.fake_llm import FakeLLM

from lifecycle.run_costs import run_usage
from shared.db.agent_models import AgentTurn
from shared.db.models import PipelineRun
from shared.db.notes_models import ImprovementNote

pytestmark = pytest.mark.integration
RunSkill = Callable[..., RunResult]
AGENT_WORKER = "agent-gpu-cmd0"  # serves the agent queue (conftest.STANDARD_WORKERS)
USAGE = {"input": 1000, "output": 200}  # per request: $0.002 for claude-haiku-4-5


@pytest.fixture
def worker_env(request: pytest.FixtureRequest, llm: FakeLLM
               ) -> dict[str, dict[str, str | None]]:
    """The agent worker runs with the fake model's URL and key, and the settings of the
    test's ``agent_env`` mark (a None value unsets a variable): ``healthy`` restarts it
    only when the test before wanted another environment."""
    marked = request.node.get_closest_marker("agent_env")
    return {AGENT_WORKER: {**llm.env(), **(marked.kwargs if marked else {})}}


@pytest.fixture
def agents(healthy: Stack, tmp_path: Path) -> Path:
    """The vault; ``healthy`` started the agent worker with ``worker_env``'s settings."""
    return copy_vault(VAULTS / "agents", tmp_path / "vault")


def key() -> str:
    return f"agent-{uuid.uuid4().hex[:12]}"


def call(tool: str, **arguments: object) -> dict[str, object]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}], "usage": USAGE}


def answer(**outputs: object) -> dict[str, object]:
    return {"output": outputs, "usage": USAGE}


def turns_of(stack: Stack, run_id: str) -> list[AgentTurn]:
    with stack.db() as session:
        return list(session.scalars(select(AgentTurn).where(AgentTurn.run_id == run_id)
                                    .order_by(AgentTurn.turn)))


def test_an_agent_step_loads_a_skill_answers_typed_and_is_charged(
        healthy: Stack, agents: Path, llm: FakeLLM, run_skill: RunSkill) -> None:
    k = key()
    llm.script(k, call("skill", name="style-guide"), call("skill", name="/secret-plan"),
               answer(summary="plain words", words=2))
    result = run_skill("summarize", agents, "--json",
                       inputs={"text": f"{llm.marker(k)} two words"})
    assert result.code == 0, result
    assert result.json() == {"summary": "plain words", "words": 2}
    results = llm.tool_results(k)
    assert len(results) == 3  # three model requests, each answered once
    assert '<skill_content name="style-guide">' in results[1][0]
    assert "Write plainly" in results[1][0]
    # Not in its sub-skills.json: refused as a tool error the model sees, not a crash.
    assert "no skill 'secret-plan'" in results[2][0]
    assert "never reach" not in json.dumps(llm.bodies(k))
    (step,) = healthy.steps(result.run_id or "")
    assert (step.state, step.queue, step.tokens_in, step.tokens_out) == (
        "succeeded", "agent", 3000, 600)
    assert step.cost_usd == pytest.approx(0.006)
    turns = turns_of(healthy, result.run_id or "")
    assert [(t.turn, t.attempt, t.tokens_in) for t in turns] == [(0, 1, 1000), (1, 1, 1000),
                                                                (2, 1, 1000)]
    assert {t.model_requested for t in turns} == {"anthropic:claude-haiku-4-5"}
    window = json.loads((agents / "summarize" / "benchmarks.json").read_text())
    last = window["runs"][-1]
    assert last["tokens"] == {"input": 3000, "output": 600}
    assert last["cost_usd"] == pytest.approx(0.006)


def test_an_invalid_answer_is_asked_for_again_then_fails_clearly(
        healthy: Stack, agents: Path, llm: FakeLLM, run_skill: RunSkill) -> None:
    k = key()
    llm.script(k, answer(summary="no count"), answer(summary="still no count"))
    result = run_skill("summarize", agents, inputs={"text": f"{llm.marker(k)} x"})
    assert result.code == 1, result
    assert "did not fit the declared outputs" in result.proc.stderr
    assert "Traceback" not in result.proc.stderr
    assert len(llm.requests(k)) == 2  # the answer, and one retry


def _with_marker(skill_md: Path, marker: str) -> None:
    """The conversation key in the body: a plain skill has no inputs to carry it."""
    skill_md.write_text(skill_md.read_text(encoding="utf-8") + f"\n{marker}\n",
                        encoding="utf-8")


# A plain folder names no model: the daemon's default serves it.
@pytest.mark.agent_env(SKILLQ_AGENT_MODEL="anthropic:claude-haiku-4-5")
def test_a_plain_skill_s_text_answer_reaches_the_person_and_later_steps(
        healthy: Stack, llm: FakeLLM, run_skill: RunSkill, tmp_path: Path) -> None:
    """Issue 41, item 3: a skill that declares no outputs (anthropics' brand-guidelines,
    as published) answers in text, and that text is its one output, `answer`."""
    vault = copy_vault(VAULTS / "plain-answer", tmp_path / "vault")
    brand = Path(shutil.copytree(REPO / "tests" / "fixtures" / "anthropic-layout" /
                                 "skills" / "brand-guidelines", vault / "brand-guidelines"))
    k, k2 = key(), key()
    _with_marker(brand / "SKILL.md", llm.marker(k))
    _with_marker(vault / "house-style" / "SKILL.md", llm.marker(k2))
    llm.script(k, {"text": "Use Poppins for headings.", "usage": USAGE})
    result = run_skill("brand-guidelines", vault, "--json")
    assert result.code == 0, result
    assert result.json() == {"answer": "Use Poppins for headings."}
    (step,) = healthy.steps(result.run_id or "")
    assert (step.state, step.queue, step.tokens_in) == ("succeeded", "agent", 1000)
    shown = healthy.cli("run-show", result.run_id or "", cwd=tmp_path)
    assert shown.returncode == 0 and "Use Poppins for headings." in shown.stdout, shown
    # A skill no model is offered (disable-model-invocation) a person still runs, and its
    # answer is what `skillq run` prints; then a later step of an orchestrator takes it.
    llm.script(k2, {"text": "Ship it.", "usage": USAGE},
               {"text": "We ship it today.", "usage": USAGE})
    direct = run_skill("house-style", vault)
    assert direct.code == 0, direct
    assert json.loads(direct.stdout) == {"answer": "Ship it."}
    flow = run_skill("styled-shout", vault, "--json")
    assert flow.code == 0, flow
    assert flow.json() == {"styled": "We ship it today.", "shouted": "WE SHIP IT TODAY."}


def test_a_budget_stops_the_requests_it_cannot_pay_for(
        healthy: Stack, agents: Path, llm: FakeLLM, run_skill: RunSkill) -> None:
    k = key()
    llm.script(k, call("skill", name="style-guide"), answer(summary="s", words=1))
    result = run_skill("summarize-cheap", agents, inputs={"text": f"{llm.marker(k)} x"})
    assert result.code == 1, result
    assert "budget of $0.001 reached" in result.proc.stderr
    assert len(llm.requests(k)) == 1  # the second request was never sent
    (step,) = healthy.steps(result.run_id or "")
    assert step.cost_usd == pytest.approx(0.002)


def test_a_cancelled_agent_step_sends_no_request_after_the_cancel(
        healthy: Stack, agents: Path, llm: FakeLLM, tmp_path: Path) -> None:
    k = key()
    # turn 0 at once; turn 1 in flight (4 s) when the run is cancelled; turn 2 never asked
    llm.script(k, call("skill", name="style-guide"),
               {**call("skill", name="style-guide"), "delay_s": 4},
               answer(summary="never", words=0))
    proc = healthy.cli("run", "summarize", "--vault", str(agents), "--input",
                       f"text={llm.marker(k)} x", "--detach", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()
    wait_until(lambda: len(llm.requests(k)) == 2, 60, "the second model request")
    cancelled = healthy.cli("cancel", run_id, cwd=tmp_path)
    assert cancelled.returncode == 0, cancelled.stderr
    # The in-flight answer comes back about 4 s after it was asked for; an agent that
    # went on would ask for turn 2 at once. Its attempt's end is the step's last word.
    wait_until(lambda: any("execute_step" in line and run_id in line and
                           ("succeeded" in line or "raised" in line)
                           for line in healthy.workers[AGENT_WORKER].log.read_text(
                               errors="replace").splitlines()),
               60, "the agent worker to finish the cancelled step's message")
    assert len(llm.requests(k)) == 2, llm.requests(k)
    assert healthy.run(run_id).state == "cancelled"
    (step,) = healthy.steps(run_id)
    assert step.state == "cancelled", step.state


def test_a_retried_step_replays_the_turns_it_paid_for(
        healthy: Stack, agents: Path, llm: FakeLLM, run_skill: RunSkill) -> None:
    k = key()
    overloaded = {"error": {"status": 529, "message": "overloaded"}}
    # turn 0 paid for; turn 1 overloaded through the SDK's own retries -> a step retry
    llm.script(k, call("skill", name="style-guide"), overloaded, overloaded, overloaded,
               answer(summary="plain", words=1))
    result = run_skill("summarize", agents, "--json", inputs={"text": f"{llm.marker(k)} x"})
    assert result.code == 0, result
    steps = healthy.steps(result.run_id or "")
    assert [(s.attempt, s.state) for s in steps] == [(1, "retrying"), (2, "succeeded")]
    first_turn = [r for r in llm.requests(k) if not llm_tool_results(r)]
    assert len(first_turn) == 1, "turn 0 was sent again instead of replayed"
    turns = turns_of(healthy, result.run_id or "")
    assert [(t.turn, t.attempt) for t in turns] == [(0, 1), (1, 2)]


def llm_tool_results(entry: dict[str, object]) -> bool:
    """Whether a recorded Anthropic request carries a tool result (it is not turn 0)."""
    body = entry["body"]
    assert isinstance(body, dict)
    return any(isinstance(block, dict) and block.get("type") == "tool_result"
               for message in body.get("messages", [])
               for block in (message.get("content") if isinstance(message.get("content"),
                                                                   list) else []))


def test_nested_agents_complete_on_an_agent_worker_of_concurrency_1(
        healthy: Stack, agents: Path, llm: FakeLLM, run_skill: RunSkill) -> None:
    """Each level's execute_skill call starts the next level as a run of its own and the
    step waits holding no slot: on d773015's model, three levels on one slot deadlock."""
    top, mid, leaf = key(), key(), key()
    llm.script(top, call("execute_skill", name="relay-mid",
                         inputs={"text": f"{llm.marker(mid)} go"}), answer(text="top done"))
    llm.script(mid, call("execute_skill", name="relay-leaf",
                         inputs={"text": f"{llm.marker(leaf)} go"}), answer(text="mid done"))
    llm.script(leaf, answer(text="leaf done"))
    result = run_skill("relay-top", agents, "--json", timeout_s=180,
                       inputs={"text": f"{llm.marker(top)} go"})
    assert result.code == 0, result
    assert result.json() == {"text": "top done"}
    # Each level saw the level below's typed outputs as its tool result.
    assert "mid done" in llm.tool_results(top)[1][0]
    assert "leaf done" in llm.tool_results(mid)[1][0]
    # Turn 0 of each waiting level was replayed when it ran again, not sent twice.
    assert [len(llm.requests(k)) for k in (top, mid, leaf)] == [2, 2, 1]
    with healthy.db() as session:
        runs = {r.skill: r for r in session.scalars(select(PipelineRun).where(
            PipelineRun.skill.in_(["relay-mid", "relay-leaf"]),
            PipelineRun.created_at >= healthy.run(result.run_id or "").created_at))}
    (top_step,) = healthy.steps(result.run_id or "")
    (mid_step,) = healthy.steps(runs["relay-mid"].id)
    assert runs["relay-mid"].parent_step_run_id == top_step.id
    assert runs["relay-mid"].triggered_by == "relay-top"
    assert runs["relay-leaf"].parent_step_run_id == mid_step.id
    assert all(r.state == "succeeded" for r in runs.values())
    assert (top_step.state, top_step.attempt) == ("succeeded", 1)  # one attempt, resumed
    # The run's cost is its tree's: 2 + 2 + 1 turns at $0.002, each counted once.
    with healthy.db() as session:
        cost = run_usage(session, [result.run_id or ""])[result.run_id or ""]
    assert (cost.cost_usd, cost.tokens_in, cost.tokens_out) == (pytest.approx(0.010), 5000,
                                                                 1000)


def test_a_note_is_filed_once_and_a_disabled_skill_is_not_loaded(
        healthy: Stack, agents: Path, llm: FakeLLM, run_skill: RunSkill,
        tmp_path: Path) -> None:
    off = healthy.cli("disable", "secret-plan", "--vault", str(agents), cwd=tmp_path)
    assert off.returncode == 0, off.stderr
    k = key()
    llm.script(k, call("skill", name="secret-plan"), call("skill", name="style-guide"),
               call("skill_improvement_note", skill_name="style-guide",
                    error="it says nothing about numbers",
                    diagnosis="the guide predates the word count output",
                    suggested_fix="add a line on writing counts as digits"),
               answer(summary="plain", words=1))
    result = run_skill("summarize-any", agents, "--json",
                       inputs={"text": f"{llm.marker(k)} x"})
    assert result.code == 0, result
    results = llm.tool_results(k)
    assert "no skill 'secret-plan'" in results[1][0]  # catalog: all, but disabled
    assert '<skill_content name="style-guide">' in results[2][0]
    assert "filed improvement note" in results[3][0]
    with healthy.db() as session:
        notes = session.scalars(select(ImprovementNote).where(
            ImprovementNote.skill == "style-guide",
            ImprovementNote.run_id == result.run_id)).all()
    assert [(n.diagnosis, n.summary, n.count) for n in notes] == [
        ("agent_report", "the guide predates the word count output", 1)]
    shown = healthy.cli("notes", "style-guide", cwd=tmp_path)
    assert "add a line on writing counts as digits" in shown.stdout, shown


def test_bash_runs_in_a_scratch_copy_with_nothing_of_the_worker(
        healthy: Stack, agents: Path, llm: FakeLLM, run_skill: RunSkill) -> None:
    k = key()
    llm.script(k, call("bash", command="wc -w < notes.txt; touch made-here; env; id -u"),
               answer(words=3))
    result = run_skill("count-words", agents, "--json",
                       inputs={"label": llm.marker(k)})
    assert result.code == 0, result
    assert result.json() == {"words": 3}
    (shown,) = llm.tool_results(k)[1]
    ran = json.loads(shown)
    assert ran["exit_code"] == 0 and ran["stdout"].startswith("3\n"), ran
    # The scrubbed environment of a script step: nothing of the worker's settings.
    assert "SKILLQ_DATABASE_URL" not in ran["stdout"]
    assert "ANTHROPIC_API_KEY" not in ran["stdout"]
    assert not (agents / "count-words" / "made-here").exists()  # a copy, not the vault
    # In the step's sandbox, as its account: never the worker's root.
    assert ran["stdout"].split()[-1] not in ("0", str(os.getuid())), ran


def test_bash_is_offered_only_to_a_skill_that_lists_it(
        healthy: Stack, agents: Path, llm: FakeLLM, run_skill: RunSkill) -> None:
    k = key()
    llm.script(k, answer(summary="s", words=1))
    result = run_skill("summarize", agents, inputs={"text": f"{llm.marker(k)} x"})
    assert result.code == 0, result
    (body,) = llm.bodies(k)
    assert "bash" not in {t["name"] for t in body["tools"]}


def test_a_budget_counts_what_the_skills_it_executed_cost(
        healthy: Stack, agents: Path, llm: FakeLLM, run_skill: RunSkill) -> None:
    top, leaf = key(), key()
    llm.script(top, call("execute_skill", name="relay-leaf",
                         inputs={"text": f"{llm.marker(leaf)} go"}),
               answer(text="never paid for"))
    llm.script(leaf, {**answer(text="leaf done"), "usage": {"input": 2000, "output": 400}})
    result = run_skill("relay-budget", agents, inputs={"text": f"{llm.marker(top)} go"},
                       timeout_s=180)
    assert result.code == 1, result
    # $0.002 of its own and $0.004 in relay-leaf: past $0.005 before its second request
    assert "budget of $0.005 reached" in result.proc.stderr, result
    assert "$0.0040 in the skills it executed" in result.proc.stderr, result
    assert len(llm.requests(top)) == 1


def test_execute_skill_s_model_is_the_model_the_sub_skill_runs_on(
        healthy: Stack, agents: Path, llm: FakeLLM, run_skill: RunSkill) -> None:
    caller, callee = key(), key()
    llm.script(caller, call("execute_skill", name="summarize-default",
                            inputs={"text": f"{llm.marker(callee)} x"},
                            model="openai-chat:llama3"),
               answer(summary="relayed", words=1))
    llm.script(callee, answer(summary="from llama", words=1))
    result = run_skill("summarize-any", agents, "--json", timeout_s=180,
                       inputs={"text": f"{llm.marker(caller)} x"})
    assert result.code == 0, result
    assert "from llama" in llm.tool_results(caller)[1][0]
    (request,) = llm.requests(callee)
    assert request["path"].endswith("/chat/completions") and request["body"]["model"] == \
        "llama3", request["path"]
    with healthy.db() as session:
        child = session.scalars(select(PipelineRun).where(
            PipelineRun.skill == "summarize-default",
            PipelineRun.triggered_by == "summarize-any")
            .order_by(PipelineRun.created_at.desc())).first()
    assert child is not None and child.state == "succeeded"
    assert [t.model_requested for t in turns_of(healthy, child.id)] == ["openai-chat:llama3"]


def test_a_file_the_prompt_only_listed_is_read_with_skill_resource(
        healthy: Stack, agents: Path, llm: FakeLLM, run_skill: RunSkill) -> None:
    k = key()
    llm.script(k, call("skill_resource", skill="big-brief", path="../secret-plan/SKILL.md"),
               call("skill_resource", skill="big-brief", path="references/facts.md"),
               answer(answer="forty-two"))
    result = run_skill("big-brief", agents, "--json",
                       inputs={"question": f"{llm.marker(k)} what is the answer?"})
    assert result.code == 0, result
    first = llm.bodies(k)[0]
    assert "references/facts.md" in json.dumps(first)  # listed under <skill_resources>
    assert "The answer is forty-two" not in json.dumps(first)  # over the prompt's budget
    results = llm.tool_results(k)
    assert "lists no file '../secret-plan/SKILL.md'" in results[1][0]
    assert "The answer is forty-two." in results[2][0]


# Last: the tests below leave the agent worker killed or started with settings of their
# own, so the module's other tests share one worker (each of these restarts it).
def test_a_step_whose_worker_died_mid_request_replays_what_was_paid_for(
        healthy: Stack, agents: Path, llm: FakeLLM, tmp_path: Path) -> None:
    k = key()
    # turn 0 answered and recorded; the request for turn 1 is in flight when the pool
    # process dies; the next attempt replays turn 0 and asks for turn 1 again.
    llm.script(k, call("skill", name="style-guide"),
               {**answer(summary="never seen", words=0), "delay_s": 20},
               answer(summary="plain", words=1))
    proc = healthy.cli("run", "summarize", "--vault", str(agents), "--input",
                       f"text={llm.marker(k)} x", "--detach", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()
    wait_until(lambda: len(llm.requests(k)) == 2, 60, "the second model request")
    (row,) = healthy.steps(run_id)
    assert row.state == "running" and row.worker_pid
    healthy.tainted.add(AGENT_WORKER)
    kill_pids([row.worker_pid])
    final = healthy.wait_run(run_id, timeout_s=120)
    assert final.state == "succeeded", final.error
    steps = healthy.steps(run_id)
    assert [(s.attempt, s.state) for s in steps] == [(1, "lost"), (2, "succeeded")]
    requests = llm.requests(k)
    assert len(requests) == 3  # turn 0 once (replayed after), turn 1 twice (never answered)
    assert sum(1 for r in requests if not llm_tool_results(r)) == 1
    assert [(t.turn, t.attempt) for t in turns_of(healthy, run_id)] == [(0, 1), (1, 2)]


@pytest.mark.agent_env(SKILLQ_AGENT_CATALOG_BUDGET_CHARS="20")
def test_a_catalog_cut_to_its_budget_is_on_the_step_s_record(
        healthy: Stack, agents: Path, llm: FakeLLM, run_skill: RunSkill) -> None:
    k = key()
    llm.script(k, answer(summary="s", words=1))
    result = run_skill("summarize", agents, inputs={"text": f"{llm.marker(k)} x"})
    assert result.code == 0, result
    (step,) = healthy.steps(result.run_id or "")
    assert "warning:" in (step.stderr_tail or "") and "style-guide" in step.stderr_tail, \
        step.stderr_tail
    (body,) = llm.bodies(k)
    assert "<name>style-guide</name>" not in json.dumps(body)  # cut, and said so


# No ANTHROPIC_API_KEY in the worker's environment (the fake model's, or this shell's).
@pytest.mark.agent_env(ANTHROPIC_API_KEY=None, SKILLQ_SECRET_ANTHROPIC_API_KEY="sk-ant-stored")
def test_a_provider_key_stored_as_a_skillq_secret_serves_the_step(
        healthy: Stack, agents: Path, llm: FakeLLM, run_skill: RunSkill) -> None:
    k = key()
    llm.script(k, answer(summary="s", words=1))
    result = run_skill("summarize", agents, "--json", inputs={"text": f"{llm.marker(k)} x"})
    assert result.code == 0, result  # routed (announced) and served with the stored key
    (step,) = healthy.steps(result.run_id or "")
    assert "sk-ant-stored" not in json.dumps([step.stderr_tail, step.stdout_tail, step.error])
