"""The skill page's "Try it" panel (`skillq try NAME "request"` in the browser) against a
real `skillq dashboard` process over HTTP, the real stack and workers, and the scripted
model server (tests/support/fake_llm) as the session's agent, as in test_waits.py, whose
fixtures and helpers this module binds; then the panel itself in real Chromium.

The dashboard asks for credentials (on loopback too), so an answer records its user:
"dashboard:ada". A script's requests carry the cookie and the form token a page handed
out, as test_dashboard_waits.py's do.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import test_waits
from conftest import VAULTS, Stack, copy_vault, wait_until
from playwright.sync_api import Browser, expect
from sqlalchemy import select
from support.dashboard_http import Client
from support.fake_llm import FakeLLM
from test_dashboard import Served, served_signed_in, shot
from test_waits import AGENT_WORKER, USAGE, call, key

from shared.db.models import PipelineRun
from shared.db.wait_models import Wait

pytestmark = pytest.mark.integration
# test_waits.py's fixture, bound to its name here so that pytest finds it: the agent
# worker pointed at this module's fake model server (SKILLQ_AGENT_MODEL set: skillq-try
# runs on the daemon's default model), which `healthy` starts it with.
worker_env = test_waits.worker_env

USER, PASSWORD = "ada", "try-it-pass"
RUN_TIMEOUT_S = 120.0
FIRST_ANSWER = "echo said one, then two"


class Listening(threading.Thread):
    """A stream read in the background (it ends only with the run, which waits for an
    answer this test gives meanwhile)."""

    def __init__(self, client: Client, path: str) -> None:
        super().__init__(daemon=True)
        self.client, self.path = client, path
        self.found: list[tuple[str, dict[str, Any]]] = []
        self.failed: BaseException | None = None

    def run(self) -> None:
        try:
            self.found = self.client.events(self.path)
        except BaseException as exc:
            self.failed = exc

    def ended(self) -> list[tuple[str, dict[str, Any]]]:
        self.join(RUN_TIMEOUT_S)
        assert not self.is_alive(), "the answer's stream did not end"
        assert self.failed is None, self.failed
        return self.found


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_vault(VAULTS / "waits", tmp_path_factory.mktemp("dash-try") / "vault")


@pytest.fixture(scope="module")
def served(stack: Stack, vault: Path) -> Iterator[Served]:
    with served_signed_in(stack, vault, USER, PASSWORD) as dashboard:
        yield dashboard


@pytest.fixture
def client(served: Served) -> Client:
    found = Client(served.url, USER, PASSWORD, timeout_s=RUN_TIMEOUT_S)
    page = found.get("/skills/echo")  # the cookie, and the panel's form token
    assert page.status == 200, page.text[:2000]
    assert 'id="try"' in page.text and 'action="/skills/echo/try"' in page.text
    return found


def send(client: Client, request: str, earlier: list[dict[str, str]]) -> dict[str, Any]:
    reply = client.post("/skills/echo/try", {"request": request,
                                             "earlier": json.dumps(earlier)})
    assert reply.status == 200, reply.text[:2000]
    started: dict[str, Any] = reply.json()
    base = f"/skills/echo/try/{started['run_id']}"
    assert (started["stream_url"], started["progress_url"], started["answer_url"]) == (
        f"{base}/stream", base, f"{base}/answer")
    return started


def progress(client: Client, started: dict[str, Any]) -> dict[str, Any]:
    reply = client.get(started["progress_url"])
    assert reply.status == 200, reply.text[:2000]
    assert reply.headers["content-type"].startswith("application/json")
    found: dict[str, Any] = reply.json()
    return found


def polled(client: Client, started: dict[str, Any], until: str) -> dict[str, Any]:
    """The request's progress once ``until`` holds of it ("question" or "ended")."""
    seen: dict[str, Any] = {}

    def reached() -> bool:
        seen.clear()
        seen.update(progress(client, started))
        return bool(seen["questions"]) if until == "question" else bool(seen["ended"])

    wait_until(reached, RUN_TIMEOUT_S, f"request {started['run_id']}: {until}", every_s=0.3)
    return seen


