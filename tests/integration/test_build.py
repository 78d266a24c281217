"""The skill builder (docs/skill-builder.md): `skillq build` plans with the planner agent,
waits for a person's approval, builds each new sub-skill with a builder agent that runs
its test cases through the queues, and compiles the orchestrator from the plan; against
the scripted model server (tests/support/fake_llm), on the stack's real workers.

The scripted plan is the issue's: two code skills independent of each other, and an
agent skill that depends on them. Each agent's conversation is chosen by a marker in the
text it reads first: the planner's in the task, each builder's in its skill's
responsibility, the built agent skill's in the body its builder wrote.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Stack, skillq_argv, wait_until
from sqlalchemy import select
from support.fake_llm import FakeLLM
from support.netns import namespaced_daemon
from test_waits import read_until

from shared.db.models import PipelineRun
from shared.db.session import transaction
from shared.db.wait_models import Wait
from shared.notes import StepFailure, leave_note

pytestmark = pytest.mark.integration
AGENT_WORKER = "agent-gpu-cmd0"
EVAL_RUNS = 2  # an agent sub-skill's runs of each case (its eval), kept small here
USAGE = {"input": 200, "output": 40}

READ_INPUTS = ("import json, os\n"
               "inputs = json.load(open(os.environ['SKILL_INPUTS'], encoding='utf-8'))\n")


def script(outputs: str) -> str:
    return READ_INPUTS + ("with open(os.environ['SKILL_OUTPUT'], 'w', encoding='utf-8') "
                          f"as fh:\n    json.dump({outputs}, fh)\n")


@pytest.fixture
def worker_env(llm: FakeLLM) -> dict[str, dict[str, str | None]]:
    return {AGENT_WORKER: {**llm.env(), "SKILLQ_AGENT_MODEL": "anthropic:claude-haiku-4-5",
                           "SKILLQ_BUILD_EVAL_RUNS": str(EVAL_RUNS)}}


@pytest.fixture
def vault(healthy: Stack, tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    return root


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}], "usage": USAGE}


def answer(**outputs: object) -> dict[str, object]:
    return {"output": outputs, "usage": USAGE}


def the_plan(k: str, *, tone: str = "plain") -> dict[str, Any]:
    return {
        "task": "Each Monday, a short post on last week's commits and open issues of a repo",
        "name": f"weekly-repo-post-{k}",
        "description": "Write a short post on a repo's week: its commits and open issues.",
        "inputs": [{"name": "repo", "type": "string", "required": True}],
        "outputs": [{"name": "post", "type": "string", "description": "The post.",
                     "from": "${steps.post.outputs.post}"}],
        "skills": [
            {"name": f"repo-commits-{k}", "approach": "code", "work": ["deterministic"],
             "responsibility": f"[[fake:bc-{k}]] List a repo's commits of the last week.",
             "why": "git log answers it",
             "inputs": [{"name": "repo", "type": "string", "required": True}],
             "outputs": [{"name": "commits", "type": "string[]"}],
             "tests": [{"id": "lists", "name": "Lists commits", "inputs": {"repo": "a/b"},
                        "expected": {"success": True, "output_contains": ["a/b: fix"]}}]},
            {"name": f"repo-issues-{k}", "approach": "code", "work": ["deterministic"],
             "responsibility": f"[[fake:bi-{k}]] List a repo's open issues.",
             "inputs": [{"name": "repo", "type": "string", "required": True}],
             "outputs": [{"name": "issues", "type": "string[]"}],
             "tests": [{"id": "lists", "name": "Lists issues", "inputs": {"repo": "a/b"}}]},
            {"name": f"weekly-post-{k}", "approach": "agent", "work": ["agentic"],
             "responsibility": f"[[fake:bp-{k}]] Write the week's post from its facts.",
             "why": "writing needs a model",
             "inputs": [{"name": "commits", "type": "string[]", "required": True},
                        {"name": "issues", "type": "string[]", "required": True},
                        {"name": "tone", "type": "string", "default": tone}],
             "outputs": [{"name": "post", "type": "string"}],
             "depends_on": [f"repo-commits-{k}", f"repo-issues-{k}"],
             "tests": [{"id": "writes", "name": "Writes a post",
                        "inputs": {"commits": ["x"], "issues": ["y"]},
                        "expected": {"success": True, "output_contains": ["week"]}}]},
        ],
        "steps": [
            {"id": "commits", "skill": f"repo-commits-{k}", "with": {"repo": "${inputs.repo}"}},
            {"id": "issues", "skill": f"repo-issues-{k}", "with": {"repo": "${inputs.repo}"},
             "on_failure": "continue"},
            {"id": "post", "skill": f"weekly-post-{k}",
             "with": {"commits": "${steps.commits.outputs.commits}",
                      "issues": "${steps.issues.outputs.issues}"}},
        ],
    }


def post_skill_md(k: str) -> str:
    return (f"---\nname: weekly-post-{k}\ndescription: Write the week's post from its facts.\n"
            "version: 1\napproach: agent\ninputs:\n"
            "  - {name: commits, type: 'string[]', required: true}\n"
            "  - {name: issues, type: 'string[]', required: true}\n"
            "  - {name: tone, type: string, default: friendly}\n"
            "outputs:\n  - {name: post, type: string}\n---\n\n"
            f"[[fake:post-{k}]] Write a short post on the week from the commits and issues.\n")


def show(stack: Stack, cwd: Path, build_id: str) -> dict[str, Any]:
    proc = stack.cli("plan", "show", build_id, "--json", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def until_stage(stack: Stack, cwd: Path, build_id: str, stage: str, round_: int = 1,
                timeout_s: float = 90.0) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def there() -> bool:
        seen.update(show(stack, cwd, build_id))
        return seen["stage"] == stage and seen["round"] == round_

    wait_until(there, timeout_s, f"build {build_id} {stage} (round {round_}): {seen}")
    return seen


def start(stack: Stack, vault: Path, task: str, *options: str
          ) -> tuple[subprocess.Popen[str], str]:
    """`skillq build TASK` following its build in the background; it and the build's id."""
    proc = stack.cli_popen("build", task, *options, "--vault", str(vault), cwd=vault.parent)
    assert proc.stderr is not None
    line = proc.stderr.readline().strip()
    assert line.startswith("run "), line
    return proc, line.removeprefix("run ")


