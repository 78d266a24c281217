"""RabbitMQ as the broker, for real: the machine's RabbitMQ on a vhost of this module's
own, or a RabbitMQ started for the tests where none answers (support/rabbitmq.py), with
PostgreSQL and the result backend (Redis, as docs/scaling.md advises a RabbitMQ
deployment to keep) embedded, and the standard workers.

Beside a plain pipeline run, the recovery tests of test_recovery.py where RabbitMQ
differs from Redis: a worker killed in the middle of a step hands its message back at
once (no visibility timeout to wait out), and a retry's backoff is spent in RabbitMQ's
delayed-delivery queues, not in a worker's memory. A broker crash: test_rabbitmq_restart.py.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from amqp.exceptions import PreconditionFailed
from celery import Celery
from conftest import HOST, STANDARD_WORKERS, Stack, WorkerSpec, running_stack, wait_until
from kombu import Connection, Queue
from support.rabbitmq import Broker, rabbitmq
from test_recovery import read_pid, received, resume, running_row, slow_chain, steered

from lifecycle import canvas
from shared.celery_app import (
    DELIVERY_LIMIT,
    EXCHANGE,
    NORMAL_PRIORITY,
    URGENT_PRIORITY,
    create_app,
    queue,
)
from shared.queues import CONTROL_QUEUE, QueueClass
from shared.settings import Settings

pytestmark = pytest.mark.integration

QUEUES = [q.value for q in QueueClass] + [CONTROL_QUEUE]
TERMINAL = ("succeeded", "failed", "cancelled")
EVENTS_WAIT_S = 5.0
SERVED = sorted({q for spec in STANDARD_WORKERS for q in spec.queues.split(",")})


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Broker, str]]:
    with rabbitmq(tmp_path_factory.mktemp("rabbitmq"), "stack") as found:
        yield found


@pytest.fixture(scope="module")
def rabbit(broker: tuple[Broker, str], tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("rabbit-home"), broker_url=broker[1],
                       redis_results=True) as built:
        yield built


@pytest.fixture
def on_rabbit(rabbit: Stack) -> Stack:
    """The RabbitMQ stack with every standard worker alive and consuming its queues."""
    rabbit.ensure_standard_workers()
    return rabbit


def declare(url: str, name: str, arguments: dict[str, Any]) -> str | None:
    """None when ``name`` can be declared with these arguments, else RabbitMQ's refusal."""
    with Connection(url) as conn:
        try:
            Queue(name, queue(name, quorum=True).exchange, routing_key=name,
                  queue_arguments=arguments)(conn.channel()).declare()
        except PreconditionFailed as exc:
            return str(exc)
    return None


def cli_json(stack: Stack, cwd: Path, *args: str) -> tuple[Any, str]:
    done = stack.cli(*args, "--json", cwd=cwd)
    assert done.returncode == 0, f"{done.stderr}\n{done.stdout}"
    printed = json.loads(done.stdout)
    return printed["outputs"], printed["run_id"]


# -- queues, exchanges, remote control ------------------------------------------------------

def test_every_queue_is_a_quorum_queue_on_the_topic_exchange(on_rabbit: Stack,
                                                             broker: tuple[Broker, str]
                                                             ) -> None:
    replies = on_rabbit.app.control.inspect(timeout=5).active_queues() or {}
    consumed = {q["name"]: q for queues in replies.values() for q in queues}
    # every class and every worker's own per-daemon queue (workers/main.py daemon_queues)
    assert set(SERVED) | {f"{q}@{HOST}" for q in SERVED} <= set(consumed), sorted(consumed)
    for name, q in consumed.items():
        assert q["queue_arguments"] == {"x-queue-type": "quorum",
                                        "x-delivery-limit": DELIVERY_LIMIT}, name
        assert (q["exchange"]["name"], q["exchange"]["type"], q["routing_key"]) == \
            (EXCHANGE, "topic", name), name
        assert q["durable"] and not q["auto_delete"] and not q["exclusive"], name
    # ...and so they are on the server: redeclared alike they pass, as classic ones not
    url = broker[1]
    for name in [*QUEUES, f"default@{HOST}"]:
        assert declare(url, name, {"x-queue-type": "quorum",
                                   "x-delivery-limit": DELIVERY_LIMIT}) is None, name
        refused = declare(url, name, {"x-queue-type": "classic"})
        assert refused and "current is 'quorum'" in refused, (name, refused)


