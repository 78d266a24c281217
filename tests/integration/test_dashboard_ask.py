"""The dashboard's Ask page end to end: a real `skillq dashboard` process, real Chromium
(Playwright), the real stack, and the fake model server (tests/support/fake_llm) as the
agent worker's model, as in test_ask.py, whose fixtures this module binds.

The composer's tokens come from the server's one resolution function
(shared/slash_tokens.py ``resolve``): each test that paints compares what the page shows
with ``resolve`` called here on the same text and library.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import test_ask
from conftest import VAULTS, Stack, copy_vault, wait_until
from playwright.sync_api import Browser, Page, expect
from sqlalchemy import text as sql
from support.fake_llm import FakeLLM
from test_ask import AGENT_WORKER, MODEL, USAGE, ask_runs, key
from test_dashboard import Served, serve, shot

from shared.library_tokens import library_states, token_entries
from shared.slash_tokens import resolve
from shared.vault import load_vault

pytestmark = pytest.mark.integration
# test_ask.py's fixture, bound to its name here so that pytest finds it: the agent
# worker's environment pointing at the fake model server (conftest's ``llm``, this
# module's own), which `healthy` starts the worker with.
worker_env = test_ask.worker_env

LIVE_TIMEOUT_MS = 45_000
TYPED = "/Style Guide then /big-brief and /no-such-skill and docs/style-guide"
FIRST = "Looking at style-guide first."
SECOND = "Write it plainly, in one line."


@pytest.fixture(scope="module")
def ask_vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_vault(VAULTS / "agents", tmp_path_factory.mktemp("dash-ask") / "vault")


@pytest.fixture(scope="module")
def served(stack: Stack, ask_vault: Path) -> Iterator[Served]:
    """One dashboard for the module, with SKILLQ_AGENT_MODEL set: the model field's
    default (the built-in skill declares no model)."""
    dashboard = serve(stack, ask_vault, env={"SKILLQ_AGENT_MODEL": MODEL})
    yield dashboard
    dashboard.stop()


def shown_tokens(page: Page) -> list[tuple[int, int, str, str, str]]:
    items = page.locator("#tokens li.token")
    found = []
    for i in range(items.count()):
        li = items.nth(i)
        found.append((int(li.get_attribute("data-start") or -1),
                      int(li.get_attribute("data-end") or -1),
                      li.get_attribute("data-slug") or "", li.get_attribute("data-written") or "",
                      li.get_attribute("data-state") or ""))
    return found


def resolved(stack: Stack, vault: Path, typed: str) -> list[tuple[int, int, str, str, str]]:
    """The tokens `resolve` reads in ``typed`` over the vault's library as it is now."""
    with stack.db() as session:
        states = library_states(session, str(vault.resolve()))
    resolution = resolve(typed, token_entries(load_vault(vault).skills, states))
    return [(t.start, t.end, t.slug, t.written, str(t.state)) for t in resolution.tokens]


def painted_for(page: Page, typed: str) -> None:
    """Wait until the composer's tokens are those of ``typed`` (the debounced check)."""
    page.wait_for_function(
        "t => document.getElementById('tokens').dataset.checked === t", arg=typed)


def listeners(stack: Stack) -> int:
    """Connections LISTENing for answer pieces (orchestrator/ask.py AnswerStream's)."""
    with stack.db() as session:
        return int(session.scalar(sql(
            "SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN skillq_ask_text'"))
            or 0)


def run_of(page: Page) -> str:
    expect(page.locator("#ask-result")).to_have_attribute("data-run", re.compile(r"\S"))
    return page.locator("#ask-result").get_attribute("data-run") or ""


