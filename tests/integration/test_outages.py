"""Faults around the database, for real: a first start on an empty SKILLQ_HOME, a worker
started while PostgreSQL is down, and PostgreSQL stopped under a waiting `skillq run`.

Every stack here is its own (own SKILLQ_HOME, own embedded Redis and PostgreSQL), so
stopping its PostgreSQL never touches the session stack other tests share. PostgreSQL is
really stopped (fast shutdown: every client is cut off, as in a restart) and started again
on the same data directory and port through orchestrator/embedded.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import (
    EXAMPLES,
    VAULTS,
    Stack,
    Worker,
    WorkerSpec,
    build_stack,
    copy_vault,
    skillq_argv,
    tail,
    wait_until,
)
from sqlalchemy.exc import DBAPIError

from orchestrator.embedded import embedded_status, resolve_endpoints, stop_embedded
from orchestrator.local_stack import stop_workers
from orchestrator.processes import pid_alive
from shared.db.eval_models import EvalRecord
from shared.errors import DatabaseUnreachable
from shared.settings import Settings

pytestmark = pytest.mark.integration

# default,control in one worker: the planner and the steps. Three slots: two held steps
# and the planner's tasks.
WORKER = WorkerSpec("default", "default,control", 3)
OUTAGE_S = 10.0  # how long PostgreSQL stays stopped under a waiting `skillq run`
SHORT_BOUND_S = 3  # SKILLQ_DATABASE_OUTAGE_S of the client that is meant to give up
HOLD_S = 120  # a held step's cap: a hang guard, the test releases it


def clean_env(home: Path) -> dict[str, str]:
    """A user's environment: no skillq settings but SKILLQ_HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLQ_")}
    return {**env, "SKILLQ_HOME": str(home)}


