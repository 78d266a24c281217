"""What stops a sub-skill or a build (issue 44, and 45's gate): a draft whose cases never
pass is reported and not drafted into the vault; an agent sub-skill counts as built only
once every run of its eval passes; a budget stops the build before a stage it cannot pay
for. Split from test_build.py, whose fixtures and helpers these share."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import test_build
from conftest import Stack
from support.fake_llm import FakeLLM
from test_build import (
    EVAL_RUNS,
    answer,
    approve,
    approved_build,
    call,
    following,
    runs_called,
    script,
    show,
    small_plan,
    start,
    until_stage,
)

pytestmark = pytest.mark.integration
# test_build.py's fixtures, bound to their names here so that pytest finds them: the
# agent worker pointed at this module's fake model server, and an empty vault.
worker_env = test_build.worker_env
vault = test_build.vault


def test_a_builder_that_never_passes_is_reported_and_not_drafted(
        healthy: Stack, llm: FakeLLM, vault: Path) -> None:
    k = uuid.uuid4().hex[:6]
    llm.script(f"b-{k}",
               # a write outside its draft folder is refused, as a tool result it reads
               call("write_file", path="../escape.py", text="print('out')"),
               {**call("write_file", path="main.py", text=script("{'text': 'hi'}")),
                "expect_tool_result": "leaves the skill's folder"},
               call("run_tests"),
               answer(diagnosis="it still returns the text as given", deviations=[]))
    with approved_build(healthy, llm, vault, k, small_plan(k)) as (proc, build_id):
        out, err = proc.communicate(timeout=240)
    assert proc.returncode == 1, f"{out}\n{err}"

    view = show(healthy, vault.parent, build_id)
    shout = view["skills"][f"shout-{k}"]
    assert shout["state"] == "failed"
    assert "shouts: output 'text' is \"hi\", expected \"HI\"" in shout["why"]
    assert shout["diagnosis"] == "it still returns the text as given"
    assert view["skills"][f"twice-{k}"]["state"] == "skipped"
    assert llm.requests(f"t-{k}") == []  # its dependent was never started
    assert f"failed   shout-{k} (0/1 test cases passed, $" in out
    # nothing of it reached the vault, and nothing was written outside its draft folder
    assert sorted(p.name for p in vault.iterdir()) == []
    assert not (healthy.home / "builds" / build_id / "escape.py").exists()
    assert not (healthy.home / "builds" / "escape.py").exists()


def shout_agent_md(k: str, how: str) -> str:
    return (f"---\nname: shout-{k}\ndescription: Upper-case a text.\nversion: 1\n"
            "approach: agent\ninputs:\n  - {name: text, type: string, required: true}\n"
            f"outputs:\n  - {{name: text, type: string}}\n---\n\n[[fake:say-{k}]] {how}\n")


def test_an_agent_sub_skill_is_built_only_once_every_run_of_its_eval_passes(
        healthy: Stack, llm: FakeLLM, vault: Path) -> None:
    k = uuid.uuid4().hex[:6]
    plan = small_plan(k, dependent=False)
    plan["skills"][0].update(approach="agent", work=["agentic"], why="a model's words")
    llm.script(f"b-{k}",
               call("write_file", path="SKILL.md", text=shout_agent_md(k, "Shout it.")),
               call("run_tests"),
               # one of its eval's runs failed: the case did not pass; it fixes the body
               {**call("write_file", path="SKILL.md",
                       text=shout_agent_md(k, "Answer the text in upper case, always.")),
                "expect_tool_result": f"1 of {EVAL_RUNS} runs passed"},
               call("run_tests"),
               {**answer(diagnosis="upper-cases every time", deviations=[]),
                "expect_tool_result": f"{EVAL_RUNS} of {EVAL_RUNS} runs passed"})
    # the drafted agent skill's runs: its first round passes once and fails once (the
    # two run together, so either may fail), its second passes both
    llm.script(f"say-{k}", answer(text="HI"), answer(text="hi"), answer(text="HI"),
               answer(text="HI"))
    with approved_build(healthy, llm, vault, k, plan) as (proc, build_id):
        out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, f"{out}\n{err}\n{show(healthy, vault.parent, build_id)}"

    cases = runs_called(healthy, None, f"shout-{k}")
    assert [r.source for r in cases] == ["build"] * 2 * EVAL_RUNS
    assert sorted(r.state for r in cases) == ["succeeded"] * 2 * EVAL_RUNS
    # the first round's result named the gate and the failing run's problem
    first = json.dumps(llm.bodies(f"b-{k}")[2])
    assert "an agent skill's case must pass every run of its eval" in first
    assert "output 'text' is" in first and '"passed\\":false' in first
    tested = show(healthy, vault.parent, build_id)["skills"][f"shout-{k}"]
    assert tested["state"] == "built"
    (case,) = tested["tested"]["cases"]
    assert (case["passed"], case["runs"], case["runs_passed"]) == (True, EVAL_RUNS,
                                                                  EVAL_RUNS)
    assert f"built    shout-{k} (1/1 test cases passed, $" in out
    assert "always" in (vault / f"shout-{k}" / "SKILL.md").read_text()


def test_a_budget_stops_the_build_before_a_stage_it_cannot_pay_for(
        healthy: Stack, llm: FakeLLM, vault: Path) -> None:
    k = uuid.uuid4().hex[:6]
    llm.script(f"plan-{k}", call("update_plan", **small_plan(k, dependent=False)),
               answer(summary="planned"))  # each turn: $0.0004 at claude-haiku-4-5
    llm.script(f"b-{k}", answer(diagnosis="never asked", deviations=[]))
    proc, build_id = start(healthy, vault, f"[[fake:plan-{k}]] Shout a text", "--budget-usd",
                           "0.0006")
    with following(proc):
        until_stage(healthy, vault.parent, build_id, "proposed")
        (planner,) = runs_called(healthy, build_id, "skillq-planner")
        # the planner was given what was left (all of it): its turns are capped there
        assert planner.plan["steps"][0]["agent"]["budget_usd"] == pytest.approx(0.0006)
        out, err = approve(healthy, vault, build_id, proc)
    assert proc.returncode == 1, f"{out}\n{err}"
    view = show(healthy, vault.parent, build_id)
    assert view["stage"] == "failed"
    assert "budget of $0.0006 spent ($0.0008)" in view["error"]
    assert not runs_called(healthy, build_id, "skillq-builder")
    assert llm.requests(f"b-{k}") == []
