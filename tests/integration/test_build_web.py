"""A build's planner reads a web page when the deployment allows it
(SKILLQ_BUILD_WEB_ACCESS on its daemon): its fetch_page tool, against a page served here.
Off by default: test_build.py checks the planner is not offered it there."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import test_build
from conftest import Stack
from support.fake_llm import FakeLLM
from support.pages import HtmlPages, serving
from test_build import AGENT_WORKER, answer, call, small_plan, start, until_stage

pytestmark = pytest.mark.integration
vault = test_build.vault
PAGE = "<html><head><script>var hidden = 1;</script></head><body><h1>Shout API</h1>" \
    "<p>POST /v1/shout upper-cases a text.</p></body></html>"


@pytest.fixture
def worker_env(llm: FakeLLM) -> dict[str, dict[str, str | None]]:
    return {AGENT_WORKER: {**llm.env(), "SKILLQ_AGENT_MODEL": "anthropic:claude-haiku-4-5",
                           "SKILLQ_BUILD_WEB_ACCESS": "true"}}


@pytest.fixture
def page_url() -> Iterator[str]:
    class Docs(HtmlPages):
        page = PAGE

    with serving(Docs) as url:
        yield f"{url}/docs"


def test_the_planner_reads_a_page_when_the_deployment_allows_it(
        healthy: Stack, llm: FakeLLM, vault: Path, page_url: str) -> None:
    k = uuid.uuid4().hex[:6]
    llm.script(f"plan-{k}",
               call("fetch_page", url=page_url),
               {**call("fetch_page", url="file:///etc/passwd"),
                "expect_tool_result": "POST /v1/shout upper-cases a text."},
               {**call("update_plan", **small_plan(k, dependent=False)),
                "expect_tool_result": "is not an http or https URL"},
               answer(summary="an API exists"))
    proc, build_id = start(healthy, vault, f"[[fake:plan-{k}]] Shout a text")
    try:
        until_stage(healthy, vault.parent, build_id, "proposed")
        first = llm.bodies(f"plan-{k}")[0]
        assert "fetch_page" in {t["name"] for t in first["tools"]}
        # the page's text, its script left out
        read = json.dumps(llm.bodies(f"plan-{k}")[1])
        assert "Shout API" in read and "HTTP 200 text/html" in read
        assert "var hidden" not in read
    finally:
        healthy.cli("cancel", build_id, cwd=vault.parent)
        proc.communicate(timeout=60)