@contextlib.contextmanager
def following(proc: subprocess.Popen[str]) -> Iterator[None]:
    """The build's `skillq build` killed if the test ends before it does."""
    try:
        yield
    finally:
        if proc.poll() is None:
            proc.kill()


def approve(stack: Stack, vault: Path, build_id: str, proc: subprocess.Popen[str]
            ) -> tuple[str, str]:
    """Approve the proposed plan; what `skillq build` printed by the build's end."""
    approved = stack.cli("approve", build_id, cwd=vault.parent)
    assert approved.returncode == 0, approved.stderr
    return proc.communicate(timeout=240)


def runs_called(stack: Stack, build_id: str | None, skill: str) -> list[PipelineRun]:
    """The runs of ``skill`` the build's own step started (``build_id``), or any."""
    query = select(PipelineRun).where(PipelineRun.skill == skill)
    if build_id is not None:
        query = query.where(PipelineRun.agent_call.startswith(f"{build_id}/"))
    with transaction(stack.endpoints.database_url) as session:
        rows = session.scalars(query.order_by(PipelineRun.created_at)).all()
        session.expunge_all()
        return list(rows)


def test_a_build_plans_waits_for_approval_then_builds_tests_and_compiles(
        healthy: Stack, llm: FakeLLM, vault: Path) -> None:
    k = uuid.uuid4().hex[:6]
    feedback = "make the default tone friendly"
    llm.load({
        f"plan-{k}": [call("update_plan", **the_plan(k)), answer(summary="three skills"),
                      call("update_plan", **the_plan(k, tone="friendly")),
                      answer(summary="tone is friendly now")],
        # its first script fails its case; it reads why, and fixes it
        f"bc-{k}": [call("write_file", path="main.py", text=script("{'commits': []}")),
                    call("run_tests"),
                    {**call("write_file", path="main.py",
                            text=script("{'commits': [inputs['repo'] + ': fix typo']}")),
                     "expect_tool_result": "outputs do not contain"},
                    call("run_tests"),
                    {**answer(diagnosis="lists commits", deviations=[]),
                     "expect_tool_result": '"passed":true'}],
        f"bi-{k}": [call("write_file", path="main.py", text=script("{'issues': ['#1 bug']}")),
                    call("run_tests"),
                    answer(diagnosis="lists issues", deviations=[])],
        f"bp-{k}": [call("write_file", path="SKILL.md", text=post_skill_md(k)),
                    call("check_draft"), call("run_tests"),
                    answer(diagnosis="writes the post",
                           deviations=["its body asks for a short post"])],
        # the built agent skill: its test case's runs (its eval), then the compiled
        # pipeline's
        f"post-{k}": [answer(post="This week: x, y."), answer(post="This week: x, y."),
                      answer(post="This week: a/b.")],
    })
    proc, build_id = start(healthy, vault, f"[[fake:plan-{k}]] Each Monday, a short post "
                           "on last week's commits and open issues of a repo")
    with following(proc):
        proposed = until_stage(healthy, vault.parent, build_id, "proposed")
        # nothing is built before approval
        assert proposed["skills"] == {}
        # the planner's tools: no web pages unless the deployment allows them
        offered = {t["name"] for t in llm.bodies(f"plan-{k}")[0]["tools"]}
        assert "update_plan" in offered and "fetch_page" not in offered
        assert not runs_called(healthy, build_id, "skillq-builder")
        assert llm.requests(f"bc-{k}") == []
        assert not (healthy.home / "builds" / build_id).exists()

        revised = healthy.cli("plan", "revise", build_id, feedback, cwd=vault.parent)
        assert revised.returncode == 0, revised.stderr
        again = until_stage(healthy, vault.parent, build_id, "proposed", round_=2)
        # the revision reached the planner, and its new plan is the one proposed
        assert feedback in json.dumps(llm.bodies(f"plan-{k}")[2])
        assert again["revisions"] == [feedback]
        assert again["plan"]["skills"][2]["inputs"][2]["default"] == "friendly"
        assert not runs_called(healthy, build_id, "skillq-builder")

        out, err = approve(healthy, vault, build_id, proc)
    assert proc.returncode == 0, f"{out}\n{err}"

    # the independent builds overlap; the dependent one starts after both ended
    builders = {r.inputs["skill"]: r for r in runs_called(healthy, build_id, "skillq-builder")}
    commits, issues, post = (builders[f"{n}-{k}"] for n in
                             ("repo-commits", "repo-issues", "weekly-post"))
    assert commits.created_at < issues.finished_at and issues.created_at < commits.finished_at
    assert post.created_at > max(commits.finished_at, issues.finished_at)

    # the builder whose first script failed read why, and passed the second time
    cases = runs_called(healthy, None, f"repo-commits-{k}")
    assert [r.source for r in cases] == ["build", "build"]
    assert [r.state for r in cases] == ["succeeded", "succeeded"]
    view = show(healthy, vault.parent, build_id)
    assert view["stage"] == "built"
    # priced per stage: the planner's 4 turns, each builder's with its test cases'
    assert view["cost_usd"]["planning"] == pytest.approx(0.0016)
    assert view["cost_usd"]["builders"][f"repo-issues-{k}"] == pytest.approx(0.0012)
    assert view["cost_usd"]["total"] == pytest.approx(0.0072)
    assert all(view["skills"][n]["state"] == "built" for n in builders)
    assert view["plan"]["deviations"] == [f"weekly-post-{k}: its body asks for a short post"]

    # the drafts are in the caller's vault, the orchestrator compiled from the plan
    name = f"weekly-repo-post-{k}"
    for folder in (name, *builders):
        assert (vault / folder / "SKILL.md").is_file(), folder
    assert "fix typo" in (vault / f"repo-commits-{k}" / "main.py").read_text()
    assert f"skillq try {name}" in out and "cost $" in out
    # the report draws what it made, and each skill's test results
    assert out.index(name) < out.index(f"repo-commits-{k}") < out.index("cost $")
    assert f"built    repo-commits-{k} (1/1 test cases passed, $0.00" in out
    assert "planned  $0.0016 (round 2)" in out  # 4 turns of $0.0004, both rounds
    # 18 turns: the planner's 4, the builders' 5, 3 and 4, the agent skill's case's 2
    assert "cost $0.0072 (3600 tokens in, 720 out)" in out
    shown_run = healthy.cli("run-show", build_id, cwd=vault.parent)
    assert shown_run.returncode == 0, shown_run.stderr
    assert "skillq-build" in shown_run.stdout

    valid = healthy.cli("validate", "--vault", str(vault), cwd=vault.parent)
    assert valid.returncode == 0, valid.stdout + valid.stderr
    ran = healthy.cli("run", name, "--vault", str(vault), "--input", "repo=a/b", "--json",
                      cwd=vault.parent)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert json.loads(ran.stdout)["outputs"] == {"post": "This week: a/b."}


