"""Recovery for real: worker processes killed with SIGKILL in the middle of a step.

The stack (conftest.py) runs with SKILLQ_HEARTBEAT_S=0.5 and SKILLQ_DEAD_AFTER_S=3, so
the documented recovery bound (docs/running.md: a step held by a dead worker runs again
within dead_after_s plus the watchdog interval dead_after_s / 2) is 4.5 s here. The
timeouts below are hang guards; the one timing assert is that bound, with slack for
dispatching on a loaded machine.

To make "the worker running the step" a worker the test may kill, the session's
`default` worker is told (Celery remote control) to stop consuming a queue for a moment,
so the step lands on a spare worker started by the test; the session worker consumes
the queue again before the kill, so it is "another worker serving the same queue".
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import (
    DEAD_AFTER_S,
    HOST,
    VAULTS,
    WATCH_INTERVAL_S,
    Stack,
    Worker,
    WorkerSpec,
    copy_vault,
    gone_or_zombie,
    host_pid,
    kill_pids,
    proc_stat,
    wait_until,
)

from shared.db.models import StepRun

pytestmark = pytest.mark.integration

BOUND_S = DEAD_AFTER_S + WATCH_INTERVAL_S  # the documented recovery bound
SLACK_S = 10.0  # the planner pass, the broker and a busy 2-core CI machine; the
# alternative without recovery is the visibility timeout, hours away
BRPOP_S = 1.2  # kombu's Redis consumer blocks up to 1 s per BRPOP: let one in flight end
HOLD_CAP_S = 30  # a held step's script gives up after this: a hang guard


def running_row(stack: Stack, run_id: str, step_id: str, other_than: int | None = None
                ) -> StepRun:
    """The step's attempt once it runs (in a process other than ``other_than``)."""
    def find() -> StepRun | None:
        rows = [r for r in stack.steps(run_id, step_id) if r.state == "running"
                and r.worker_pid and r.worker_pid != other_than]
        return rows[-1] if rows else None

    found: StepRun = wait_until(find, 30, f"step {step_id} of {run_id} to run")
    return found


def slow_chain(stack: Stack, vault: Path, cwd: Path, pid_dir: Path, release: Path,
               *extra: str) -> subprocess.Popen[str]:
    """slow-chain in the background: its first step holds until ``release`` exists."""
    return stack.cli_popen("run", "slow-chain", "--vault", str(vault), "--input",
                           f"hold_s={HOLD_CAP_S}", "--input", f"pid_dir={pid_dir}",
                           "--input", f"release={release}", *extra, cwd=cwd)


def read_pid(path: Path) -> int:
    """A pid a step's script wrote, as this process sees it (steps run in a PID namespace
    of their own: conftest.host_pid)."""
    written = int(wait_until(lambda: path.exists() and path.read_text(), 10, f"{path}"))
    found = wait_until(lambda: host_pid(written, str(path.parent)), 10,
                       f"the process that wrote {path} ({written} in its sandbox)")
    return int(found)


def parent_of(pid: int) -> int | None:
    fields = proc_stat(pid)
    return int(fields[1]) if fields else None


def received(worker: Worker, task_id: str) -> int:
    pattern = re.compile(rf"Task skillq\.execute_step\[{re.escape(task_id)}\] received")
    return len(pattern.findall(worker.log.read_text(errors="replace")))


@contextlib.contextmanager
def steered(stack: Stack, queues: tuple[str, ...], spare: WorkerSpec) -> Iterator[Worker]:
    """A spare worker that alone consumes ``queues`` until the caller resumes the session
    worker (or the block ends); the spare is stopped on the way out."""
    worker = stack.start_worker(spare)
    try:
        stack.wait_ready([spare.name])
        for queue in queues:
            stack.consumer("default", queue, on=False)
        time.sleep(BRPOP_S)
        yield worker
    finally:
        resume(stack, queues)
        worker.stop(timeout_s=5)


def resume(stack: Stack, queues: tuple[str, ...]) -> None:
    for queue in queues:
        stack.consumer("default", queue, on=True)