def test_remote_control_and_events_work_beside_quorum_queues(on_rabbit: Stack) -> None:
    """ping, inspect and add/cancel_consumer (the stack's own helpers use them) go through
    the pidbox's fanout exchange; Flower's events through a queue of their own. Neither
    may be a quorum queue (transient, auto-deleted): both work."""
    app = on_rabbit.app
    nodes = {f"{spec.name}@{HOST}" for spec in STANDARD_WORKERS}
    pinged = {node for reply in app.control.ping(timeout=2) or [] for node in reply}
    assert nodes <= pinged
    on_rabbit.consumer("default", QueueClass.GPU.value, on=True)  # add_consumer
    on_rabbit.consumer("default", QueueClass.GPU.value, on=False)  # cancel_consumer
    app.control.enable_events()
    seen: list[dict[str, Any]] = []
    sent: list[str] = []
    with app.connection_for_read() as conn:
        receiver = app.events.Receiver(conn, handlers={"*": seen.append})

        def ours() -> set[str]:
            return {e["type"] for e in seen if sent and e.get("uuid") == sent[0]}

        def listen() -> None:
            with contextlib.suppress(TimeoutError):
                receiver.capture(limit=None, timeout=EVENTS_WAIT_S)

        receiver.on_iteration = lambda: setattr(  # type: ignore[method-assign]
            receiver, "should_stop", "task-succeeded" in ours())
        listener = threading.Thread(target=listen, daemon=True)
        try:
            listener.start()
            time.sleep(1.0)  # its queue declared and consumed
            sent.append(app.send_task("skillq.ping", queue=CONTROL_QUEUE).id)
            listener.join(EVENTS_WAIT_S + 10)
        finally:
            receiver.should_stop = True
            listener.join(5)
            app.control.disable_events()
    assert {"task-received", "task-succeeded"} <= ours(), [e["type"] for e in seen]


# -- runs --------------------------------------------------------------------------------

def test_a_pipeline_runs_through_rabbitmq(on_rabbit: Stack, vault: Path,
                                         tmp_path: Path) -> None:
    items = [{"text": "a", "delay_s": 0.5}, {"text": "b", "delay_s": 0.2},
             {"text": "c", "delay_s": 0}]
    outputs, run_id = cli_json(on_rabbit, tmp_path, "run", "branches", "--vault", str(vault),
                               "--input", f"items={json.dumps(items)}")
    assert outputs == {"collected": ["a", "b", "c"], "left_texts": ["a", "b", "c"],
                       "right_texts": ["a", "b", "c"]}
    assert on_rabbit.run(run_id).state == "succeeded"
    fan = on_rabbit.steps(run_id, "fan")
    assert [(r.item_index, r.attempt, r.state) for r in fan] == \
        [(0, 1, "succeeded"), (1, 1, "succeeded"), (2, 1, "succeeded")]
    # dom0, at concurrency 1 with per-consumer prefetch: one at a time, in its worker
    outputs, run_id = cli_json(on_rabbit, tmp_path, "run", "dom0-five", "--vault",
                               str(vault), "--input", 'labels=["d0","d1","d2"]')
    assert outputs["labels"] == ["d0", "d1", "d2"]
    spans = sorted(zip(outputs["starts"], outputs["ends"], strict=True))
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), spans
    assert {r.worker for r in on_rabbit.steps(run_id, "each")} == {f"dom0@{HOST}"}