def small_plan(k: str, *, dependent: bool = True) -> dict[str, Any]:
    """One code skill (its builder's conversation ``b-K``) and one depending on it."""
    io = {"inputs": [{"name": "text", "type": "string", "required": True}],
          "outputs": [{"name": "text", "type": "string"}]}
    skills = [{"name": f"shout-{k}", "approach": "code", "work": ["deterministic"],
               "responsibility": f"[[fake:b-{k}]] Upper-case a text.", **io,
               "tests": [{"id": "shouts", "name": "Shouts", "inputs": {"text": "hi"},
                          "expected": {"success": True, "text": "HI"}}]}]
    steps = [{"id": "shout", "skill": f"shout-{k}", "with": {"text": "${inputs.text}"}}]
    if dependent:
        skills.append({"name": f"twice-{k}", "approach": "code", "work": ["deterministic"],
                       "responsibility": f"[[fake:t-{k}]] Repeat a text twice.", **io,
                       "depends_on": [f"shout-{k}"],
                       "tests": [{"id": "twice", "name": "Twice", "inputs": {"text": "a"}}]})
        steps.append({"id": "twice", "skill": f"twice-{k}",
                      "with": {"text": "${steps.shout.outputs.text}"}})
    return {"task": "Shout a text", "name": f"shouting-{k}", "description": "Shout a text.",
            "inputs": io["inputs"], "steps": steps,
            "outputs": [{"name": "text", "type": "string",
                         "from": f"${{steps.{steps[-1]['id']}.outputs.text}}"}],
            "skills": skills}