def test_killed_pool_process_step_is_redelivered(healthy: Stack, vault: Path,
                                                 tmp_path: Path) -> None:
    stack = healthy
    pid_dir, release = tmp_path / "pids", tmp_path / "release"
    pid_dir.mkdir()
    before = stack.run_ids("slow-chain")
    cli = slow_chain(stack, vault, tmp_path, pid_dir, release, "--json")
    orphan = None
    try:
        run_id = stack.new_run("slow-chain", before)
        row = running_row(stack, run_id, "slow")
        default = stack.workers["default"]
        assert row.worker_pid in default.pool()  # a pool process of the default worker
        orphan = read_pid(pid_dir / "slow.pid")
        assert stack.is_script(orphan)  # running in a scratch folder under the stack's TMPDIR
        stack.tainted.add("default")  # see test_steps_still_run_after_the_pool_is_replaced
        kill_pids([row.worker_pid])
        # the redelivered attempt holds too: let it go once it runs in another process
        running_row(stack, run_id, "slow", other_than=row.worker_pid)
        release.touch()
        stdout, stderr = cli.communicate(timeout=60)
    finally:
        release.touch()
        if cli.poll() is None:
            cli.kill()
        if orphan:
            stack.kill_scripts([orphan])
    assert cli.returncode == 0, stderr
    assert json.loads(stdout)["outputs"] == {"label": "slow"}

    assert stack.run(run_id).state == "succeeded"
    slow = stack.steps(run_id, "slow")
    succeeded = [r for r in slow if r.state == "succeeded"]
    assert len(succeeded) == 1, [(r.id, r.state) for r in slow]  # one successful record
    assert succeeded[0].worker_pid != row.worker_pid
    assert all(r.state in ("succeeded", "lost") for r in slow)
    print("attempts:", [(r.attempt, r.state) for r in slow])
    # The message came back (reject_on_worker_lost) and was delivered again.
    # On a loaded machine the run may finish (through the watchdog's attempt 2) before the
    # requeued message is taken again: wait for it rather than race it.
    wait_until(lambda: received(default, row.id) >= 2, 30, "the killed step's redelivery")
    assert [r.state for r in stack.steps(run_id, "then")] == ["succeeded"]
    assert default.alive()
    wait_until(lambda: len(default.pool()) == 2, 10, "the pool to be whole again")


