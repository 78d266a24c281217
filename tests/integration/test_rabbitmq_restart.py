"""A RabbitMQ crash under running work, for real: a RabbitMQ of this module's own
(support/rabbitmq.py own_server: one the test may SIGKILL and start again on the same
data and port), the embedded PostgreSQL, no Redis anywhere (Celery results off: skillq
needs none), the standard workers.

While a step runs and other messages wait in their queue, the broker is killed and
started again. The workers reconnect by themselves; the queued messages are still there
(quorum queues keep them on disk); the running step runs on (skillq does not cancel a
step when the broker connection drops) and its message, handed back by the crash, is
recognised as a duplicate when it comes again: every step and item succeeds once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from amqp.exceptions import AMQPError
from conftest import STANDARD_WORKERS, Stack, nodename, running_stack, wait_until
from kombu import Connection
from kombu.exceptions import OperationalError
from support.rabbitmq import OwnServer, own_server
from test_recovery import read_pid, running_row, slow_chain

from lifecycle import canvas
from shared.queues import QueueClass

pytestmark = pytest.mark.integration

DOM0_ITEMS = 5  # one runs through the crash, the others wait in the dom0 queue
DOM0_HOLD_S = 3.0
RECONNECT_S = 120.0  # Celery retries the broker every 2, 4, 6 ... s; a restart takes 10-20


def reconnected(stack: Stack) -> set[str]:
    """The standard workers answering a ping, asked over a new connection: this process's
    pooled ones died with the broker, and Celery's remote control does not reconnect a
    dead one (kombu keeps one pool per URL for every app of the process)."""
    nodes = [nodename(s.name) for s in STANDARD_WORKERS]
    try:
        with Connection(stack.endpoints.broker_url, connect_timeout=2) as conn:
            replies = stack.app.control.ping(destination=nodes, timeout=0.5,
                                             connection=conn) or []
    except (OSError, OperationalError, AMQPError):  # the server not back yet
        return set()
    return {node for reply in replies for node in reply}


def queued(stack: Stack) -> int:
    """The dom0 queue's depth; 0 while the broker does not answer."""
    try:
        return canvas.queue_depth(stack.app, QueueClass.DOM0.value)
    except (OSError, OperationalError, AMQPError):
        return 0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnServer]:
    with own_server(tmp_path_factory.mktemp("rabbitmq-own")) as started:
        yield started


@pytest.fixture(scope="module")
def crash_stack(server: OwnServer, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("crash-home"), broker_url=server.url("/")
                       ) as built:
        yield built


def test_a_broker_crash_under_running_work_is_survived(
        crash_stack: Stack, server: OwnServer, vault: Path, tmp_path: Path) -> None:
    stack = crash_stack
    assert type(stack.app.backend).__name__ == "DisabledBackend"  # no Redis here
    pid_dir, release = tmp_path / "pids", tmp_path / "release"
    pid_dir.mkdir()
    before = stack.run_ids("slow-chain")
    cli = slow_chain(stack, vault, tmp_path, pid_dir, release, "--json")
    try:
        run_id = stack.new_run("slow-chain", before)
        held = running_row(stack, run_id, "slow")
        script = read_pid(pid_dir / "slow.pid")
        labels = json.dumps([f"q{n}" for n in range(DOM0_ITEMS)])
        detached = stack.cli("run", "dom0-five", "--vault", str(vault), "--input",
                             f"labels={labels}", "--input", f"hold_s={DOM0_HOLD_S}",
                             "--detach", cwd=tmp_path)
        assert detached.returncode == 0, detached.stderr
        fan_id = detached.stdout.strip()
        wait_until(lambda: any(r.state == "running" for r in stack.steps(fan_id)), 30,
                   "the first dom0 item to run")

        wait_until(lambda: queued(stack) >= DOM0_ITEMS - 2, 30,
                   "the waiting dom0 items to be in their queue")

        server.kill()  # SIGKILL: a crash, not a shutdown
        time.sleep(1.0)
        server.start()  # same node, data directory and port
        # The waiting dom0 items are still queued: a quorum queue keeps them on disk. A
        # restarted queue reports its messages once it has recovered its log (at first
        # it may say 0), and the dom0 worker takes one per DOM0_HOLD_S meanwhile.
        wait_until(lambda: queued(stack) >= 1, 20, "the queued dom0 items after the restart",
                   every_s=0.2)
        wanted = {nodename(s.name) for s in STANDARD_WORKERS}
        wait_until(lambda: reconnected(stack) >= wanted, RECONNECT_S,
                   "every worker to reconnect", every_s=0.5)
        assert stack.is_script(script), "the running step was stopped by the crash"
        release.touch()
        stdout, stderr = cli.communicate(timeout=120)
    finally:
        release.touch()
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 0, stderr
    assert json.loads(stdout)["outputs"] == {"label": "slow"}
    # the step ran once, through the crash: attempt 1, never cancelled, never run again
    assert [(r.attempt, r.state) for r in stack.steps(run_id, "slow")] == [(1, "succeeded")]
    assert stack.steps(run_id, "slow")[0].worker_pid == held.worker_pid
    assert [r.state for r in stack.steps(run_id, "then")] == ["succeeded"]

    fan = stack.wait_run(fan_id, timeout_s=120)
    assert fan.state == "succeeded", fan.error
    rows = stack.steps(fan_id, "each")
    assert sorted((r.item_index, r.attempt, r.state) for r in rows) == [
        (i, 1, "succeeded") for i in range(DOM0_ITEMS)], [(r.id, r.state) for r in rows]