def test_a_worker_killed_mid_step_hands_its_message_back_at_once(
        on_rabbit: Stack, vault: Path, tmp_path: Path) -> None:
    """On Redis the killed worker's message stays away for the visibility timeout and the
    watchdog re-dispatches the step as attempt 2 (test_recovery.py). RabbitMQ gives it
    back as the connection closes: the other worker takes the same attempt's message,
    finds its process dead on this machine and runs it again; the run completes once."""
    stack = on_rabbit
    pid_dir, release = tmp_path / "pids", tmp_path / "release"
    pid_dir.mkdir()
    default = stack.workers["default"]
    script = None
    with steered(stack, ("default",), WorkerSpec("spare-default", "default", 1)) as spare:
        before = stack.run_ids("slow-chain")
        cli = slow_chain(stack, vault, tmp_path, pid_dir, release, "--json")
        try:
            run_id = stack.new_run("slow-chain", before)
            row = running_row(stack, run_id, "slow")
            assert row.worker_pid in spare.pool(), "the step did not land on the spare"
            script = read_pid(pid_dir / "slow.pid")
            assert received(default, row.id) == 0
            resume(stack, ("default",))  # the other worker serving the queue
            killed_at = time.monotonic()
            spare.kill9()  # the main process and its pool at once
            wait_until(lambda: received(default, row.id) >= 1, 15,
                       "the killed worker's message to reach the other worker")
            took = time.monotonic() - killed_at
            again = running_row(stack, run_id, "slow", other_than=row.worker_pid)
            assert again.worker_pid in default.pool()
            wait_until(lambda: read_pid(pid_dir / "slow.pid") != script, 10,
                       "the redelivered attempt's script")
            time.sleep(0.5)
            assert not stack.is_script(script), "the killed attempt's script runs on"
            release.touch()
            stdout, stderr = cli.communicate(timeout=90)
        finally:
            release.touch()
            if cli.poll() is None:
                cli.kill()
            if script:
                stack.kill_scripts([script])
    print(f"the message was back {took:.2f}s after the kill")
    assert cli.returncode == 0, stderr
    assert json.loads(stdout)["outputs"] == {"label": "slow"}
    assert stack.run(run_id).state == "succeeded"
    slow = stack.steps(run_id, "slow")
    assert [r.state for r in slow if r.state == "succeeded"] == ["succeeded"], \
        [(r.id, r.state) for r in slow]
    assert all(r.state in ("succeeded", "lost") for r in slow)
    assert [r.state for r in stack.steps(run_id, "then")] == ["succeeded"]


