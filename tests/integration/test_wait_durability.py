"""A wait for a person outlives its workers and its servers: a question and an approval
left open while every worker and Redis are killed (SIGKILL) and PostgreSQL is restarted,
then answered, with nothing lost. Meanwhile the concurrency-1 agent worker runs other agent
steps: a step waiting for a person holds no worker slot.

The stack is this module's own (its PostgreSQL is stopped), as in test_outages.py.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from conftest import (
    STANDARD_WORKERS,
    VAULTS,
    Stack,
    build_stack,
    copy_vault,
    wait_until,
)
from support.fake_llm import FakeLLM
from test_outages import start_postgres, stop_postgres

from orchestrator.embedded import embedded_status, stop_embedded
from orchestrator.processes import pid_alive

pytestmark = pytest.mark.integration
AGENT_WORKER = "agent-gpu-cmd0"
USAGE = {"input": 100, "output": 20}


@pytest.fixture
def own_stack(tmp_path_factory: pytest.TempPathFactory, llm: FakeLLM) -> Iterator[Stack]:
    home = tmp_path_factory.mktemp("wait-durability-home")
    built: Stack | None = None
    try:
        built = build_stack(home)
        start_workers(built, llm)
        yield built
    finally:
        if built is not None:
            built.teardown()
        else:
            stop_embedded(home)


def start_workers(stack: Stack, llm: FakeLLM) -> None:
    for spec in STANDARD_WORKERS:
        stack.start_worker(spec, dict(llm.env()) if spec.name == AGENT_WORKER else None)
    # this process's pooled broker connections went with a killed Redis: a ping on one
    # fails once, and the pool replaces it
    for _ in range(5):
        try:
            stack.wait_ready([s.name for s in STANDARD_WORKERS])
            return
        except redis.exceptions.ConnectionError:
            time.sleep(0.5)
    stack.wait_ready([s.name for s in STANDARD_WORKERS])


def kill_redis(home: Path) -> None:
    pids = [s.pid for s in embedded_status(home) if s.name == "redis" and s.running]
    assert pids and pids[0], f"no embedded Redis runs under {home}"
    os.kill(pids[0], signal.SIGKILL)
    wait_until(lambda: not pid_alive(pids[0]), 30, "Redis to die")


def inbox(stack: Stack, cwd: Path) -> list[dict[str, Any]]:
    proc = stack.cli("inbox", "--json", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stdout))


def test_a_wait_outlives_killed_workers_and_a_database_restart(
        own_stack: Stack, llm: FakeLLM, tmp_path: Path) -> None:
    stack = own_stack
    vault = copy_vault(VAULTS / "waits", tmp_path / "vault")
    asks, other = f"durable-{uuid.uuid4().hex[:8]}", f"other-{uuid.uuid4().hex[:8]}"
    llm.script(asks, {"tool_calls": [{"name": "ask_question", "arguments": {
        "question": "Which tone?"}}], "usage": USAGE},
               {"output": {"line": "a calm line"}, "usage": USAGE})
    llm.script(other, {"output": {"line": "ran meanwhile"}, "usage": USAGE})

    def start(name: str, *inputs: str) -> str:
        before = stack.run_ids(name)
        argv = ["run", name, "--vault", str(vault), "--detach"]
        for pair in inputs:
            argv += ["--input", pair]
        proc = stack.cli(*argv, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        return stack.new_run(name, before)

    question_run = start("ask-tone", f"topic={llm.marker(asks)} tea")
    approval_run = start("review-post", "topic=owls")
    wait_until(lambda: {w["run_id"] for w in inbox(stack, tmp_path)} >= {
        question_run, approval_run}, 90, "both waits in the inbox")
    (asking,) = stack.steps(question_run)
    assert asking.state == "waiting"

    # The agent worker runs one step at a time, and the waiting one does not hold it.
    meanwhile = stack.cli("run", "plain-line", "--vault", str(vault), "--json", "--input",
                          f"topic={llm.marker(other)} owls", cwd=tmp_path, timeout_s=120)
    assert meanwhile.returncode == 0, meanwhile.stderr
    assert json.loads(meanwhile.stdout)["outputs"] == {"line": "ran meanwhile"}

    # Every worker killed, Redis killed and PostgreSQL stopped (connections cut), the
    # servers started again on their ports and data, then the workers.
    for worker in list(stack.workers.values()):
        worker.kill9()
    kill_redis(stack.home)
    stop_postgres(stack.home)
    start_postgres(stack)  # resolves the endpoints: every embedded server that is down
    start_workers(stack, llm)

    waiting = inbox(stack, tmp_path)
    assert {(w["run_id"], w["kind"]) for w in waiting} == {
        (question_run, "question"), (approval_run, "approval")}
    assert stack.run(question_run).state == "running"
    assert stack.cli("answer", question_run, "calm", cwd=tmp_path).returncode == 0
    assert stack.cli("approve", approval_run, "--input", "channel=newsletter",
                     cwd=tmp_path).returncode == 0

    done = stack.wait_run(question_run)
    assert done.state == "succeeded", done.error
    assert any('"calm"' in r[0] for r in llm.tool_results(asks)[1:])
    approved = stack.wait_run(approval_run)
    assert approved.state == "succeeded", approved.error
    finished = stack.cli("run-show", approval_run, "--json", cwd=tmp_path)
    assert json.loads(finished.stdout)["outputs"] == {"posted": "Draft about owls",
                                                      "channel": "newsletter"}
    assert inbox(stack, tmp_path) == []
