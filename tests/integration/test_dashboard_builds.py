"""A skill build in the dashboard (the plan panel): the Builds list, a build's page with
its proposed plan, and the plan sent back with feedback, then approved, through the
page's forms, against a real `skillq dashboard` process over HTTP, the real stack and
workers, and the scripted model server (as in test_build.py, whose fixtures and helpers
this module binds).

The dashboard asks for credentials, so a decision records its user: "dashboard:ada". A
script's posts carry the cookie and the form token the page handed out
(tests/support/dashboard_http.py).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import test_build
from conftest import Stack, wait_until
from sqlalchemy import select
from support.dashboard_http import Client
from support.fake_llm import FakeLLM
from test_build import answer, call, script, small_plan, start, until_stage
from test_dashboard import Served, served_signed_in

from shared.db.wait_models import Wait
from shared.notes import StepFailure, leave_note

pytestmark = pytest.mark.integration
# test_build.py's fixtures, bound to their names here so that pytest finds them: the
# agent worker pointed at this module's fake model server, and an empty vault.
worker_env = test_build.worker_env
vault = test_build.vault

USER, PASSWORD = "ada", "bu1lds-pass"
BY = f"dashboard:{USER}"
JSON_REPLY = {"Accept": "application/json"}


@pytest.fixture
def served(healthy: Stack, vault: Path) -> Iterator[Served]:
    with served_signed_in(healthy, vault, USER, PASSWORD) as dashboard:
        yield dashboard


@pytest.fixture
def client(served: Served) -> Client:
    return Client(served.url, USER, PASSWORD)


def page_of(client: Client, build_id: str) -> str:
    reply = client.get(f"/builds/{build_id}")
    assert reply.status == 200, reply.text[:3000]
    return reply.text


def shown(client: Client, build_id: str) -> dict[str, Any]:
    reply = client.get(f"/builds/{build_id}", JSON_REPLY)
    assert reply.status == 200, reply.text
    assert reply.headers["content-type"].startswith("application/json")
    return dict(reply.json())


def skill_row(page: str, name: str) -> str:
    found = re.search(rf'<tr class="skill-build" data-skill="{name}".*?</tr>', page, re.S)
    assert found, page[:5000]
    return found[0]


def listed_row(client: Client, build_id: str) -> str:
    page = client.get("/builds").text
    found = re.search(rf'<tr class="build-row" data-build="{build_id}".*?</tr>', page, re.S)
    assert found, page[:3000]
    return found[0]


def decisions(stack: Stack, build_id: str) -> list[tuple[str, str | None]]:
    """The build run's approval waits, oldest first: their state and who decided."""
    with stack.db() as session:
        rows = session.scalars(select(Wait).where(Wait.run_id == build_id)
                               .order_by(Wait.id)).all()
        return [(w.state, w.decided_by) for w in rows]


