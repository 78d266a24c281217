"""`skillq flower` as a real process on the test stack's broker: its HTTP API, queried
with its credentials, lists the workers and the tasks of a pipeline run, readable (the
step's skill and attempt id) and without the secret a step printed; without
credentials it refuses; without SKILLQ_FLOWER_AUTH it will not listen beyond loopback.

The default and cmd0 workers are replaced by ones started with SKILLQ_TASK_EVENTS=1 (the
opt-in deploy/ sets where Flower runs); Flower runs with FLOWER_ENABLE_EVENTS=false so it
does not switch events on in the other workers, which later tests share.
"""

from __future__ import annotations

import base64
import json
import subprocess
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    STANDARD_WORKERS,
    VAULTS,
    RunResult,
    Stack,
    copy_vault,
    free_port,
    nodename,
    skillq_argv,
    tail,
    wait_until,
)

pytestmark = pytest.mark.integration

RunSkill = Callable[..., RunResult]
WATCHED = ("default", "agent-gpu-cmd0")  # serve the pipeline's default and cmd0 steps
USER = "ops"


class Api:
    def __init__(self, port: int, password: str) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.password = password

    def get(self, path: str, auth: tuple[str, str] | None = None) -> tuple[int, str]:
        user, password = auth or (USER, self.password)
        request = urllib.request.Request(self.base + path)
        if user:
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")
        except OSError:
            return 0, ""  # not listening yet

    def json(self, path: str) -> Any:
        status, body = self.get(path)
        assert status == 200, (path, status, body)
        return json.loads(body)


@pytest.fixture
def events_on(healthy: Stack) -> Iterator[str]:
    """The watched workers restarted with task events on and the peek secret; the
    secret's value. The next test asking for a healthy stack gets standard ones back."""
    token = f"peek-{uuid.uuid4().hex}"
    standard_env = healthy.env
    healthy.env = {**standard_env, "SKILLQ_TASK_EVENTS": "1",
                   "SKILLQ_SECRET_PEEK_TOKEN": token}
    try:
        for spec in STANDARD_WORKERS:
            if spec.name in WATCHED:
                healthy.workers[spec.name].stop()
                healthy.start_worker(spec)
    finally:
        healthy.env = standard_env
        healthy.tainted.update(WATCHED)
    healthy.wait_ready(list(WATCHED))
    yield token


@pytest.fixture
def flower(healthy: Stack, tmp_path: Path) -> Iterator[tuple[Api, Path]]:
    port, password = free_port(), uuid.uuid4().hex
    log = healthy.home / "logs" / "flower.log"
    env = {**healthy.cli_env, "SKILLQ_FLOWER_AUTH": f"{USER}:{password}",
           "FLOWER_ENABLE_EVENTS": "false"}
    with log.open("ab") as fh:
        proc = subprocess.Popen(skillq_argv("flower", "--port", str(port)), env=env,
                                cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=fh,
                                stderr=subprocess.STDOUT)
    api = Api(port, password)
    try:
        def up() -> bool:
            assert proc.poll() is None, f"flower exited:\n{tail(log)}"
            return api.get("/api/workers")[0] == 200

        wait_until(up, 60, f"Flower to answer on {port}:\n{tail(log)}", every_s=0.2)

        # /api/workers answers from a broadcast before Flower's event receiver has bound
        # its queue; events sent before that are lost to it (a CI run on a loaded 2-core
        # machine missed a whole run's). A worker's heartbeat in Flower's event state
        # shows the receiver is live.
        def hearing() -> bool:
            heard = {w.get("hostname") for w in api.json("/workers?json=1")["data"]}
            return {nodename(name) for name in WATCHED} <= heard

        wait_until(hearing, 60, f"Flower to receive the workers' events:\n{tail(log)}",
                   every_s=0.3)
        yield api, log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_flower_refuses_to_listen_beyond_loopback_without_auth(
        healthy: Stack, tmp_path: Path) -> None:
    proc = healthy.cli("flower", "--address", "0.0.0.0", cwd=tmp_path, timeout_s=30)
    assert proc.returncode == 2, proc
    assert "SKILLQ_FLOWER_AUTH=user:password" in proc.stderr and "Traceback" not in proc.stderr
    bad = healthy.cli("flower", cwd=tmp_path, timeout_s=30,
                      env={"SKILLQ_FLOWER_AUTH": "no-colon-here"})
    assert bad.returncode == 2 and "write user:password" in bad.stderr, bad
    assert "no-colon-here" not in bad.stderr


