"""Waits for a person in the dashboard: the run page's questions and approvals, the
nav's Inbox badge and the /inbox page, and the decisions posted back, against a real
`skillq dashboard` process over HTTP (and real Chromium for the approval form), the real
stack and workers, and the scripted model server for the agent step that asks (as in
test_waits.py, whose fixtures and helpers this module binds).

Each run is started from the dashboard's run form, so a person started it (triggered_by
"dashboard") and it may ask. The dashboard asks for credentials, on loopback too, so a
decision records its user: "dashboard:ada". A script's requests carry the cookie and the
form token a page handed out, as test_dashboard_guard.py's do.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import test_waits
from conftest import VAULTS, Stack, copy_vault, wait_until
from playwright.sync_api import Browser, Page, expect
from sqlalchemy import func, select
from support.dashboard_http import Client
from support.fake_llm import FakeLLM
from test_dashboard import Served, served_signed_in, shot
from test_waits import USAGE, call, key, the_wait

from shared.db.wait_models import Wait

pytestmark = pytest.mark.integration
# test_waits.py's fixture, bound to its name here so that pytest finds it: the agent
# worker pointed at this module's fake model server, which `healthy` starts it with.
worker_env = test_waits.worker_env

USER, PASSWORD = "ada", "w4its-pass"
BY = f"dashboard:{USER}"
JSON_REPLY = {"Accept": "application/json"}


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_vault(VAULTS / "waits", tmp_path_factory.mktemp("dash-waits") / "vault")


@pytest.fixture(scope="module")
def served(stack: Stack, vault: Path) -> Iterator[Served]:
    with served_signed_in(stack, vault, USER, PASSWORD) as dashboard:
        yield dashboard


@pytest.fixture
def client(served: Served) -> Client:
    return Client(served.url, USER, PASSWORD)


@contextlib.contextmanager
def signed_in(browser: Browser) -> Iterator[Page]:
    """A page of a fresh browser context that sends the dashboard's credentials."""
    context = browser.new_context(viewport={"width": 1280, "height": 900},
                                  http_credentials={"username": USER, "password": PASSWORD})
    try:
        page = context.new_page()
        page.set_default_timeout(15_000)
        yield page
    finally:
        context.close()


def start(client: Client, skill: str, **inputs: str) -> str:
    """A run started from the skill's run form, as a person does: its id."""
    assert client.get(f"/skills/{skill}/run").status == 200  # the cookie and its token
    reply = client.post(f"/skills/{skill}/run", inputs)
    assert reply.status == 303, (reply.status, reply.text[:2000])
    location = reply.headers["location"]
    assert location.startswith("/runs/run-"), location
    return location.rsplit("/", 1)[1]


def inbox(client: Client) -> list[dict[str, Any]]:
    reply = client.get("/inbox", JSON_REPLY)
    assert reply.status == 200, reply.text
    assert reply.headers["content-type"].startswith("application/json")
    return list(reply.json())


def asked_in(client: Client, run_id: str, timeout_s: float = 60.0) -> dict[str, Any]:
    """The one open wait of ``run_id``, once the inbox lists it."""
    found: list[dict[str, Any]] = []

    def listed() -> bool:
        found[:] = [w for w in inbox(client) if w["top_run_id"] == run_id]
        return bool(found)

    wait_until(listed, timeout_s, f"run {run_id}'s wait in the dashboard's inbox")
    assert len(found) == 1, found
    return found[0]


def recorded_waiting(stack: Stack, run_id: str, step: str) -> None:
    """The wait is committed before its step is recorded waiting: a page read between
    the two shows the step still running."""
    wait_until(lambda: [r.state for r in stack.steps(run_id, step)][-1:] == ["waiting"],
               30, f"step {step} of {run_id} to be recorded waiting")


def open_count(stack: Stack) -> int:
    with stack.db() as session:
        return int(session.scalar(select(func.count()).select_from(Wait).where(
            Wait.state == "open")) or 0)


def error_of(page: str) -> str:
    """The text of a page's error message (base.html's #error), whitespace folded."""
    found = re.search(r'<div class="flash error" id="error">(.*?)</div>', page, re.S)
    assert found, page[:3000]
    return " ".join(found[1].replace("&#39;", "'").replace("&#34;", '"').split())


# -- questions ---------------------------------------------------------------------------

