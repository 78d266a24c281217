"""An agent step's records read back: `skillq run-show` (text, --logs, --json) and the
dashboard's run and skill pages, through the real CLI, a real dashboard process and real
Chromium, after real agent runs against the local wire-format model server
(tests/support/fake_llm; fixtures from test_agent_steps.py).

Every scripted turn is 1000 tokens in and 200 out: $0.002 for claude-haiku-4-5, less
when 400 of the input are cache reads ($0.00164).
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
import test_agent_steps
from conftest import Stack, add_orchestrator
from playwright.sync_api import Page, expect
from support.fake_llm import FakeLLM
from test_agent_steps import USAGE, RunSkill, answer, call, key, turns_of
from test_dashboard import serve, shot
from test_run_show import ATTEMPT_KEYS

from shared import secrets

pytestmark = pytest.mark.integration
# test_agent_steps.py's fixtures, bound to their names here so that pytest finds them:
# the agent worker's environment pointing at the fake model server (conftest's ``llm``,
# this module's own), which `healthy` starts the worker with, and the vault.
worker_env = test_agent_steps.worker_env
agents = test_agent_steps.agents

TURN_KEYS = {"turn", "attempt", "model_requested", "model_served", "tokens_in", "tokens_out",
             "cache_read", "cache_write", "cost_usd", "duration_ms", "stop_reason"}
CACHED = {**USAGE, "cache_read": 400}  # $0.00164
MODEL = "anthropic:claude-haiku-4-5"


def show(stack: Stack, run_id: str, *args: str, env: dict[str, str] | None = None) -> str:
    shown = stack.cli("run-show", run_id, *args, cwd=stack.home, env=env)
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


def attempts_of(document: dict[str, Any]) -> list[dict[str, Any]]:
    (step,) = document["steps"]
    found: list[dict[str, Any]] = step["attempts"]
    return found


def test_run_show_has_tokens_cost_turns_and_with_logs_the_transcript(
        healthy: Stack, agents: Path, llm: FakeLLM, run_skill: RunSkill) -> None:
    k = key()
    token = f"arec-{uuid.uuid4().hex}"  # a secret this machine holds, said by the model
    llm.script(k, {"text": f"Reading the style guide first (key {token}).",
                   "tool_calls": [{"name": "skill", "arguments": {"name": "style-guide"}}],
                   "usage": USAGE},
               {"output": {"summary": "plain words", "words": 2}, "usage": CACHED})
    result = run_skill("summarize", agents, "--json",
                       inputs={"text": f"{llm.marker(k)} two words"})
    assert result.code == 0, result
    run_id = result.run_id or ""
    turns = turns_of(healthy, run_id)
    assert [(t.turn, t.attempt, t.tokens_in, t.tokens_out, t.cache_read) for t in turns] == [
        (0, 1, 1000, 200, 0), (1, 1, 1000, 200, 400)]
    env = {secrets.env_name("arec_token"): token}

    doc = json.loads(show(healthy, run_id, "--json", env=env))
    (attempt,) = attempts_of(doc)
    assert set(attempt) == ATTEMPT_KEYS
    assert attempt["tokens"] == {"input": 2000, "output": 400, "cache_read": 400,
                                 "cache_write": 0}
    assert attempt["cost_usd"] == pytest.approx(0.00364)
    assert attempt["turns"] == [
        {"turn": t.turn, "attempt": 1, "model_requested": MODEL,
         "model_served": t.model_served, "tokens_in": 1000, "tokens_out": 200,
         "cache_read": t.cache_read, "cache_write": 0, "cost_usd": t.cost_usd,
         "duration_ms": t.duration_ms, "stop_reason": t.stop_reason} for t in turns]
    assert [t["cost_usd"] for t in attempt["turns"]] == [pytest.approx(0.002),
                                                        pytest.approx(0.00164)]
    assert {t.model_served for t in turns} == {"claude-haiku-4-5"}
    assert all(t.stop_reason and t.duration_ms > 0 for t in turns)

    logged = show(healthy, run_id, "--json", "--logs", env=env)
    assert token not in logged
    first, last = attempts_of(json.loads(logged))[0]["turns"]
    assert set(first) == TURN_KEYS | {"text", "tool_calls"}
    assert (first["text"], first["tool_calls"]) == (
        "Reading the style guide first (key ***).",
        [{"name": "skill", "arguments": {"name": "style-guide"}}])
    assert (last["text"], last["tool_calls"]) == (
        None, [{"name": "final_result", "arguments": {"summary": "plain words", "words": 2}}])

    text = show(healthy, run_id, env=env)
    line = next(ln for ln in text.splitlines() if "attempt 1" in ln)
    assert "tokens 2000 in / 400 out (cache read 400, write 0) · $0.00364 · 2 model turns" \
        in line, text
    assert "turn 0" not in text and "style guide first" not in text  # only with --logs

    text = show(healthy, run_id, "--logs", env=env)
    assert token not in text
    for t in turns:
        head = (f"turn {t.turn} · {MODEL} → claude-haiku-4-5 · 1000 in / 200 out"
                f"{' (cache read 400, write 0)' if t.cache_read else ''} · "
                f"${t.cost_usd:.4g} · {t.duration_ms:.0f} ms · {t.stop_reason}")
        assert head in text, text
    assert "Reading the style guide first (key ***)." in text
    assert '→ skill({"name": "style-guide"})' in text
    assert '→ final_result({"summary": "plain words", "words": 2})' in text
    # the transcript comes after its attempt, in turn order
    assert text.index("attempt 1") < text.index("turn 0 ·") < text.index("turn 1 ·")


def test_a_retried_attempt_lists_the_turns_it_replayed(
        healthy: Stack, agents: Path, llm: FakeLLM, run_skill: RunSkill) -> None:
    k = key()
    overloaded = {"error": {"status": 529, "message": "overloaded"}}
    # turn 0 paid for by attempt 1; turn 1 overloaded through the SDK's retries -> attempt 2
    llm.script(k, call("skill", name="style-guide"), overloaded, overloaded, overloaded,
               answer(summary="plain", words=1))
    result = run_skill("summarize", agents, inputs={"text": f"{llm.marker(k)} x"})
    assert result.code == 0, result
    run_id = result.run_id or ""
    first, second = attempts_of(json.loads(show(healthy, run_id, "--json")))
    assert (first["state"], second["state"]) == ("retrying", "succeeded")
    # Each attempt's conversation: attempt 2 replayed turn 0 (paid by attempt 1).
    assert [(t["turn"], t["attempt"]) for t in first["turns"]] == [(0, 1)]
    assert [(t["turn"], t["attempt"]) for t in second["turns"]] == [(0, 1), (1, 2)]
    assert (first["tokens"]["input"], first["tokens"]["output"]) == (1000, 200)
    assert (second["tokens"]["input"], second["tokens"]["output"]) == (2000, 400)
    assert first["cost_usd"] == pytest.approx(0.002)
    assert second["cost_usd"] == pytest.approx(0.004)

    text = show(healthy, run_id, "--logs")
    attempt_2 = text.split("attempt 2", 1)[1]
    assert "2 model turns (1 replayed)" in attempt_2.splitlines()[0]
    assert "turn 0 replayed from attempt 1" in attempt_2
    assert "turn 0 ·" not in attempt_2 and "turn 1 ·" in attempt_2  # shown once, where paid
    assert "turn 0 ·" in text.split("attempt 2", 1)[0]


def points(page: Page, chart: str) -> dict[str, str]:
    """A trend chart's points: run id -> the point's hover title."""
    found = page.locator(f"{chart} svg.chart circle.point")
    return {found.nth(i).get_attribute("data-run") or "":
            found.nth(i).locator("title").text_content() or "" for i in range(found.count())}


def test_the_dashboard_shows_cost_and_tokens_per_step_and_per_run(
        healthy: Stack, agents: Path, llm: FakeLLM, run_skill: RunSkill,
        page: Page) -> None:
    add_orchestrator(agents, "digest", "summarize")
    add_orchestrator(agents, "digest-outer", "digest")  # summarize two runs down
    two, one, nested = key(), key(), key()
    llm.script(two, call("skill", name="style-guide"), answer(summary="s", words=1))
    llm.script(one, answer(summary="s", words=1))
    llm.script(nested, answer(summary="s", words=1))
    runs = {}
    for name, k in (("summarize", two), ("summarize", one), ("digest-outer", nested)):
        result = run_skill(name, agents, inputs={"text": f"{llm.marker(k)} x"})
        assert result.code == 0, result
        runs[k] = result.run_id or ""

    served = serve(healthy, agents)
    try:
        page.goto(f"{served.url}/runs/{runs[two]}")
        shot(page, "agent-run")
        expect(page.locator("#run-cost")).to_have_text("$0.0040")
        expect(page.locator("#run-tokens")).to_have_text("2000 in / 400 out")
        (step,) = healthy.steps(runs[two])
        row = page.locator(f"tr.step-row[data-step='{step.step_id}']")
        expect(row.locator(".step-cost")).to_have_text("$0.0040")
        expect(row.locator(".step-tokens")).to_have_text("2000 in / 400 out")

        page.goto(f"{served.url}/runs/{runs[nested]}")  # the tree's total
        expect(page.locator("#run-cost")).to_have_text("$0.0020")
        expect(page.locator("#run-tokens")).to_have_text("1000 in / 200 out")

        page.goto(f"{served.url}/skills/summarize")
        shot(page, "agent-skill")
        expect(page.locator("#tokens-chart svg.chart circle.point")).to_have_count(2)
        cost, tokens = points(page, "#cost-chart"), points(page, "#tokens-chart")
        assert set(cost) == set(tokens) == {runs[two], runs[one]}
        assert re.search(r"· 0\.004 USD$", cost[runs[two]]), cost
        assert re.search(r"· 0\.002 USD$", cost[runs[one]]), cost
        assert tokens[runs[two]].endswith("· 2,400 in + out (2000 in / 400 out)"), tokens
        assert tokens[runs[one]].endswith("· 1,200 in + out (1000 in / 200 out)"), tokens

        # An orchestrator's point is its pipeline run's total, nested runs included.
        for name in ("digest-outer", "digest"):
            page.goto(f"{served.url}/skills/{name}")
            expect(page.locator("#cost-chart svg.chart circle.point")).to_have_count(1)
            (title,) = points(page, "#cost-chart").values()
            assert title.endswith("· 0.002 USD"), (name, title)
            (title,) = points(page, "#tokens-chart").values()
            assert title.endswith("· 1,200 in + out (1000 in / 200 out)"), (name, title)
        shot(page, "agent-orchestrator")
    finally:
        served.stop()