def test_a_session_calls_asks_is_answered_and_carries_its_conversation(
        healthy: Stack, served: Served, client: Client, llm: FakeLLM) -> None:
    """The scripted agent calls echo, asks (answered by POST), calls echo again and
    answers; the answer streams; a second request carries the first exchange."""
    k = key()
    llm.script(k, call("execute_skill", {"name": "echo", "inputs": {"text": "one"}}),
               call("ask_question", {"question": "What should the second say?"}),
               call("execute_skill", {"name": "echo", "inputs": {"text": "two"}}),
               {"text": FIRST_ANSWER, "usage": USAGE},
               {"text": "still only echo here", "usage": USAGE})
    before = healthy.run_ids("echo")
    first = f"{llm.marker(k)} echo one, then whatever I say"
    started = send(client, first, [])
    listening = Listening(client, started["stream_url"])
    listening.start()

    asking = polled(client, started, "question")
    (question,) = asking["questions"]
    assert question["asks"] == "What should the second say?"
    assert question["kind"] == "question" and question["free_text"]
    # typed inputs, as resolved: the defaults filled in
    assert [(c["skill"], c["inputs"]) for c in asking["calls"]] == [
        ("echo", {"text": "one", "delay_s": 0})]
    assert asking["state"] != "succeeded" and not asking["ended"]
    answer_url = started["answer_url"]
    # Refused with the CLI's messages, and nothing decided: a choice it does not offer,
    # a question that is not this session's.
    bad = client.post(answer_url, {"wait": str(question["id"]), "choice": "2"})
    assert bad.status == 400
    assert bad.json()["error"] == (f"question #{question['id']} offers no choices; "
                                   "answer with text")
    other = client.post(answer_url, {"wait": str(question["id"] + 1000), "text": "two"})
    assert other.status == 400 and "has no open question" in other.json()["error"]
    unsigned = client.post(answer_url, {"wait": str(question["id"]), "text": "two"},
                           token=False)
    assert unsigned.status == 403 and "Form token missing" in unsigned.text
    assert progress(client, started)["questions"] == [question]

    done = client.post(answer_url, {"wait": f"#{question['id']}", "text": "two"})
    assert done.status == 200, done.text
    assert (done.json()["state"], done.json()["value"]) == ("answered", "two")

    ended = polled(client, started, "ended")
    assert (ended["state"], ended["answer"], ended["error"]) == (
        "succeeded", FIRST_ANSWER, None)
    assert ended["questions"] == []
    assert [(c["skill"], c["inputs"]["text"], c["state"]) for c in ended["calls"]] == [
        ("echo", "one", "succeeded"), ("echo", "two", "succeeded")]
    events = listening.ended()
    assert events[-1][0] == "final"
    final = events[-1][1]
    streamed = "".join(e["text"] for name, e in events if name == "piece") + final["rest"]
    assert (final["state"], final["answer"]) == ("succeeded", FIRST_ANSWER)
    assert streamed == FIRST_ANSWER

    # The records: the request a test_window run of skillq-try a person started here,
    # its calls test_window runs of echo, the answer the dashboard user's.
    run = healthy.run(started["run_id"])
    assert (run.skill, run.source, run.triggered_by) == ("skillq-try", "test_window",
                                                         "dashboard")
    calls = [r for r in healthy.runs_of("echo") if r.id not in before]
    assert sorted(r.id for r in calls) == sorted(c["run_id"] for c in ended["calls"])
    assert {(r.source, r.triggered_by, r.state) for r in calls} == {
        ("test_window", "skillq-try", "succeeded")}
    with healthy.db() as session:
        wait = session.get(Wait, question["id"])
        assert wait is not None
        assert (wait.state, wait.answer, wait.decided_by) == ("answered", "two",
                                                              f"dashboard:{USER}")
    assert any('"two"' in r[0] for r in llm.tool_results(k)[1:])  # the model read it

    # The second request carries the first exchange, as the page keeps it.
    again = send(client, "what else can it do?", [{"request": first,
                                                    "answer": final["answer"]}])
    later = polled(client, again, "ended")
    assert (later["state"], later["answer"], later["calls"]) == (
        "succeeded", "still only echo here", [])
    last = json.dumps(llm.bodies(k)[-1]["messages"])
    assert FIRST_ANSWER in last and "what else can it do?" in last
    assert llm.remaining().get(k, 0) == 0