def test_a_question_is_shown_listed_and_answered_over_http(
        healthy: Stack, served: Served, client: Client, llm: FakeLLM,
        browser: Browser) -> None:
    k = key()
    llm.script(k, call("ask_question", {"question": "Which tone?", "choices": ["dry", "warm"],
                                        "free_text": True, "default": "dry"}),
               {"output": {"line": "a warm, brief line"}, "usage": USAGE})
    run_id = start(client, "ask-tone", topic=f"{llm.marker(k)} tea")
    asked = asked_in(client, run_id)
    assert (asked["kind"], asked["asks"], asked["choices"], asked["default"], asked["step"]) \
        == ("question", "Which tone?", ["dry", "warm"], "dry", "ask-tone")
    assert asked["run_id"] == run_id and "dashboard" in asked["who"]
    recorded_waiting(healthy, run_id, "ask-tone")

    page = client.get(f"/runs/{run_id}").text
    box = page[page.index(f'id="wait-{asked["id"]}"'):]
    box = box[:box.index('<div class="muted">who can answer')]
    assert "Which tone?" in box and 'data-state="open"' in page
    assert re.search(r'<button name="choice" value="1" class="choice default">dry</button>',
                     box), box
    assert '<button name="choice" value="2" class="choice">warm</button>' in box
    assert 'name="text"' in box and "taken if nobody answers by the deadline: dry" in box
    assert 'id="paused"' in page and 'id="live"' not in page  # no reload under a form
    assert "state-waiting asking" in page and "waiting for an answer" in page
    badge = re.search(r'<span class="badge waits" id="inbox-count"[^>]*>(\d+)</span>', page)
    assert badge and int(badge[1]) >= 1, page[:3000]

    listed = client.get("/inbox").text
    row = re.search(rf'<tr class="inbox-row" data-wait="{asked["id"]}".*?</tr>', listed, re.S)
    assert row, listed[:3000]
    assert f'href="/runs/{run_id}#wait-{asked["id"]}"' in row[0]
    assert "Which tone?" in row[0] and "1. dry | 2. warm" in row[0]
    with signed_in(browser) as seen:
        seen.goto(f"{served.url}/runs/{run_id}")
        expect(seen.locator(f"#wait-{asked['id']} button.choice")).to_have_text(["dry", "warm"])
        shot(seen, "run-question-open")
        seen.goto(f"{served.url}/inbox")
        shot(seen, "inbox")

    done = client.post(f"/runs/{run_id}/answer", {"wait": str(asked["id"]),
                                                  "text": "warm, but brief"})
    assert done.status == 303, done.text[:2000]
    assert done.headers["location"] == f"/runs/{run_id}#wait-{asked['id']}"
    run = healthy.wait_run(run_id)
    assert run.state == "succeeded", run.error
    assert run.outputs == {"line": "a warm, brief line"}
    # the model read the answer as the tool's result
    results = [r[0] for r in llm.tool_results(k)[1:]]
    assert any("warm, but brief" in r for r in results), results
    wait = the_wait(healthy, asked["id"])
    assert (wait.state, wait.answer, wait.decided_by) == ("answered", "warm, but brief", BY)

    page = client.get(f"/runs/{run_id}").text
    assert 'data-state="answered"' in page and "answered: warm, but brief" in page
    assert f"by {BY}" in page
    assert all(w["top_run_id"] != run_id for w in inbox(client))


def test_a_bad_choice_is_refused_and_the_question_stays_open(
        healthy: Stack, served: Served, client: Client, llm: FakeLLM) -> None:
    k = key()
    llm.script(k, call("ask_question", {"question": "Which tone?", "choices": ["dry", "warm"]}),
               {"output": {"line": "a dry line"}, "usage": USAGE})
    run_id = start(client, "ask-tone", topic=f"{llm.marker(k)} tea")
    asked = asked_in(client, run_id)
    assert asked["free_text"] is False

    refused = client.post(f"/runs/{run_id}/answer", {"wait": str(asked["id"]), "choice": "3"})
    assert refused.status == 400, refused.text[:2000]
    assert "Traceback" not in refused.text
    assert error_of(refused.text) == (
        f"question #{asked['id']} has 2 choice(s); --choice takes 1 to 2")
    assert f'id="wait-{asked["id"]}"' in refused.text  # the page, to try again
    # a script's refusal: JSON, with the same message
    off = client.post(f"/runs/{run_id}/answer", {"text": "spicy"}, JSON_REPLY)
    assert off.status == 400 and "takes one of its choices" in off.json()["error"], off.text
    assert the_wait(healthy, asked["id"]).state == "open"
    assert [w["id"] for w in inbox(client) if w["top_run_id"] == run_id] == [asked["id"]]

    done = client.post(f"/runs/{run_id}/answer", {"wait": f"#{asked['id']}", "choice": "1"},
                       JSON_REPLY)
    assert done.status == 200, done.text
    assert done.json() == {"wait_id": asked["id"], "kind": "question", "run_id": run_id,
                           "step_id": "ask-tone", "state": "answered", "value": "dry"}
    assert healthy.wait_run(run_id).state == "succeeded"
    again = client.post(f"/runs/{run_id}/answer", {"choice": "2"}, JSON_REPLY)
    assert again.status == 400 and "has no open question" in again.json()["error"]


# -- approvals ---------------------------------------------------------------------------