def test_a_plan_is_revised_then_approved_from_its_build_page(
        healthy: Stack, llm: FakeLLM, vault: Path, client: Client) -> None:
    k = uuid.uuid4().hex[:6]
    feedback = "say it loudly, in the description too"
    plan = small_plan(k, dependent=False)
    louder = {**plan, "description": "Shout a text, loudly."}
    llm.script(f"plan-{k}", call("update_plan", **plan), answer(summary="planned"),
               call("update_plan", **louder), answer(summary="louder now"))
    llm.script(f"b-{k}",
               call("write_file", path="main.py",
                    text=script("{'text': inputs['text'].upper()}")),
               call("run_tests"),
               {**answer(diagnosis="upper-cases its text", deviations=[]),
                "expect_tool_result": '"passed":true'})
    proc, build_id = start(healthy, vault, f"[[fake:plan-{k}]] Shout a text")
    try:
        until_stage(healthy, vault.parent, build_id, "proposed")

        # the proposed plan, with its forms; nothing built, and no reload under the forms
        page = page_of(client, build_id)
        assert '<span class="state-proposed" id="build-stage">proposed</span>' in page
        plan_text = page[page.index('<pre id="plan">'):]
        assert f"shouting-{k}: build plan" in plan_text and f"shout-{k}" in plan_text
        assert 'id="nothing-built"' in page and 'class="skill-build"' not in page
        for form in ("approve", "revise", "reject"):
            assert f'action="/builds/{build_id}/{form}"' in page, form
        assert 'id="paused"' in page and 'id="live"' not in page
        assert 'href="/builds" id="nav-builds"' in page
        data = shown(client, build_id)
        assert (data["stage"], data["round"], data["skills"]) == ("proposed", 1, {})
        assert [s["name"] for s in data["plan"]["skills"]] == [f"shout-{k}"]
        assert llm.requests(f"b-{k}") == []

        # listed, newest first
        row = listed_row(client, build_id)
        assert f'href="/builds/{build_id}"' in row and "proposed" in row
        assert "Shout a text" in row
        rows = client.get("/builds", JSON_REPLY).json()
        assert rows[0]["id"] == build_id and rows[0]["stage"] == "proposed"

        # feedback is required; a refusal decides nothing
        empty = client.post(f"/builds/{build_id}/revise", {"feedback": "  "})
        assert empty.status == 400, empty.text[:2000]
        assert "say what to change in the plan" in empty.text
        assert 'action="/builds/' in empty.text  # the page again, to try again
        assert decisions(healthy, build_id) == [("open", None)]

        # sent back: the planner reads the feedback and proposes round 2
        revised = client.post(f"/builds/{build_id}/revise", {"feedback": feedback})
        assert revised.status == 303, revised.text[:2000]
        assert revised.headers["location"] == f"/builds/{build_id}"
        until_stage(healthy, vault.parent, build_id, "proposed", round_=2)
        assert feedback in json.dumps(llm.bodies(f"plan-{k}")[2])
        page = page_of(client, build_id)
        assert '<td id="build-round">2</td>' in page
        assert f"<li>{feedback}</li>" in page and "Shout a text, loudly." in page
        assert decisions(healthy, build_id)[0] == ("answered", BY)

        # approved: its sub-skill is built and tested
        approved = client.post(f"/builds/{build_id}/approve", {})
        assert approved.status == 303, approved.text[:2000]
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, f"{out}\n{err}"
    assert decisions(healthy, build_id)[-1] == ("approved", BY)

    data = shown(client, build_id)
    assert data["stage"] == "built" and data["ended"] is True, data
    assert data["progress"] == {"planned": 1, "built": 1, "failed": 0, "skipped": 0,
                                "to_go": 0}
    page = page_of(client, build_id)
    assert 'id="live"' not in page and 'action="/builds/' not in page
    shout = skill_row(page, f"shout-{k}")
    assert 'data-state="built"' in shout and '<td class="tests">1/1</td>' in shout
    assert '<td class="cost">$0.0012</td>' in shout  # its 3 turns, none in its test case
    assert '<td id="build-cost">$0.0028 <span class="muted">(planning $0.0016)' in page
    assert "upper-cases its text" in shout
    builder = data["skills"][f"shout-{k}"]["run_id"]
    assert f'<a class="builder-run" href="/runs/{builder}">' in shout
    assert 'data-state="built"' in skill_row(page, f"shouting-{k}")  # the orchestrator
    assert "built" in listed_row(client, build_id)

    # decided already: refused, as JSON for a script
    again = client.post(f"/builds/{build_id}/approve", {}, JSON_REPLY)
    assert again.status == 400 and "not proposed" in again.json()["error"], again.text
    missing = client.get("/builds/run-nope")
    assert missing.status == 404 and "no build run-nope" in missing.text


def test_a_note_opens_in_the_skill_builder_with_the_note_preloaded(
        healthy: Stack, llm: FakeLLM, vault: Path, client: Client) -> None:
    k = uuid.uuid4().hex[:6]
    name = f"shout-{k}"
    (vault / name).mkdir()
    (vault / name / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: Upper-case a text.\nversion: 1\n"
        "inputs:\n  - {name: text, type: string, required: true}\n"
        "outputs:\n  - {name: text, type: string}\n"
        "run: {command: python3 main.py, timeout: 30, retries: 0}\n---\n\nShout it.\n")
    (vault / name / "main.py").write_text(script("{'text': inputs['text']}"))
    with healthy.db() as session:
        note_id = leave_note(session, StepFailure(
            skill=name, version=1, step_id=name, pipeline=name, run_id="run-noted",
            step_run_id=f"run-noted/{name}/-1/1", error=f"[[fake:plan-{k}]] not shouted",
            error_kind="failed", exit_code=0, inputs={"text": "hi"}), secrets={})
    assert note_id is not None
    llm.script(f"plan-{k}", answer(summary="asked for nothing yet"))

    page = client.get("/notes").text
    assert f'action="/notes/{note_id}"' in page and "open in skill builder" in page
    opened = client.post(f"/notes/{note_id}", {"action": "build"})
    assert opened.status == 303, opened.text[:2000]
    build_id = opened.headers["location"].removeprefix("/builds/")
    data = shown(client, build_id)
    assert (data["note_id"], data["improves"]) == (note_id, name)
    wait_until(lambda: llm.requests(f"plan-{k}"), 60, "the planner's first request")
    first = json.dumps(llm.bodies(f"plan-{k}")[0])
    assert f"Improvement note #{note_id} on skill '{name}'" in first
    # the note links to its build
    assert f'<a class="note-build-link" href="/builds/{build_id}">' in client.get("/notes").text
    healthy.cli("cancel", build_id, cwd=vault.parent)