def run_cli(args: list[str], env: dict[str, str], cwd: Path, timeout_s: float = 180
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(skillq_argv(*args), env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout_s, check=False)


def logs_of(stack: Stack) -> str:
    return "\n".join(f"--- {log}\n{tail(log)}" for log in stack.logs().values())


def stop_postgres(home: Path) -> None:
    """Fast shutdown (SIGINT): open connections are cut at once, as a restart does."""
    pids = [s.pid for s in embedded_status(home) if s.name == "postgres" and s.running]
    assert pids and pids[0], f"no embedded PostgreSQL runs under {home}"
    os.kill(pids[0], signal.SIGINT)
    wait_until(lambda: not pid_alive(pids[0]), 30, "PostgreSQL to stop")


def start_postgres(stack: Stack) -> None:
    """Start it again: same data directory, same port (kept in state.json)."""
    settings = Settings(_env_file=None, home=stack.home, broker_url=None, database_url=None,
                        result_backend=None)
    assert resolve_endpoints(settings).database_url == stack.endpoints.database_url


def announced_since(stack: Stack, node: str, since: datetime) -> bool:
    try:
        row = stack.daemon_worker(node)
    except DBAPIError:  # no tables yet, or the server still starting
        return False
    return row is not None and row.heartbeat_at > since


def restart_worker(stack: Stack) -> Worker:
    """A worker of this test's own (whatever an earlier test left), announced."""
    if WORKER.name in stack.workers:
        stack.workers[WORKER.name].stop()
    since = datetime.now(UTC)
    worker = stack.start_worker(WORKER)
    stack.wait_ready([WORKER.name])
    wait_until(lambda: announced_since(stack, worker.node, since), 30,
               f"{worker.node} to announce itself\n{logs_of(stack)}", every_s=0.2)
    return worker


@pytest.fixture(scope="module")
def outage_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A stack of its own, whose PostgreSQL the tests stop. SKILLQ_DEAD_AFTER_S is long
    so the outage itself is what the tests see, not a step re-dispatched as lost because
    its heartbeats could not be written meanwhile."""
    home = tmp_path_factory.mktemp("outage-home")
    built: Stack | None = None
    try:
        built = build_stack(home)
        built.env["SKILLQ_DEAD_AFTER_S"] = "60"
        yield built
    finally:
        if built is not None:
            built.teardown()
        else:
            stop_embedded(home)


@pytest.fixture
def fresh_home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    try:
        yield home
    finally:
        stop_workers(home, timeout_s=10)
        stop_embedded(home)


def git_repo(path: Path) -> Path:
    path.mkdir()
    git = ["git", "-C", str(path), "-c", "user.name=Ada", "-c", "user.email=ada@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    (path / "notes.txt").write_text("hello\n")
    subprocess.run([*git, "add", "notes.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    return path


def test_up_on_a_fresh_home_then_run_the_offline_example(fresh_home: Path,
                                                         tmp_path: Path) -> None:
    # As scripts/main does: the report folder is where the sandboxed steps may write.
    env = clean_env(fresh_home) | {"SKILLQ_STEP_BINDS": str(tmp_path)}
    vault = copy_vault(EXAMPLES / "git-digest", tmp_path / "vault")
    repo, out = git_repo(tmp_path / "repo"), tmp_path / "digest"
    up = run_cli(["up", "--timeout", "120"], env, tmp_path)
    assert up.returncode == 0, up.stderr
    try:
        run = run_cli(["run", "git-digest", "--vault", str(vault), "--input",
                       f"repos={repo}", "--input", "title=x", "--input", f"output_dir={out}",
                       "--json"], env, tmp_path)
        assert run.returncode == 0, f"{run.stderr}\n{tail(fresh_home / 'logs/worker-default.log')}"
        outputs = json.loads(run.stdout)["outputs"]
        assert outputs["totals"]["commits"] == 1
        assert (out / "digest.md").read_text() == outputs["markdown"]
    finally:
        down = run_cli(["down"], env, tmp_path)
    assert down.returncode == 0, down.stderr


def test_a_worker_on_a_database_without_tables_migrates_it_and_announces(
        fresh_home: Path) -> None:
    stack = build_stack(fresh_home, migrate=False)
    try:
        worker = stack.start_worker(WORKER)
        stack.wait_ready([WORKER.name])
        wait_until(lambda: announced_since(stack, worker.node, datetime.min.replace(tzinfo=UTC)),
                   30, f"{worker.node} to announce itself\n{logs_of(stack)}", every_s=0.2)
    finally:
        stack.teardown()


def test_a_worker_started_while_postgres_is_down_announces_when_it_is_back(
        outage_stack: Stack, tmp_path: Path) -> None:
    stack = outage_stack
    if WORKER.name in stack.workers:
        stack.workers[WORKER.name].stop()
    vault = copy_vault(VAULTS / "pipes", tmp_path / "vault")
    stop_postgres(stack.home)
    try:
        worker = stack.start_worker(WORKER)
        stack.wait_ready([WORKER.name])
        # Celery logs "ready." after the worker_ready handlers (the first announcement) ran
        wait_until(lambda: f"{worker.node} ready." in worker.log.read_text(errors="replace"),
                   30, f"{worker.node} to be ready")
        time.sleep(2.0)  # several failed attempts: their backoff is capped at heartbeat_s
    finally:
        back = datetime.now(UTC)
        start_postgres(stack)
    wait_until(lambda: announced_since(stack, worker.node, back), 20,
               f"{worker.node} to announce itself\n{logs_of(stack)}", every_s=0.2)
    log = worker.log.read_text(errors="replace")
    assert log.count("database unreachable") == 1, log  # once per outage, not per attempt
    assert "Traceback" not in log, log
    result = stack.cli("run", "echo", "--vault", str(vault), "--input", "text=back", "--json",
                       cwd=tmp_path)
    assert result.returncode == 0, f"{result.stderr}\n{logs_of(stack)}"
    assert json.loads(result.stdout)["outputs"] == {"text": "back"}


def held_run(stack: Stack, vault: Path, cwd: Path, release: Path,
             env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    """`skillq run slow-chain` in the background, once its first step runs (held until
    ``release`` exists); the process and the run id."""
    before = stack.run_ids("slow-chain")
    pid_dir = release.with_suffix(".pids")
    pid_dir.mkdir()
    proc = stack.cli_popen("run", "slow-chain", "--vault", str(vault), "--input",
                           f"hold_s={HOLD_S}", "--input", f"pid_dir={pid_dir}", "--input",
                           f"release={release}", "--json", cwd=cwd, env=env)
    run_id = stack.new_run("slow-chain", before)
    wait_until(lambda: (pid_dir / "slow.pid").exists(), 30, f"run {run_id}'s step to run")
    return proc, run_id


def test_skillq_run_waits_through_a_database_outage(outage_stack: Stack,
                                                    tmp_path: Path) -> None:
    stack = outage_stack
    restart_worker(stack)
    vault = copy_vault(VAULTS / "pipes", tmp_path / "vault")
    patient_release, impatient_release = tmp_path / "patient", tmp_path / "impatient"
    patient, run_id = held_run(stack, vault, tmp_path, patient_release)
    impatient, other_id = held_run(stack, vault, tmp_path, impatient_release,
                                   env={"SKILLQ_DATABASE_OUTAGE_S": str(SHORT_BOUND_S)})
    try:
        stop_postgres(stack.home)
        stopped = time.monotonic()
        try:
            # the impatient client gives up after its bound: one line, its own exit code
            _, gave_up = impatient.communicate(timeout=SHORT_BOUND_S + 20)
            assert impatient.returncode == DatabaseUnreachable.exit_code, gave_up
            assert "Traceback" not in gave_up, gave_up
            errors = [line for line in gave_up.splitlines() if line.startswith("error:")]
            assert len(errors) == 1 and other_id in errors[0], gave_up
            assert patient.poll() is None, patient.communicate()[1]
            time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - stopped)))
            assert patient.poll() is None, patient.communicate()[1]
        finally:
            start_postgres(stack)
        # the steps finish after the database is back: the client's waiting is under test
        patient_release.touch()
        impatient_release.touch()
        stdout, stderr = patient.communicate(timeout=120)
    finally:
        patient_release.touch()
        impatient_release.touch()
        for proc in (patient, impatient):
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert patient.returncode == 0, f"{stderr}\n{logs_of(stack)}"
    assert "Traceback" not in stderr, stderr
    assert json.loads(stdout)["outputs"] == {"label": "slow"}
    assert stderr.count("database unreachable") == 1, stderr  # said once, not per attempt
    assert "retrying" in stderr, stderr
    assert stack.run(run_id).state == "succeeded"
    with contextlib.suppress(AssertionError):  # not under test: only so teardown is tidy
        stack.wait_run(other_id)


HELD_ITEMS = 5  # three run on the worker's three slots, two wait in the queue
LATE = WorkerSpec("late", "default", 2)  # started during the outage: takes the two


def test_a_worker_keeps_results_and_taken_messages_through_a_database_outage(
        outage_stack: Stack, tmp_path: Path) -> None:
    """On d773015 a worker threw away results it could not record (the scripts ran
    again) and acknowledged and dropped the messages it took while PostgreSQL was down."""
    stack = outage_stack
    restart_worker(stack)
    vault = copy_vault(VAULTS / "faults", tmp_path / "vault")
    release, pid_dir = tmp_path / "release", tmp_path / "pids"
    pid_dir.mkdir()
    labels = json.dumps([f"i{n}" for n in range(HELD_ITEMS)])
    proc = stack.cli("run", "held-fan", "--vault", str(vault), "--input", f"labels={labels}",
                     "--input", f"release={release}", "--input", f"pid_dir={pid_dir}",
                     "--detach", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()
    wait_until(lambda: len(list(pid_dir.glob("*.pid"))) == WORKER.concurrency, 30,
               "the first items to run")
    first = {p.stem for p in pid_dir.glob("*.pid")}
    late = None
    try:
        stop_postgres(stack.home)
        release.touch()  # the running items finish while the database is down
        late = stack.start_worker(LATE)  # and the queued messages are taken meanwhile
        wait_until(lambda: late is not None and late.log.read_text(errors="replace").count(
            "Task skillq.execute_step[") >= HELD_ITEMS - WORKER.concurrency, 60,
            f"the late worker to take the queued messages\n{logs_of(stack)}")
        time.sleep(OUTAGE_S / 2)
        back_at = datetime.now(UTC)
    finally:
        start_postgres(stack)
    final = stack.wait_run(run_id, timeout_s=120)
    try:
        assert final.state == "succeeded", f"{final.error}\n{logs_of(stack)}"
        rows = stack.steps(run_id, "fan")
        # One attempt per item, each succeeded: nothing ran twice, nothing was dropped.
        assert sorted((r.item_index, r.attempt, r.state) for r in rows) == [
            (i, 1, "succeeded") for i in range(HELD_ITEMS)], [(r.id, r.state) for r in rows]
        for row in rows:
            label = f"i{row.item_index}"
            assert row.outputs is not None and row.outputs["label"] == label
            assert row.finished_at is not None and row.finished_at > back_at
            if label in first:  # finished in the outage, recorded once it was over
                assert row.outputs["end"] < back_at.timestamp(), row.outputs
                assert row.worker.startswith(f"{WORKER.name}@"), row.worker
            else:  # taken by the late worker in the outage, run once it was over
                assert row.worker.startswith(f"{LATE.name}@"), row.worker
                assert row.outputs["start"] > back_at.timestamp(), row.outputs
    finally:
        if late is not None:
            late.stop()
            stack.workers.pop(LATE.name, None)


def test_a_command_that_cannot_reach_the_database_says_so_in_one_line(tmp_path: Path) -> None:
    """Nothing recorded yet: a clear error and exit 3, not a traceback."""
    env = {**clean_env(tmp_path / "home"),
           "SKILLQ_DATABASE_URL": "postgresql+psycopg://skillq@127.0.0.1:1/skillq",
           "SKILLQ_BROKER_URL": "redis://127.0.0.1:1/0"}
    for args in (["runs"], ["run", "echo", "--vault", str(VAULTS / "pipes"), "--input",
                            "text=x"]):
        result = run_cli(args, env, tmp_path, timeout_s=60)
        assert result.returncode == DatabaseUnreachable.exit_code, result
        assert "Traceback" not in result.stderr, result.stderr
        assert result.stderr.startswith("error: the database is unreachable"), result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_skillq_eval_waits_through_a_database_outage_and_keeps_its_report(
        outage_stack: Stack, tmp_path: Path) -> None:
    stack = outage_stack
    restart_worker(stack)
    vault = copy_vault(VAULTS / "pipes", tmp_path / "vault")
    release, pid_dir = tmp_path / "eval-release", tmp_path / "eval-pids"
    pid_dir.mkdir()
    (vault / "slow-chain" / "benchmarks.json").write_text(json.dumps({
        "skill": "slow-chain", "version": 1, "runs": [],
        "tests": [{"id": "held", "inputs": {"hold_s": HOLD_S, "pid_dir": str(pid_dir),
                                            "release": str(release)},
                   "expected": {"success": True, "label": "slow"}}]}))
    proc = stack.cli_popen("eval", "slow-chain", "--runs", "1", "--json", "--vault",
                           str(vault), cwd=tmp_path)
    try:
        wait_until(lambda: (pid_dir / "slow.pid").exists(), 60, "the eval's run to start")
        stop_postgres(stack.home)
        try:
            time.sleep(OUTAGE_S / 2)
            assert proc.poll() is None, proc.communicate()[1]  # still waiting it out
        finally:
            start_postgres(stack)
        release.touch()
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        release.touch()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, f"{stderr}\n{logs_of(stack)}"
    assert "Traceback" not in stderr, stderr
    assert stderr.count("database unreachable") == 1, stderr  # said once, not per try
    report = json.loads(stdout)
    assert (report["cases"][0]["runs"], report["cases"][0]["passed"]) == (1, 1)
    with stack.db() as session:
        (kept,) = session.query(EvalRecord).filter(EvalRecord.skill == "slow-chain")
        assert kept.pass_rate == 1.0