def test_an_approval_edited_in_the_browser_is_what_the_next_step_reads(
        healthy: Stack, served: Served, client: Client, browser: Browser) -> None:
    run_id = start(client, "review-post", topic="cats")
    asked = asked_in(client, run_id)
    assert asked["kind"] == "approval" and asked["step"] == "review"

    # a bad input is refused naming it; what was typed comes back in the form
    refused = client.post(f"/runs/{run_id}/approve", {
        "wait": str(asked["id"]), "input.final_text": "Keep what I typed",
        "input.colour": "red"})
    assert refused.status == 400, refused.text[:2000]
    assert "colour" in error_of(refused.text)
    assert ">Keep what I typed</" in refused.text or 'value="Keep what I typed"' in \
        refused.text
    assert the_wait(healthy, asked["id"]).state == "open"
    recorded_waiting(healthy, run_id, "review")

    with signed_in(browser) as page:
        page.goto(served.url + "/inbox")
        expect(page.locator("#inbox-count")).to_have_text(str(open_count(healthy)))
        row = page.locator(f"tr.inbox-row[data-wait='{asked['id']}']")
        expect(row).to_contain_text("Publish the draft about cats?")
        row.locator("a.answer-link").click()
        page.wait_for_url(f"**/runs/{run_id}#wait-{asked['id']}")
        box = page.locator(f"#wait-{asked['id']}")
        expect(box).to_contain_text("Publish the draft about cats?")
        expect(box.locator("table.shown")).to_contain_text("Draft about cats")
        expect(page.locator("#graph svg g.node.asking[data-key=review]")).to_contain_text(
            "waiting for approval")
        expect(page.locator("tr.step-row[data-step=review]")).to_contain_text("waiting")
        final = box.locator(f"#approve-{asked['id']}-final_text")
        expect(final).to_have_value("Draft about cats")  # prefilled with its default
        expect(box.locator(f"#approve-{asked['id']}-channel")).to_have_value("blog")
        shot(page, "run-approval-open")
        final.fill("Cats, edited in the dashboard")
        with page.expect_navigation():  # the post, then its redirect to this page
            box.locator("button.approve-button").click()
        run = healthy.wait_run(run_id)
        assert run.state == "succeeded", run.error
        assert run.outputs == {"posted": "Cats, edited in the dashboard", "channel": "blog"}
        page.reload()
        expect(page.locator("#run-state")).to_have_text("succeeded")
        decided = page.locator(f"#wait-{asked['id']}")
        expect(decided).to_have_attribute("data-state", "approved")
        expect(decided.locator(".decision")).to_contain_text("Cats, edited in the dashboard")
        expect(decided.locator(".decision")).to_contain_text(f"by {BY}")
        shot(page, "run-approval-decided")
    wait = the_wait(healthy, asked["id"])
    assert wait.state == "approved" and wait.decided_by == BY and wait.decided_at
    assert wait.decided_by.startswith("dashboard")


def test_a_rejection_over_http_ends_the_run_rejected(
        healthy: Stack, served: Served, client: Client) -> None:
    run_id = start(client, "review-post", topic="dogs")
    asked = asked_in(client, run_id)
    # a JSON body is not what the forms send: refused, saying what to send
    wrong = client.request("POST", f"/runs/{run_id}/reject",
                           json.dumps({"reason": "off brand"}).encode(),
                           {"Content-Type": "application/json", "x-skillq-csrf": client.token,
                            **JSON_REPLY})
    assert wrong.status == 415 and "form-encoded" in wrong.json()["error"], wrong.text
    no_reason = client.post(f"/runs/{run_id}/reject", {"reason": " "}, JSON_REPLY)
    assert no_reason.status == 400 and "say why" in no_reason.json()["error"]
    assert the_wait(healthy, asked["id"]).state == "open"

    done = client.post(f"/runs/{run_id}/reject", {"wait": "review", "reason": "off brand"},
                       JSON_REPLY)
    assert done.status == 200, done.text
    assert done.json() == {"wait_id": asked["id"], "kind": "approval", "run_id": run_id,
                           "step_id": "review", "state": "rejected", "value": "off brand"}
    run = healthy.wait_run(run_id)
    assert (run.state, run.failed_step) == ("rejected", "review")
    assert healthy.steps(run_id, "publish") == []
    wait = the_wait(healthy, asked["id"])
    assert (wait.state, wait.reason, wait.decided_by) == ("rejected", "off brand", BY)

    page = client.get(f"/runs/{run_id}").text
    assert '<span class="state-rejected" id="run-state">rejected</span>' in page
    assert "<h2>Rejected</h2>" in page and "off brand" in page
    assert re.search(r'<g class="node state-rejected" data-key="review">', page), page
    assert re.search(r'<g class="node state-not-run" data-key="publish">', page)
    assert "rejected: off brand" in page and f"by {BY}" in page
    again = client.post(f"/runs/{run_id}/approve", {}, JSON_REPLY)
    assert again.status == 400 and "no open approval" in again.json()["error"]
    missing = client.post("/runs/run-nope/reject", {"reason": "x"}, JSON_REPLY)
    assert missing.status == 404 and "no run run-nope" in missing.json()["error"]