def test_refusals_say_why_in_the_cli_words_and_start_nothing(
        healthy: Stack, served: Served, client: Client, vault: Path) -> None:
    with healthy.db() as session:
        tries = set(session.scalars(select(PipelineRun.id).where(
            PipelineRun.skill == "skillq-try")))
    empty = client.post("/skills/echo/try", {"request": "  ", "earlier": "[]"})
    assert empty.status == 400
    assert empty.json()["error"] == ('skillq try: REQUEST: say what to try, e.g. skillq try '
                                     'echo "run it on these 3 items"')
    garbled = client.post("/skills/echo/try", {"request": "hi", "earlier": "[{\"request\""})
    assert garbled.status == 400 and "earlier: not JSON" in garbled.json()["error"]
    shapeless = client.post("/skills/echo/try", {"request": "hi",
                                                 "earlier": '[{"request": "a"}]'})
    assert shapeless.status == 400
    assert "earlier: item 0 is no" in shapeless.json()["error"]
    missing = client.post("/skills/no-such/try", {"request": "hi"})
    assert missing.status == 404 and "no skill named 'no-such'" in missing.json()["error"]
    unsigned = client.post("/skills/echo/try", {"request": "hi"}, token=False)
    assert unsigned.status == 403 and "Form token missing" in unsigned.text

    # A run that is no request of this skill's session is not shown nor answered here.
    ran = healthy.cli("run", "echo", "--vault", str(vault), "--input", "text=x",
                      "--json", cwd=vault.parent)
    assert ran.returncode == 0, ran.stderr
    echo_run = json.loads(ran.stdout)["run_id"]
    for path in (f"/skills/echo/try/{echo_run}", f"/skills/echo/try/{echo_run}/stream"):
        reply = client.get(path)
        assert reply.status == 404, (path, reply.status)
        assert "is no request of a try session of echo" in reply.json()["error"]
    answered = client.post(f"/skills/echo/try/{echo_run}/answer", {"wait": "1",
                                                                   "text": "x"})
    assert answered.status == 404

    healthy.consumer(AGENT_WORKER, "agent", on=False)
    try:
        refused = healthy.cli("try", "echo", "hello", "--vault", str(vault),
                              cwd=vault.parent)
        alone = client.post("/skills/echo/try", {"request": "hello", "earlier": "[]"})
    finally:
        healthy.consumer(AGENT_WORKER, "agent", on=True)
    assert refused.returncode != 0
    assert alone.status == 503
    message = alone.json()["error"]
    assert "no online worker can run what this run needs" in message
    assert " ".join(message.split()) in " ".join(refused.stderr.split())
    with healthy.db() as session:
        assert set(session.scalars(select(PipelineRun.id).where(
            PipelineRun.skill == "skillq-try"))) == tries


def test_the_panel_in_the_browser(healthy: Stack, served: Served, llm: FakeLLM,
                                  browser: Browser) -> None:
    """The page's own script: Send, the call listed, the question's choice clicked, the
    answer streamed into the conversation, which the next request sends back."""
    k = key()
    llm.script(k, call("execute_skill", {"name": "echo", "inputs": {"text": "tea"}}),
               call("ask_question", {"question": "Which tone?", "choices": ["dry", "warm"]}),
               {"text": "echo said tea; you chose dry", "usage": USAGE},
               {"text": "nothing more to try", "usage": USAGE})
    context = browser.new_context(viewport={"width": 1280, "height": 900},
                                  http_credentials={"username": USER, "password": PASSWORD})
    try:
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.goto(served.url + "/skills/echo")
        expect(page.locator("#try h2")).to_have_text("Try it")
        page.click("#try-send")  # nothing typed: the CLI's refusal, on the page
        expect(page.locator("#try-error")).to_contain_text("skillq try: REQUEST: say what")
        page.fill("#try-request", f"{llm.marker(k)} echo tea")
        page.click("#try-send")
        exchange = page.locator("#try-conversation .exchange").first
        expect(exchange.locator(".said")).to_have_text(f"{llm.marker(k)} echo tea")
        expect(page.locator("#try-error")).to_be_hidden()
        question = exchange.locator(".question")
        expect(question.locator(".asks")).to_have_text("Which tone?", timeout=90_000)
        call_row = exchange.locator("li.call")
        expect(call_row.locator(".inputs")).to_have_text('{"text":"tea","delay_s":0}')
        expect(call_row.locator(".state")).to_have_text("succeeded")
        shot(page, "try-asking")
        question.get_by_role("button", name="dry").click()
        expect(question).to_contain_text("Which tone? → answered: dry")
        expect(exchange.locator(".answer")).to_have_text("echo said tea; you chose dry",
                                                         timeout=90_000)
        expect(exchange).to_have_attribute("data-done", "1")
        expect(exchange.locator(".state").first).to_have_text("succeeded")
        shot(page, "try-answered")
        page.fill("#try-request", "anything else?")
        page.click("#try-send")
        second = page.locator("#try-conversation .exchange").nth(1)
        expect(second.locator(".answer")).to_have_text("nothing more to try", timeout=90_000)
        expect(second).to_have_attribute("data-done", "1")
    finally:
        context.close()
    last = json.dumps(llm.bodies(k)[-1]["messages"])
    assert "echo said tea; you chose dry" in last and "anything else?" in last
    with healthy.db() as session:
        wait = session.scalars(select(Wait).where(Wait.prompt == "Which tone?")
                               .order_by(Wait.id.desc())).first()
        assert wait is not None
        assert (wait.answer, wait.decided_by) == ("dry", f"dashboard:{USER}")