def test_flower_lists_workers_and_readable_tasks_behind_auth(
        healthy: Stack, events_on: str, flower: tuple[Api, Path], run_skill: RunSkill,
        tmp_path: Path) -> None:
    api, log = flower
    token = events_on
    vault = copy_vault(VAULTS / "ops", tmp_path / "vault")
    # One message per item, whatever echo's recent durations in this session's database
    # (quick ones would put both items in one execute_steps message: one task, not two).
    result = run_skill("watched", vault, inputs={"leak": True},
                       env={"SKILLQ_BATCH_TARGET_MS": "0"})
    assert result.code == 1 and result.run_id, result  # secret-peek printed it and failed
    steps = healthy.steps(result.run_id)
    attempts = {s.id: s.skill for s in steps}
    assert len(attempts) == 3, attempts  # fan/0, fan/1, peek
    # A task's state is its step's recorded outcome (on d773015 every one was SUCCESS).
    wanted = {s.id: "SUCCESS" if s.state == "succeeded" else "FAILURE" for s in steps}
    assert sorted(wanted.values()) == ["FAILURE", "SUCCESS", "SUCCESS"], wanted

    def listed() -> dict[str, Any] | None:
        tasks = api.json("/api/tasks")
        mine = {t["uuid"]: t for t in tasks.values() if t["uuid"] in attempts}
        done = all(t.get("state") == wanted[i] and t.get("args") for i, t in mine.items())
        return mine if len(mine) == len(attempts) and done else None

    tasks = wait_until(listed, 20, "Flower to list the run's tasks in their steps' states",
                       every_s=0.3)
    (failed,) = [s for s in steps if s.state == "failed"]
    shown = tasks[failed.id]
    assert shown["exception"].startswith("StepFailed(") and failed.error, shown
    assert failed.error[:30] in shown["exception"], (failed.error, shown)
    by_state = api.json("/api/tasks?state=FAILURE")
    assert failed.id in {t["uuid"] for t in by_state.values()}  # Flower's FAILURE filter
    for step_run_id, task in tasks.items():
        assert task["name"] == "skillq.execute_step"
        skill = attempts[step_run_id]
        assert task["args"] == f"{skill}: {step_run_id}" or \
            task["args"] == f"{step_run_id.split('/')[1]}: {step_run_id}", task
        queue = "cmd0" if skill == "secret-peek" else "default"
        worker = "agent-gpu-cmd0" if queue == "cmd0" else "default"
        assert task["worker"] == nodename(worker), task

    workers = api.json("/api/workers?refresh=1")
    assert {nodename(s.name) for s in STANDARD_WORKERS} <= set(workers), list(workers)

    for path in ("/api/tasks", "/api/workers", f"/api/task/info/{next(iter(tasks))}"):
        assert api.get(path, auth=("", ""))[0] == 401, path
        assert api.get(path, auth=(USER, "wrong"))[0] == 401, path
    seen = [api.get(p)[1] for p in ("/api/tasks", "/api/workers?refresh=1")]
    seen += [api.get(f"/api/task/info/{tid}")[1] for tid in tasks]
    assert all(seen) and not [text for text in seen if token in text]
    assert token not in log.read_text(errors="replace")


def test_a_step_waiting_for_a_person_shows_as_a_task_that_ended_waiting(
        healthy: Stack, events_on: str, flower: tuple[Api, Path], tmp_path: Path) -> None:
    """An approval step's task ends SUCCESS with the result 'waiting' (its slot is free);
    the decision sends the same attempt again, and it ends 'succeeded'."""
    api, _ = flower
    vault = copy_vault(VAULTS / "waits", tmp_path / "waits")
    started = healthy.cli("run", "review-post", "--vault", str(vault), "--detach",
                          "--input", "topic=flowers", cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip().splitlines()[-1]
    attempt = f"{run_id}/review/-1/1"

    def task(result: str) -> dict[str, Any] | None:
        found = api.json("/api/tasks").get(attempt)
        return found if found and found.get("state") == "SUCCESS" and \
            found.get("result") == result else None

    waiting = wait_until(lambda: task("'waiting'"), 60, "Flower to show the step waiting",
                         every_s=0.3)
    assert waiting["args"] == f"skillq-approval: {attempt}"
    assert healthy.cli("approve", run_id, cwd=tmp_path).returncode == 0
    wait_until(lambda: task("'succeeded'"), 60, "Flower to show the step done", every_s=0.3)