def test_the_composer_paints_tokens_as_resolve_reads_them_and_enables_one(
        stack: Stack, ask_vault: Path, served: Served, page: Page) -> None:
    disabled = stack.cli("disable", "big-brief", "--vault", str(ask_vault),
                         cwd=ask_vault.parent)
    assert disabled.returncode == 0, disabled.stderr
    page.goto(served.url + "/")
    page.click("#nav-ask")
    expect(page.locator("h1")).to_have_text("Ask")
    page.locator("#ask-text").press_sequentially(TYPED, delay=5)
    painted_for(page, TYPED)
    shot(page, "ask-tokens")
    assert shown_tokens(page) == resolved(stack, ask_vault, TYPED)
    assert [t[2:] for t in shown_tokens(page)] == [
        ("style-guide", "Style Guide", "enabled"), ("big-brief", "big-brief", "disabled"),
        ("no-such-skill", "no-such-skill", "unknown")]
    style = page.locator("#tokens li[data-slug=style-guide]")
    expect(style).to_have_class(re.compile(r"\btoken-enabled\b"))
    expect(style).to_contain_text("/Style Guide → /style-guide")
    brief = page.locator("#tokens li[data-slug=big-brief]")
    expect(brief).to_have_class(re.compile(r"\btoken-disabled\b"))
    expect(brief.locator("code.fix")).to_have_text("skillq enable big-brief")
    unknown = page.locator("#tokens li[data-slug=no-such-skill]")
    expect(unknown).to_have_class(re.compile(r"\btoken-unknown\b"))
    expect(unknown.locator("code.fix")).to_have_text("skillq new no-such-skill")
    expect(unknown).to_contain_text("the dashboard has no skill editor")
    expect(unknown.locator("button")).to_have_count(0)
    # The text itself, painted: each token where it is written, the rest plain
    # (`docs/style-guide` is no token).
    spans = page.locator("#painted span.token")
    expect(spans).to_have_text(["/Style Guide", "/big-brief", "/no-such-skill"])
    expect(page.locator("#painted span.token-disabled")).to_have_text("/big-brief")
    expect(page.locator("#painted")).to_have_text(TYPED)
    expect(page.locator("#token-summary")).to_contain_text(
        "sent as: /style-guide then /big-brief and /no-such-skill and docs/style-guide")

    brief.get_by_role("button", name="Enable").click()
    expect(brief).to_have_class(re.compile(r"\btoken-enabled\b"))
    expect(page.locator("#painted span.token-enabled")).to_have_count(2)
    shot(page, "ask-tokens-enabled")
    assert shown_tokens(page) == resolved(stack, ask_vault, TYPED)
    assert shown_tokens(page)[1][4] == "enabled"
    with stack.db() as session:
        assert library_states(session, str(ask_vault.resolve()))["big-brief"].enabled


def test_send_streams_the_answer_then_the_recorded_one_with_its_cost(
        healthy: Stack, served: Served, llm: FakeLLM, page: Page) -> None:
    k = key()
    llm.script(k, {"text": FIRST,
                   "tool_calls": [{"name": "skill", "arguments": {"name": "style-guide"}}],
                   "usage": USAGE},
               {"text": SECOND, "usage": USAGE, "delay_s": 6})
    baseline = listeners(healthy)
    page.goto(served.url + "/ask")
    expect(page.locator("#ask-model")).to_have_value(MODEL)  # SKILLQ_AGENT_MODEL
    page.fill("#ask-text", f"{llm.marker(k)} how do I write a summary?")
    page.click("#send-button")
    run_id = run_of(page)
    # The second turn is answered 6 s after it is asked: the first turn's text on the
    # page before then came as it streamed (the wait covers a cold agent worker).
    expect(page.locator("#answer")).to_contain_text(FIRST, timeout=LIVE_TIMEOUT_MS)
    assert healthy.run(run_id).state == "running"  # the answer is still to come
    assert SECOND not in page.locator("#answer").inner_text()
    expect(page.locator("#ask-state")).to_have_text("running")
    shot(page, "ask-streaming")

    expect(page.locator("#ask-state")).to_have_text("succeeded", timeout=LIVE_TIMEOUT_MS)
    expect(page.locator("#ask-result")).to_have_attribute("data-done", "1")
    shot(page, "ask-answered")
    assert page.locator("#answer").inner_text() == f"{FIRST}\n\n{SECOND}"
    expect(page.locator("#ask-cost")).to_have_text("$0.0040")
    expect(page.locator("#ask-tokens")).to_have_text("2000 in / 400 out")
    expect(page.locator("#ask-error")).to_be_hidden()
    run = healthy.run(run_id)
    assert (run.skill, run.source, run.state, run.triggered_by) == (
        "skillq-ask", "ask", "succeeded", "dashboard")
    assert page.locator("#answer").inner_text().endswith(run.outputs["answer"])
    assert all(r["stream"] for r in llm.requests(k))
    # The stream's LISTEN connection is closed with the request that used it.
    wait_until(lambda: listeners(healthy) == baseline, 10, "the stream's listener to close")

    page.click("#run-link")
    expect(page.locator("#run-state")).to_have_text("succeeded")
    expect(page.locator("#run-cost")).to_have_text("$0.0040")