def test_a_retry_waits_out_its_backoff_in_rabbitmq(on_rabbit: Stack, vault: Path,
                                                  tmp_path: Path) -> None:
    """The backoff is a watch message with a countdown; on quorum queues it goes through
    RabbitMQ's delayed-delivery queues, so no worker holds it (Redis: the control worker
    keeps it in memory, scheduled)."""
    stack = on_rabbit
    counter_dir = tmp_path / "counter"
    counter_dir.mkdir()
    proc = stack.cli("run", "flaky", "--vault", str(vault), "--input",
                     f"counter_dir={counter_dir}", "--input", "succeed_on=3", "--detach",
                     cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()
    waits, deadline = 0, time.monotonic() + 60
    while stack.run(run_id).state not in TERMINAL and time.monotonic() < deadline:
        waiting = [r for r in stack.steps(run_id) if r.state == "pending" and r.not_before
                   and r.not_before.timestamp() > time.time() + 0.2]
        asked = datetime.now(UTC)
        scheduled = stack.app.control.inspect(timeout=1, limit=len(STANDARD_WORKERS)
                                              ).scheduled() or {}
        # A message RabbitMQ hands over at its due time sits in the worker's timer for a
        # moment before it runs; one held through its delay is due well after the ask.
        held = {node: due for node, entries in scheduled.items()
                for due in [e["eta"] for e in entries]
                if datetime.fromisoformat(due) > asked + timedelta(seconds=0.5)}
        if waiting:
            waits += 1
            assert not held, f"a worker holds a delayed message: {held} (asked {asked})"
        time.sleep(0.05)
    assert waits, "never saw a retry waiting for its backoff"
    assert stack.wait_run(run_id).state == "succeeded"
    rows = stack.steps(run_id)
    assert [(r.attempt, r.state, r.exit_code) for r in rows] == \
        [(1, "retrying", 75), (2, "retrying", 75), (3, "succeeded", 0)]
    for failed, retry in itertools.pairwise(rows):
        assert failed.not_before is not None and retry.started_at is not None
        assert retry.started_at >= failed.not_before  # the backoff was waited out


def test_a_countdown_under_a_second_is_sent_and_runs(on_rabbit: Stack) -> None:
    """Celery routes a countdown by its whole seconds and refused one under a second
    (int(0.4) is 0): a watch falling due within the second would not be sent."""
    sent = on_rabbit.app.send_task("skillq.ping", queue=CONTROL_QUEUE, countdown=0.4)
    default = on_rabbit.workers["default"]
    wait_until(lambda: f"skillq.ping[{sent.id}] succeeded" in default.log.read_text(
        errors="replace"), 15, "the delayed ping to run")


# -- the broker alone (a vhost no worker consumes) --------------------------------------------

@pytest.fixture(scope="module")
def probe_url(broker: tuple[Broker, str]) -> Iterator[str]:
    with broker[0].vhost("probe") as url:
        yield url


@pytest.fixture
def probe_app(probe_url: str, tmp_path: Path) -> Iterator[Celery]:
    """An app on the probe vhost, every queue declared and empty."""
    app = create_app(Settings(_env_file=None, home=tmp_path / "home"), broker_url=probe_url)
    with app.connection_for_write() as conn:
        for q in app.amqp.queues.values():
            q(conn.default_channel).declare()
            q(conn.default_channel).purge()
    try:
        yield app
    finally:
        app.close()


def publish(app: Celery, exchange: str, routing_key: str) -> None:
    with app.producer_or_acquire() as producer:
        producer.publish({"probe": routing_key}, exchange=exchange, routing_key=routing_key,
                         serializer="json")


def test_a_publish_reaches_the_queue_its_key_names_and_no_other(probe_app: Celery) -> None:
    expected = dict.fromkeys(QUEUES, 0)
    for name in QUEUES:
        publish(probe_app, EXCHANGE, name)
        expected[name] += 1
        assert {q: canvas.queue_depth(probe_app, q) for q in QUEUES} == expected, name
    assert canvas.queue_depth(probe_app, "no-such-queue") == 0


def test_a_queue_made_on_demand_is_alike_and_priorities_are_turned_round(
        probe_app: Celery) -> None:
    """A per-daemon queue first named by a sender is a quorum queue on the same exchange;
    skillq's urgent (0, first on Redis) leaves as AMQP's 9, its normal (5) as 4
    (RabbitMQ 4's quorum queues take 5-9 first)."""
    name = "dom0@probe-daemon"
    for priority in (URGENT_PRIORITY, NORMAL_PRIORITY):
        probe_app.send_task("skillq.ping", queue=name, priority=priority)
    made = probe_app.amqp.queues[name]
    assert (made.exchange.name, made.exchange.type, made.queue_arguments) == \
        (EXCHANGE, "topic", {"x-queue-type": "quorum", "x-delivery-limit": DELIVERY_LIMIT})
    with probe_app.connection_for_write() as conn:
        channel = conn.default_channel
        got = [channel.basic_get(name, no_ack=True) for _ in range(2)]
    assert [m.properties.get("priority") for m in got] == [9, 4]
    assert [m.delivery_info["routing_key"] for m in got] == [name, name]
