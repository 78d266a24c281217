"""A builder's look at a page or the screen (docs/skill-builder.md, "The builders and the
gate"): a dom0 skill's builder gets ``browse``, a cmd0 skill's ``look_at_screen``, each
call under the machine's dom0 or cmd0 lock, held for the call only; a code skill's
builder gets neither and never waits for those locks.

The test holds the lock from its own process: the stack's workers share its SKILLQ_HOME,
so its locks/ are theirs. The agent worker (agent-gpu-cmd0) runs the browser itself, the
system's Chromium through Playwright; the page is served here on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import test_build
from conftest import Stack, wait_until
from support.fake_llm import FakeLLM
from support.pages import HtmlPages, serving
from test_build import answer, approved_build, call, script, show, small_plan

from shared.store import get_bytes
from workers.dom0.chromium import INSTALL_HINT, system_chromium
from workers.screen.lock import machine_lock

pytestmark = pytest.mark.integration
# test_build.py's fixtures, bound to their names here so that pytest finds them: the
# agent worker pointed at this module's fake model server, and an empty vault.
worker_env = test_build.worker_env
vault = test_build.vault

HOLD_S = 2.0  # how long the test keeps the lock once the builder asked for it
PAGE = ("<html><head><title>Hello page</title></head><body><h1>Hello</h1>"
        "<p>A page to build a skill from.</p><a id='more' href='/more'>More</a>"
        "<form><input name='who'><button type='submit'>Greet</button></form></body></html>")


class Pages(HtmlPages):
    page = PAGE


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    if system_chromium() is None:
        pytest.fail(f"no Chromium on this machine for the browse tool: {INSTALL_HINT}")
    with serving(Pages) as url:
        yield url


def screen_plan(k: str, approach: str, site: str) -> dict[str, Any]:
    """One sub-skill of ``approach`` (its builder's conversation ``s-K``) that reads a
    page's heading."""
    io = {"inputs": [{"name": "url", "type": "string", "required": True}],
          "outputs": [{"name": "heading", "type": "string"}]}
    skill = {"name": f"heading-{k}", "approach": approach, "work": ["deterministic"],
             "responsibility": f"[[fake:s-{k}]] Read a page's heading.",
             "why": "the page is only there in a browser", **io,
             "tests": [{"id": "reads", "name": "Reads the heading",
                        "inputs": {"url": f"{site}/hello"},
                        "expected": {"success": True, "heading": "Hello"}}]}
    return {"task": "Read a heading", "name": f"headings-{k}",
            "description": "Read a page's heading.", "inputs": io["inputs"],
            "steps": [{"id": "read", "skill": f"heading-{k}", "with": {"url": "${inputs.url}"}}],
            "outputs": [{"name": "heading", "type": "string",
                         "from": "${steps.read.outputs.heading}"}],
            "skills": [skill]}


def heading_skill_md(k: str) -> str:
    return (f"---\nname: heading-{k}\ndescription: \"Read a page's heading. Use it to "
            "build from a browser.\"\nversion: 1\napproach: dom0\ninputs:\n"
            "  - {name: url, type: string, required: true}\n"
            "outputs:\n  - {name: heading, type: string}\n"
            "browser:\n  actions:\n    - goto: ${inputs.url}\n"
            "    - extract: {selector: h1, output: heading}\n---\n\n"
            "Reads the page's h1, as browse showed it.\n")


def tools_offered(llm: FakeLLM, key: str) -> set[str]:
    return {t["name"] for t in llm.bodies(key)[0].get("tools") or []}


def test_a_dom0_builder_browses_once_the_machines_dom0_lock_is_free(
        healthy: Stack, llm: FakeLLM, vault: Path, site: str) -> None:
    k = uuid.uuid4().hex[:6]
    llm.script(f"s-{k}",
               call("browse", url=f"{site}/hello"),
               {**call("write_file", path="SKILL.md", text=heading_skill_md(k)),
                "expect_tool_result": '"title":"Hello page"'},
               call("run_tests"),
               {**answer(diagnosis="reads the h1", deviations=[]),
                "expect_tool_result": '"passed":true'})
    with contextlib.ExitStack() as held:
        screen = held.enter_context(contextlib.ExitStack())
        screen.enter_context(machine_lock(healthy.home, "dom0", timeout_s=10))
        proc, build_id = held.enter_context(
            approved_build(healthy, llm, vault, k, screen_plan(k, "dom0", site)))
        # the builder asked for the page; its call waits while the test holds the lock
        wait_until(lambda: llm.requests(f"s-{k}"), 60, "the builder's first turn")
        time.sleep(HOLD_S)
        assert len(llm.requests(f"s-{k}")) == 1, "browse answered with the lock held"
        screen.close()  # the lock released, the build goes on
        released = time.time()
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, f"{out}\n{err}\n{show(healthy, vault.parent, build_id)}"

    assert {"browse"} <= tools_offered(llm, f"s-{k}")
    assert "look_at_screen" not in tools_offered(llm, f"s-{k}")
    # it answered only once the lock was free, and said how long it waited
    after = llm.requests(f"s-{k}")[1]
    assert after["at"] >= released
    (seen,) = llm.tool_results(f"s-{k}")[1]
    page = json.loads(seen)
    assert page["lock_wait_s"] >= HOLD_S / 2, page
    assert (page["title"], page["url"]) == ("Hello page", f"{site}/hello")
    assert "A page to build a skill from." in page["text"]
    assert {"kind": "link", "selector": "#more", "text": "More",
            "href": f"{site}/more"} in page["elements"]
    assert any(e["kind"] == "input" and e["selector"] == 'input[name="who"]'
               for e in page["elements"]), page["elements"]
    # what it learnt went into a draft whose case passed on the dom0 worker
    assert "extract: {selector: h1" in (vault / f"heading-{k}" / "SKILL.md").read_text()


def test_a_code_builder_gets_no_screen_tools_and_never_waits_for_their_locks(
        healthy: Stack, llm: FakeLLM, vault: Path) -> None:
    k = uuid.uuid4().hex[:6]
    llm.script(f"b-{k}", call("write_file", path="main.py",
                              text=script("{'text': inputs['text'].upper()}")),
               call("run_tests"), answer(diagnosis="shouts", deviations=[]))
    # both screen locks taken for the whole build
    with machine_lock(healthy.home, "dom0", timeout_s=10), \
            machine_lock(healthy.home, "cmd0", timeout_s=10), \
            approved_build(healthy, llm, vault, k, small_plan(k, dependent=False)) as (
                proc, build_id):
        out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, f"{out}\n{err}\n{show(healthy, vault.parent, build_id)}"
    offered = tools_offered(llm, f"b-{k}")
    assert {"write_file", "bash", "run_tests"} <= offered
    assert not offered & {"browse", "look_at_screen"}


def test_a_cmd0_builder_looks_at_the_workers_display(
        healthy: Stack, llm: FakeLLM, vault: Path, site: str, xdisplay: str) -> None:
    title = f"notes-{uuid.uuid4().hex[:6]}"
    window = subprocess.Popen(
        [sys.executable, "-c", "import tkinter; r = tkinter.Tk(); r.title(" + repr(title)
         + "); r.geometry('300x200+10+20'); r.mainloop()"],
        env={**os.environ, "DISPLAY": xdisplay})
    try:
        k = uuid.uuid4().hex[:6]
        llm.script(f"s-{k}", call("look_at_screen"),
                   {**answer(diagnosis="looked only", deviations=[]),
                    "expect_tool_result": '"screenshot":{"$ref":"sha256:'})
        # the window is up before the builder looks: the call below waits for nothing else
        wait_until(lambda: subprocess.run(
            ["xdotool", "search", "--name", title], env={**os.environ, "DISPLAY": xdisplay},
            capture_output=True, check=False).returncode == 0, 20, "the Tk window")
        with approved_build(healthy, llm, vault, k, screen_plan(k, "cmd0", site)) as (
                proc, build_id):
            out, err = proc.communicate(timeout=90)
    finally:
        window.terminate()
        window.wait(timeout=10)
    # no test case ran: the skill is not built, which is beside the point here
    assert proc.returncode == 1, f"{out}\n{err}\n{show(healthy, vault.parent, build_id)}"
    assert "look_at_screen" in tools_offered(llm, f"s-{k}")
    assert "browse" not in tools_offered(llm, f"s-{k}")
    (seen,) = llm.tool_results(f"s-{k}")[1]
    screen = json.loads(seen)
    assert screen["display"] == xdisplay and screen["lock_wait_s"] < 1, screen
    assert (screen["width"], screen["height"]) == (1280, 800)
    named = [w for w in screen["windows"] if w["name"] == title]
    assert named and named[0]["width"] == 300, screen["windows"]
    with healthy.db() as session:
        assert get_bytes(session, screen["screenshot"]["$ref"]).startswith(b"\x89PNG")