def test_a_missed_piece_is_made_good_from_the_record(
        healthy: Stack, served: Served, llm: FakeLLM, page: Page) -> None:
    """A stream opened after the answer was written (a reload, another tab) shows the
    recorded answer in its final event."""
    k = key()
    llm.script(k, {"text": "All of it, at once.", "usage": USAGE})
    page.goto(served.url + "/ask")
    page.fill("#ask-text", f"{llm.marker(k)} quick")
    page.click("#send-button")
    run_id = run_of(page)
    expect(page.locator("#ask-state")).to_have_text("succeeded", timeout=LIVE_TIMEOUT_MS)
    # The same run's stream again, fetched by the page: no piece, then the final event.
    events = page.evaluate("""url => new Promise((done, failed) => {
        const source = new EventSource(url), seen = [];
        source.addEventListener('piece', e => seen.push(['piece', JSON.parse(e.data)]));
        source.addEventListener('final', e => {
            source.close(); seen.push(['final', JSON.parse(e.data)]); done(seen); });
        source.onerror = () => { source.close(); failed(new Error('stream failed')); };
    })""", f"/ask/runs/{run_id}/stream")
    assert [name for name, _ in events] == ["final"]
    final = events[0][1]
    assert (final["state"], final["answer"], final["rest"]) == (
        "succeeded", "All of it, at once.", "All of it, at once.")
    assert (final["tokens_in"], final["tokens_out"]) == (1000, 200)


def test_a_page_closed_mid_answer_leaves_no_listener(
        healthy: Stack, served: Served, llm: FakeLLM, browser: Browser) -> None:
    k = key()
    llm.script(k, {"text": "Slowly.", "usage": USAGE, "delay_s": 5})
    baseline = listeners(healthy)
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(served.url + "/ask")
        page.fill("#ask-text", f"{llm.marker(k)} take your time")
        page.click("#send-button")
        run_id = run_of(page)
        expect(page.locator("#ask-result")).to_have_attribute("data-streaming", "1")
        assert listeners(healthy) == baseline + 1
    finally:
        context.close()
    wait_until(lambda: listeners(healthy) == baseline, 10,
               "the dashboard to close the stream of a page that went away")
    assert healthy.wait_run(run_id).state == "succeeded"  # the run did not need the page


def test_refusals_are_shown_on_the_page_and_start_nothing(
        healthy: Stack, ask_vault: Path, served: Served, page: Page) -> None:
    before = {r.id for r in ask_runs(healthy)}
    page.goto(served.url + "/ask")
    # The guard's rules hold here as on every page: a POST without the form token (the
    # browser's cookie alone) is refused before the page's code runs.
    unsigned = page.request.post(served.url + "/ask", form={"text": "hello", "model": MODEL})
    assert unsigned.status == 403 and "Form token missing" in unsigned.text()
    page.click("#send-button")
    expect(page.locator("#ask-error")).to_contain_text(
        "skillq ask: TEXT: give the request's text")

    refused = healthy.cli("ask", "hello", "--model", "nope", "--vault", str(ask_vault),
                          cwd=ask_vault.parent)
    assert refused.returncode != 0
    page.fill("#ask-text", "hello")
    page.fill("#ask-model", "nope")
    page.click("#send-button")
    error = page.locator("#ask-error")
    expect(error).to_contain_text("model 'nope' is not one skillq can place")
    assert " ".join(error.inner_text().split()) in " ".join(refused.stderr.split())

    page.fill("#ask-model", MODEL)
    healthy.consumer(AGENT_WORKER, "agent", on=False)
    try:
        page.click("#send-button")
        expect(error).to_contain_text("no online worker can run what this run needs",
                                      timeout=20_000)
        expect(error).to_contain_text("needs queue 'agent'")
        shot(page, "ask-refused")
    finally:
        healthy.consumer(AGENT_WORKER, "agent", on=True)
    expect(page.locator("#ask-result")).to_be_hidden()
    assert {r.id for r in ask_runs(healthy)} == before