@contextlib.contextmanager
def approved_build(stack: Stack, llm: FakeLLM, vault: Path, k: str, plan: dict[str, Any]
                   ) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A build of ``plan``, approved once proposed, followed in the background."""
    llm.script(f"plan-{k}", call("update_plan", **plan), answer(summary="planned"))
    proc, build_id = start(stack, vault, f"[[fake:plan-{k}]] Shout a text")
    with following(proc):
        until_stage(stack, vault.parent, build_id, "proposed")
        approved = stack.cli("approve", build_id, cwd=vault.parent)
        assert approved.returncode == 0, approved.stderr
        yield proc, build_id


def test_a_cancelled_build_leaves_no_draft(healthy: Stack, llm: FakeLLM, vault: Path) -> None:
    k = uuid.uuid4().hex[:6]
    llm.script(f"b-{k}",
               call("write_file", path="main.py", text=script("{'text': 'HI'}")),
               # a slow model, cancelled meanwhile; the agent worker (one at a time) is
               # its until the answer lands, so the module's next build waits for it
               {**call("run_tests"), "delay_s": 15})
    with approved_build(healthy, llm, vault, k, small_plan(k, dependent=False)) as (
            proc, build_id):
        draft = healthy.home / "builds" / build_id / f"shout-{k}" / "main.py"
        wait_until(lambda: draft.is_file() and "HI" in draft.read_text(), 60,
                   "the builder's first write")
        cancelled = healthy.cli("cancel", build_id, cwd=vault.parent)
        assert cancelled.returncode == 0, cancelled.stderr
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, f"{out}\n{err}"
    assert show(healthy, vault.parent, build_id)["stage"] == "cancelled"
    assert list(vault.iterdir()) == []
    drafts = healthy.cli("plan", "drafts", build_id, "--vault", str(vault), cwd=vault.parent)
    assert drafts.returncode == 0 and drafts.stdout == "", drafts.stdout + drafts.stderr
    assert list(vault.iterdir()) == []


def test_from_note_plans_a_new_version_of_the_noted_skill_with_the_note_preloaded(
        healthy: Stack, llm: FakeLLM, vault: Path) -> None:
    k = uuid.uuid4().hex[:6]
    name = f"shout-{k}"
    folder = vault / name
    folder.mkdir()
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: Upper-case a text.\nversion: 1\n"
        "inputs:\n  - {name: text, type: string, required: true}\n"
        "outputs:\n  - {name: text, type: string}\n"
        "run: {command: python3 main.py, timeout: 30, retries: 0}\n---\n\nShout it.\n")
    (folder / "main.py").write_text(script("{'text': inputs['text']}"))  # the bug: as given
    with transaction(healthy.endpoints.database_url) as session:
        note_id = leave_note(session, StepFailure(
            skill=name, version=1, step_id=name, pipeline=name, run_id="run-noted",
            step_run_id=f"run-noted/{name}/-1/1", error="it returned 'hi' for 'hi', not 'HI'",
            error_kind="failed", exit_code=0, inputs={"text": "hi"}), secrets={})
    assert note_id is not None
    plan = small_plan(k, dependent=False)
    plan.update(steps=[], outputs=[], name=f"shout-fix-{k}")
    plan["skills"][0]["responsibility"] = f"[[fake:b-{k}]] Upper-case a text."
    llm.script(f"plan-{k}", call("update_plan", **plan), answer(summary="fix the case"))
    llm.script(f"b-{k}",
               call("read_file", path="main.py"),
               {**call("write_file", path="main.py",
                       text=script("{'text': inputs['text'].upper()}")),
                "expect_tool_result": "inputs['text']"},  # it started from the current files
               call("run_tests"),
               answer(diagnosis="upper-cases now", deviations=[]))
    proc, build_id = start(healthy, vault, f"[[fake:plan-{k}]] fix it", "--from-note",
                           str(note_id))
    with following(proc):
        proposed = until_stage(healthy, vault.parent, build_id, "proposed")
        # the note reached the planner with the skill it is on
        first = json.dumps(llm.bodies(f"plan-{k}")[0])
        assert f"Improvement note #{note_id} on skill '{name}'" in first
        assert "it returned 'hi' for 'hi', not 'HI'" in first
        assert (proposed["note_id"], proposed["improves"]) == (note_id, name)
        out, err = approve(healthy, vault, build_id, proc)
    assert proc.returncode == 0, f"{out}\n{err}\n{show(healthy, vault.parent, build_id)}"
    # the new version took the skill's place as a draft; no pipeline was compiled
    assert ".upper()" in (folder / "main.py").read_text()
    assert sorted(p.name for p in vault.iterdir()) == [name]
    assert show(healthy, vault.parent, build_id)["skills"][name]["tested"]["passed"] is True
    # the note is linked to the build that made its new version
    noted = healthy.cli("notes", name, "--json", cwd=vault.parent)
    assert noted.returncode == 0, noted.stderr
    (row,) = json.loads(noted.stdout)
    assert row["build"] == {"id": build_id, "stage": "built"}


def test_daemon_runs_every_stage_there_and_the_drafts_land_in_the_callers_vault(
        healthy: Stack, llm: FakeLLM, vault: Path, tmp_path: Path) -> None:
    k = uuid.uuid4().hex[:6]
    name = f"builder-{k}"  # a machine of its own: its own network namespace and home
    env = {**llm.env(), "SKILLQ_AGENT_MODEL": "anthropic:claude-haiku-4-5"}
    with namespaced_daemon(healthy, tmp_path / "remote-home", name,
                           queues="control,agent,default", concurrency=2, env=env,
                           forward_urls=[llm.url]) as remote:
        llm.script(f"b-{k}", call("write_file", path="main.py",
                                  text=script("{'text': inputs['text'].upper()}")),
                   call("run_tests"), answer(diagnosis="shouts", deviations=[]))
        llm.script(f"plan-{k}", call("update_plan", **small_plan(k, dependent=False)),
                   answer(summary="planned"))
        proc, build_id = start(healthy, vault, f"[[fake:plan-{k}]] Shout a text", "--daemon",
                               name)
        with following(proc):
            until_stage(healthy, vault.parent, build_id, "proposed")
            out, err = approve(healthy, vault, build_id, proc)
        assert proc.returncode == 0, f"{out}\n{err}"
        # every stage ran there: the build's own step, its planner, its builder and the
        # builder's test case
        runs = [build_id, *(r.id for r in runs_called(healthy, build_id, "skillq-planner")),
                *(r.id for r in runs_called(healthy, build_id, "skillq-builder")),
                *(r.id for r in runs_called(healthy, None, f"shout-{k}"))]
        assert len(runs) == 4
        for run_id in runs:
            for step in healthy.steps(run_id):
                assert (step.daemon, step.worker) == (name, f"d@{name}"), (run_id, step)
        # its drafts were written on that machine, and landed in the caller's vault
        assert (remote.home / "builds" / build_id / f"shout-{k}" / "main.py").is_file()
        assert not (healthy.home / "builds" / build_id).exists()
        assert ".upper()" in (vault / f"shout-{k}" / "main.py").read_text()


def test_a_person_at_the_terminal_revises_then_approves_the_plan_there(
        healthy: Stack, llm: FakeLLM, vault: Path) -> None:
    k = uuid.uuid4().hex[:6]
    plan = small_plan(k, dependent=False)
    llm.script(f"plan-{k}", call("update_plan", **plan), answer(summary="planned"),
               call("update_plan", **{**plan, "description": "Shout a text, loudly."}),
               answer(summary="louder"))
    llm.script(f"b-{k}", call("write_file", path="main.py",
                              text=script("{'text': inputs['text'].upper()}")),
               call("run_tests"), answer(diagnosis="shouts", deviations=[]))
    main, side = pty.openpty()
    proc = subprocess.Popen(
        skillq_argv("build", f"[[fake:plan-{k}]] Shout a text", "--vault", str(vault)),
        stdin=side, stdout=side, stderr=side, env=healthy.cli_env, cwd=vault.parent,
        start_new_session=True)
    os.close(side)
    try:
        assert f"shouting-{k}: build plan" in read_until(main, "or Enter to wait: ", 90)
        os.write(main, b"r\n")  # feedback left out: refused, asked again
        assert "say what to change" in read_until(main, "or Enter to wait: ", 30)
        os.write(main, b"r louder, please\n")
        assert "Shout a text, loudly." in read_until(main, "or Enter to wait: ", 90)
        os.write(main, b"a\n")
        assert proc.wait(timeout=240) == 0, read_until(main, "\n", 1)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main)
    assert llm.requests(f"b-{k}"), "its builder ran"
    assert "louder, please" in json.dumps(llm.bodies(f"plan-{k}")[2])
    assert (vault / f"shout-{k}" / "main.py").is_file()
    with healthy.db() as session:
        decided = session.scalars(select(Wait).where(Wait.run_id == healthy_build(
            healthy, k)).order_by(Wait.id)).all()
        assert [(w.state, (w.decided_by or "").split(":")[0]) for w in decided] == [
            ("answered", "terminal"), ("approved", "terminal")]


def healthy_build(stack: Stack, k: str) -> str:
    """The build whose task carried marker ``plan-K``."""
    with stack.db() as session:
        return str(session.scalars(select(PipelineRun.id).where(
            PipelineRun.skill == "skillq-build",
            PipelineRun.inputs["task"].astext.contains(f"plan-{k}"))).one())


def test_a_build_refuses_bad_options_before_anything_is_recorded(
        healthy: Stack, vault: Path) -> None:
    before = len(runs_called(healthy, None, "skillq-build"))
    # exit codes as everywhere: an unknown model is an AgentError's 1, bad input 2
    for options, says, code in ((["--model", "nosuch:model"], "--model: model 'nosuch", 1),
                                (["--budget-usd", "0"], "--budget-usd", 2),
                                (["--from-note", "999999"], "no improvement note #999999", 2)):
        refused = healthy.cli("build", "Shout a text", *options, "--vault", str(vault),
                              cwd=vault.parent)
        assert refused.returncode == code, (options, refused.stdout, refused.stderr)
        assert says in refused.stderr and "Traceback" not in refused.stderr, refused.stderr
    empty = healthy.cli("build", "  ", "--vault", str(vault), cwd=vault.parent)
    assert empty.returncode == 2 and "say what the pipeline is to do" in empty.stderr
    assert len(runs_called(healthy, None, "skillq-build")) == before
