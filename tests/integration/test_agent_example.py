"""The offline agent example (examples/agent-local) end to end, as its README runs it.

The local model server is tests/support/fake_llm speaking OpenAI Chat Completions, in
place of Ollama or llama.cpp's server: the stack's agent worker is restarted with what
the README exports (OPENAI_BASE_URL and SKILLQ_AGENT_MODEL=openai-chat:llama3.2, no
OPENAI_API_KEY), so the real openai SDK and Pydantic AI send their requests to
/v1/chat/completions. Each note carries its own conversation key (`[[fake:KEY]]`), so
the three fan-out items get their own answers whatever order they run in. The same
worker also holds an Anthropic endpoint, for the youtube vault's text-summarizer, which
pins its model.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, RunResult, Stack, copy_vault
from sqlalchemy import select
from support.fake_llm import FakeLLM

from shared.db.agent_models import AgentTurn

pytestmark = pytest.mark.integration
RunSkill = Callable[..., RunResult]
AGENT_WORKER = "agent-gpu-cmd0"  # serves the agent queue (conftest.STANDARD_WORKERS)
LOCAL_MODEL = "openai-chat:llama3.2"
PROVIDER_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY",
                 "OPENAI_BASE_URL")

# The three sample notes' triage, as a local model would answer it.
TRIAGE = {
    "01-export-broken.txt": {"category": "bug", "priority": "high",
                             "summary": "CSV export on the reports page does nothing since "
                                        "today's release; numbers due tomorrow."},
    "02-dark-mode.txt": {"category": "request", "priority": "low",
                         "summary": "Asks for a dark mode for the dashboard."},
    "03-password.md": {"category": "question", "priority": "medium",
                       "summary": "Asks how to change the e-mail address for password "
                                  "reset links."},
}


@pytest.fixture
def worker_env(llm: FakeLLM) -> dict[str, dict[str, str | None]]:
    """The agent worker as the README starts it: a Chat Completions endpoint and a
    default model, no OpenAI key (plus an Anthropic endpoint and key). ``healthy``
    restarts it so once for the module's tests; the next module's restarts it plain."""
    return {AGENT_WORKER: {**dict.fromkeys(PROVIDER_VARS),
                           "OPENAI_BASE_URL": llm.openai_base_url,
                           "ANTHROPIC_BASE_URL": llm.anthropic_base_url,
                           "ANTHROPIC_API_KEY": "sk-ant-fake",
                           "SKILLQ_AGENT_MODEL": LOCAL_MODEL}}


@pytest.fixture
def local_model(healthy: Stack) -> None:
    """The agent worker running as the README starts it (``worker_env``)."""


def key() -> str:
    return f"local-{uuid.uuid4().hex[:12]}"


def turns_of(stack: Stack, run_id: str) -> list[AgentTurn]:
    with stack.db() as session:
        return list(session.scalars(select(AgentTurn).where(AgentTurn.run_id == run_id)
                                    .order_by(AgentTurn.item_index, AgentTurn.turn)))


def as_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def system_and_user(body: dict[str, Any]) -> tuple[str, str]:
    messages = body["messages"]
    system = "\n".join(str(m["content"]) for m in messages if m["role"] == "system")
    user = "\n".join(str(m["content"]) for m in messages if m["role"] == "user")
    return system, user


def test_the_local_triage_example_runs_end_to_end_on_chat_completions(
        healthy: Stack, local_model: None, llm: FakeLLM, run_skill: RunSkill,
        tmp_path: Path) -> None:
    vault = copy_vault(EXAMPLES / "agent-local", tmp_path / "vault")
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    keys, notes = {}, {}
    for sample in sorted((vault / "triage-inbox" / "samples").iterdir()):
        keys[sample.name] = k = key()
        notes[sample.name] = f"{sample.read_text().strip()}\n{llm.marker(k)}"
        (inbox / sample.name).write_text(notes[sample.name] + "\n")
        llm.script(k, {"output": TRIAGE[sample.name], "usage": {"input": 700, "output": 40}})
    (inbox / "README.png").write_bytes(b"\x89PNG")  # not a note: never reaches a model

    result = run_skill("triage-inbox", vault, "--json", inputs={"folder": str(inbox)})
    assert result.code == 0, result

    # The typed answers, joined with their files and sorted high -> medium -> low.
    out = result.json()
    order = ["01-export-broken.txt", "03-password.md", "02-dark-mode.txt"]
    assert out["items"] == [{"file": f, **TRIAGE[f]} for f in order]
    assert out["counts"] == {"high": 1, "medium": 1, "low": 1}
    assert out["board"].splitlines()[2].startswith("| high | bug | 01-export-broken.txt |")

    # One Chat Completions request per note, for the daemon's model, offering the typed
    # answer as a tool; the prompt is the skill and its rubric, the input that note only.
    for name, k in keys.items():
        (request,) = llm.requests(k)
        assert (request["path"], request["api"]) == ("/v1/chat/completions", "openai-chat")
        body = request["body"]
        assert body["model"] == "llama3.2"
        assert "final_result" in {t["function"]["name"] for t in body.get("tools", [])}
        system, user = system_and_user(body)
        assert '<skill_content name="triage-note">' in system
        assert "An `incident` is always `high`" in system  # categories.md, inlined
        assert as_json({"note": notes[name]}) in user  # the inputs, as JSON
        assert all(as_json(notes[n])[1:-1] not in user for n in keys if n != name)
        assert name not in user  # nor the file's name: the skill declares only `note`
    assert not any(r["path"].endswith("/messages") for k in keys.values()
                   for r in llm.requests(k))

    # The records: scripts on default, one agent item per note on agent, each charged
    # its tokens at a local model's price ($0), each turn recorded.
    steps = healthy.steps(result.run_id or "")
    assert {(s.step_id, s.queue) for s in steps} == {
        ("read", "default"), ("triage", "agent"), ("board", "default")}
    triage = [s for s in steps if s.step_id == "triage"]
    assert [(s.item_index, s.attempt, s.state) for s in triage] == [
        (0, 1, "succeeded"), (1, 1, "succeeded"), (2, 1, "succeeded")]
    assert {(s.tokens_in, s.tokens_out, s.cost_usd) for s in triage} == {(700, 40, 0.0)}
    turns = turns_of(healthy, result.run_id or "")
    assert [(t.item_index, t.turn, t.model_requested, t.model_served) for t in turns] == [
        (i, 0, LOCAL_MODEL, "llama3.2") for i in range(3)]


def test_a_single_note_runs_on_its_own_with_typed_outputs(
        healthy: Stack, local_model: None, llm: FakeLLM, run_skill: RunSkill,
        tmp_path: Path) -> None:
    vault = copy_vault(EXAMPLES / "agent-local", tmp_path / "vault")
    k = key()
    # A first answer that does not fit (priority missing) is asked for once more.
    llm.script(k, {"output": {"category": "incident", "summary": "Login is down."}},
               {"output": {"category": "incident", "priority": "high",
                           "summary": "The login page fails for every user since 9:00."}})
    note = f"The login page shows a 500 error for every user since 9:00. {llm.marker(k)}"
    result = run_skill("triage-note", vault, "--json", inputs={"note": note})
    assert result.code == 0, result
    assert result.json() == {"category": "incident", "priority": "high",
                             "summary": "The login page fails for every user since 9:00."}
    assert [r["path"] for r in llm.requests(k)] == ["/v1/chat/completions"] * 2
    (step,) = healthy.steps(result.run_id or "")
    assert (step.queue, step.state) == ("agent", "succeeded")


def test_the_youtube_text_summarizer_runs_as_written_on_its_pinned_model(
        healthy: Stack, local_model: None, llm: FakeLLM, run_skill: RunSkill,
        tmp_path: Path) -> None:
    """model_override: true: the skill's Haiku, not the daemon's local default."""
    vault = copy_vault(EXAMPLES / "youtube", tmp_path / "vault")
    k = key()
    llm.script(k, {"output": {"summary": "Python 3.13 ships an opt-in free-threaded build."},
                   "usage": {"input": 1000, "output": 200}})
    text = (f"{llm.marker(k)} Today the Python Steering Council announced that Python 3.13 "
            "will ship an experimental free-threaded build.")
    result = run_skill("text-summarizer", vault, "--json",
                       inputs={"text": text, "max_words": 20})
    assert result.code == 0, result
    assert result.json() == {"summary": "Python 3.13 ships an opt-in free-threaded build."}
    (request,) = llm.requests(k)
    assert (request["path"], request["body"]["model"]) == (
        "/v1/messages", "claude-haiku-4-5-20251001")
    (step,) = healthy.steps(result.run_id or "")
    assert (step.queue, step.tokens_in, step.tokens_out) == ("agent", 1000, 200)
    assert step.cost_usd == pytest.approx(0.002)  # $1 / $5 per million tokens