# Regression (bug at 03fc86d): the killed pool process's script kept running beside
# the redelivered attempt (two dom0 scripts at once).
def test_killed_pool_process_leaves_no_script_running(healthy: Stack, vault: Path,
                                                      tmp_path: Path) -> None:
    stack = healthy
    pid_dir, release = tmp_path / "pids", tmp_path / "release"
    pid_dir.mkdir()
    proc = stack.cli("run", "dom0-stamp", "--vault", str(vault), "--input", "label=orphan",
                     "--input", f"hold_s={HOLD_CAP_S}", "--input", f"pid_dir={pid_dir}",
                     "--input", f"until_file={release}", "--detach", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()
    script = None
    try:
        row = running_row(stack, run_id, "dom0-stamp")
        assert row.worker_pid in stack.workers["dom0"].pool()
        script = read_pid(pid_dir / "orphan.pid")
        stack.tainted.add("dom0")  # see test_steps_still_run_after_the_pool_is_replaced
        kill_pids([row.worker_pid])
        again = running_row(stack, run_id, "dom0-stamp", other_than=row.worker_pid)
        # The redelivered attempt runs on the dom0 worker: the old script must be gone.
        assert again.worker_pid in stack.workers["dom0"].pool()
        wait_until(lambda: read_pid(pid_dir / "orphan.pid") != script, 10,
                   "the redelivered attempt's script")
        time.sleep(1.0)
        assert gone_or_zombie(script), \
            f"script pid {script} of the killed pool process still runs beside its retry"
    finally:
        release.touch()
        stack.wait_run(run_id)
        if script:
            stack.kill_scripts([script])


@dataclass
class KilledWorker:
    run_id: str
    cli: subprocess.CompletedProcess[str]
    killed_at: float  # epoch seconds
    killed_pid: int  # the pool process that ran attempt 1
    script: int  # attempt 1's script
    script_alive_beside_retry: bool


@pytest.fixture(scope="module")
def killed_worker(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> KilledWorker:
    """slow-chain's first step runs on a spare `default` worker, which is then killed with
    SIGKILL (main process and pool at once) while the session's default worker serves the
    queue again. Shared by the tests reading the outcome."""
    stack.ensure_standard_workers()
    tmp = tmp_path_factory.mktemp("killed-worker")
    tmp.chmod(0o777)  # the sandboxed script writes its pid here (conftest.step_writable_tmp_path)
    vault_path = copy_vault(VAULTS / "pipes", tmp / "vault")
    pid_dir, release = tmp / "pids", tmp / "release"
    pid_dir.mkdir(mode=0o777)
    pid_dir.chmod(0o777)
    script = None
    with steered(stack, ("default",), WorkerSpec("spare-default", "default", 1)) as spare:
        before = stack.run_ids("slow-chain")
        cli = slow_chain(stack, vault_path, tmp, pid_dir, release, "--json")
        try:
            run_id = stack.new_run("slow-chain", before)
            row = running_row(stack, run_id, "slow")
            assert row.worker_pid in spare.pool(), "the step did not land on the spare"
            script = read_pid(pid_dir / "slow.pid")
            resume(stack, ("default",))  # the other worker serving the queue
            wait_until(lambda: (r := stack.steps(run_id, "slow")[0]).heartbeat_at
                       and r.started_at and r.heartbeat_at > r.started_at, 10,
                       "a heartbeat")
            killed_at = time.time()
            victims = spare.kill9()  # the main process and its pool at once
            assert row.worker_pid in victims
            wait_until(lambda: all(gone_or_zombie(p) for p in victims), 5, "the kill")
            running_row(stack, run_id, "slow", other_than=row.worker_pid)
            wait_until(lambda: read_pid(pid_dir / "slow.pid") != script, 10,
                       "the next attempt's script")
            time.sleep(0.5)
            alive = stack.is_script(script)
            release.touch()
            stdout, stderr = cli.communicate(timeout=90)
        finally:
            release.touch()
            if cli.poll() is None:
                cli.kill()
            if script:
                stack.kill_scripts([script])
    done = subprocess.CompletedProcess(cli.args, cli.returncode, stdout, stderr)
    return KilledWorker(run_id, done, killed_at, row.worker_pid, script, alive)


def test_killed_worker_step_is_redispatched_within_the_bound(
        stack: Stack, killed_worker: KilledWorker) -> None:
    cli, run_id = killed_worker.cli, killed_worker.run_id
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["outputs"] == {"label": "slow"}

    assert stack.run(run_id).state == "succeeded"
    lost, again = stack.steps(run_id, "slow")
    assert (lost.attempt, lost.state, lost.error_kind) == (1, "lost", "lost")
    assert lost.worker_pid == killed_worker.killed_pid
    assert "stopped sending heartbeats" in (lost.error or "")
    assert (again.attempt, again.state) == (2, "succeeded")
    assert again.worker_pid is not None
    assert parent_of(again.worker_pid) == stack.workers["default"].pid  # the other worker
    took = again.created_at.timestamp() - killed_worker.killed_at
    print(f"re-dispatched {took:.2f}s after the kill (bound {BOUND_S:g}s)")
    assert took <= BOUND_S + SLACK_S
    assert lost.heartbeat_at is not None
    assert (again.created_at - lost.heartbeat_at).total_seconds() >= DEAD_AFTER_S  # not early
    assert [r.state for r in stack.steps(run_id, "then")] == ["succeeded"]  # one each


# Regression (bug at bd6a0e3): step_runner.kill_leftovers ran only when the same attempt
# was redelivered, so a dead worker's script ran on beside the re-dispatched attempt 2.
def test_killed_worker_script_does_not_outlive_it(killed_worker: KilledWorker) -> None:
    assert not killed_worker.script_alive_beside_retry, \
        f"attempt 1's script (pid {killed_worker.script}) ran beside attempt 2"


# Regression (bug at 03fc86d): the watch message died with the worker holding it and
# the run hung until the Redis visibility timeout (2 h 10 min by default).
def test_watchdog_survives_the_death_of_the_worker_holding_it(healthy: Stack, vault: Path,
                                                              tmp_path: Path) -> None:
    stack = healthy
    pid_dir, release = tmp_path / "pids", tmp_path / "release"
    pid_dir.mkdir()
    run_id = script = None
    queues = ("default", "control")
    try:
        with steered(stack, queues, WorkerSpec("spare-control", "default,control", 2)
                     ) as spare:
            proc = slow_chain(stack, vault, tmp_path, pid_dir, release, "--detach")
            stdout, stderr = proc.communicate(timeout=60)
            assert proc.returncode == 0, stderr
            run_id = stdout.strip()
            row = running_row(stack, run_id, "slow")
            assert row.worker_pid in spare.pool()
            script = read_pid(pid_dir / "slow.pid")
            wait_until(lambda: stack.run(run_id).watch_at, 10, "the watchdog to be armed")
            held = stack.app.control.inspect(timeout=1, destination=[spare.node]
                                             ).scheduled() or {}
            assert any(t["request"]["args"] == [run_id] for t in held.get(spare.node, [])), \
                "the spare does not hold the run's watch"
            resume(stack, queues)  # a live worker serves both queues again
            spare.kill9()
            # Documented: running again within dead_after_s + dead_after_s / 2.
            wait_until(lambda: len(stack.steps(run_id, "slow")) > 1, BOUND_S + SLACK_S,
                       "the step of the dead worker to be re-dispatched")
    finally:
        release.touch()
        if script:
            stack.kill_scripts([script])
        if run_id:  # any advance revives it: leave no hung run behind
            stack.app.send_task("skillq.advance", args=(run_id,), queue="control")
            stack.wait_run(run_id)


# Regression (bug at fb480e7): the sweeper opened an engine in the worker's main process and
# nothing disposed it after fork, so a replacement pool process shared its parent's
# PostgreSQL sockets ("connection in transaction status INTRANS"); an item stayed pending.
def test_steps_still_run_after_the_pool_is_replaced(healthy: Stack, vault: Path,
                                                     tmp_path: Path) -> None:
    stack = healthy
    default = stack.workers["default"]
    old = default.pool()
    time.sleep(2 * WATCH_INTERVAL_S)  # the main process has swept the database by now
    stack.tainted.add("default")
    kill_pids(old)  # Celery forks two new pool processes from the main process
    wait_until(lambda: len(new := default.pool()) == 2 and not set(new) & set(old), 10,
               "a new pool")
    items = json.dumps([f"i{n}" for n in range(8)])
    for _ in range(2):  # parent and children collide at random: two chances to show it
        proc = stack.cli("run", "skip-failures", "--vault", str(vault), "--input",
                         f"items={items}", "--detach", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        run = stack.wait_run(proc.stdout.strip(), timeout_s=8)  # ~1 s when it works
        assert run.state == "succeeded", run.error


# Regression (bug at c05d789): a retry was sent as a countdown message, which the worker
# that reserved it keeps in memory; killed, the attempt stayed 'pending' for the Redis
# visibility timeout (2 h 10 min by default).
def test_a_retry_scheduled_on_a_worker_that_dies_still_runs(healthy: Stack, vault: Path,
                                                             tmp_path: Path) -> None:
    """A retry waiting for its backoff while the only worker of its queue dies runs anyway,
    on the other worker, within its due time plus the recovery bound."""
    stack = healthy
    counter_dir = tmp_path / "counter"
    counter_dir.mkdir()
    run_id = stranded = None
    try:
        with steered(stack, ("default",), WorkerSpec("spare-retry", "default", 1)) as spare:
            proc = stack.cli("run", "flaky", "--vault", str(vault), "--input",
                             f"counter_dir={counter_dir}", "--input", "succeed_on=4",
                             "--detach", cwd=tmp_path)
            assert proc.returncode == 0, proc.stderr
            run_id = proc.stdout.strip()

            def waiting_retry() -> StepRun | None:
                # attempt 3 waits 1-3 s, attempt 4 2-6 s: time enough to kill its holder
                for row in stack.steps(run_id):
                    if row.state == "pending" and row.attempt >= 3 and row.not_before and \
                            row.not_before.timestamp() > time.time() + 0.8:
                        return row
                return None

            stranded = wait_until(waiting_retry, 30, "a retry waiting for its backoff")
            resume(stack, ("default",))  # a live worker serves the queue again
            spare.kill9()
        assert stranded.not_before is not None
        due_in = stranded.not_before.timestamp() - time.time()
        wait_until(lambda: stack.steps(run_id)[-1].state != "pending",
                   due_in + BOUND_S + SLACK_S, f"attempt {stranded.attempt} to run")
        assert stack.wait_run(run_id).state == "succeeded"
        rows = stack.steps(run_id)
        assert [r.attempt for r in rows] == list(range(1, len(rows) + 1))
        assert rows[-1].worker == f"default@{HOST}"  # the worker that survived
    finally:
        if stranded is not None and run_id and stack.run(run_id).state == "running":
            # what nothing in skillq does: send the stranded attempt again
            stack.app.send_task("skillq.execute_step", args=(stranded.id,), queue="default",
                                task_id=stranded.id)
        if run_id:
            stack.wait_run(run_id)


def test_attempts_whose_messages_vanished_are_sent_again(healthy: Stack, vault: Path,
                                                         tmp_path: Path) -> None:
    """Pending attempts whose messages are gone from the broker (here purged; in life,
    reserved by a worker that then died, which Redis gives back only after its visibility
    timeout) run anyway: the watchdog sends them again once their queue is empty."""
    stack = healthy
    proc = stack.cli("run", "dom0-five", "--vault", str(vault), "--input",
                     'labels=["a","b","c","d"]', "--input", "hold_s=1.5", "--detach",
                     cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()
    wait_until(lambda: any(r.state == "running" for r in stack.steps(run_id)), 30,
               "the first dom0 item to start")
    with stack.app.connection_for_write() as conn:
        purged = conn.default_channel.queue_purge("dom0")
    assert purged, "the other items' messages were not waiting in the dom0 queue"
    final = stack.wait_run(run_id)
    assert final.state == "succeeded", final.error
    rows = stack.steps(run_id, "each")
    assert sorted(r.item_index for r in rows if r.state == "succeeded") == [0, 1, 2, 3]
    assert all(r.attempt == 1 for r in rows)  # the same attempts, sent again, not new ones
