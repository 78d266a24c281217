"""Signed task messages (docs/security.md, "Messages between daemons"), end to end.

A worker of its own serves the ``signing`` queue (SKILLQ_KEY_REFRESH_S=1, so a revocation
shows within a second). Every message sent to it asks for ``skillq.whoami``, whose result
(the node's name, in the result backend) is the proof that it ran; a refused message
leaves no result, is logged once by the worker with its reason and key, and is not
requeued. Keys are enrolled and revoked through the real CLI.
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery
from conftest import HOST, Stack, Worker, WorkerSpec, nodename, wait_until

from lifecycle import canvas
from shared import daemon_key
from shared.celery_app import create_app
from shared.envelope import CONTENT_TYPE, open_envelope, seal
from shared.replay import PREFIX as DONE_PREFIX
from shared.settings import Settings

QUEUE = "signing"
SPEC = WorkerSpec("signing", QUEUE, 1)
REFRESH_S = 1.0
NODE = nodename(SPEC.name)


@pytest.fixture(scope="module")
def worker(stack: Stack) -> Iterator[Worker]:
    saved = dict(stack.env)
    stack.env["SKILLQ_KEY_REFRESH_S"] = str(REFRESH_S)
    try:
        started = stack.start_worker(SPEC)
    finally:
        stack.env.clear()
        stack.env.update(saved)
    try:
        stack.wait_ready([SPEC.name])
        yield started
    finally:
        started.stop()
        stack.workers.pop(SPEC.name, None)


@pytest.fixture
def foreign(stack: Stack, tmp_path: Path) -> Iterator[tuple[Celery, daemon_key.DaemonKey]]:
    """An app signing with a SKILLQ_HOME of its own, whose key no process enrolled."""
    home = tmp_path / "foreign-home"
    app = create_app(Settings(_env_file=None, home=home), broker_url=stack.endpoints.broker_url,
                     result_backend=stack.endpoints.result_backend)
    try:
        yield app, daemon_key.load_or_create(home)
    finally:
        app.close()


def log_lines(worker: Worker, needle: str) -> list[str]:
    return [line for line in worker.log.read_text(errors="replace").splitlines()
            if needle in line]


def refusal(worker: Worker, task_id: str) -> str:
    """The worker's one line refusing the message of ``task_id`` (waited for)."""
    needle = f"[{task_id}] from queue "
    found = wait_until(lambda: log_lines(worker, needle), 20, f"the refusal of {task_id}")
    time.sleep(1.0)  # long enough for a requeued message to come back and be seen again
    lines = log_lines(worker, needle)
    assert len(lines) == 1, f"refused more than once (requeued?): {lines}"
    assert "refused task message" in found[0] and "discarded, not run" in found[0]
    return str(found[0])


def assert_not_run(stack: Stack, worker: Worker, task_id: str) -> None:
    assert stack.app.AsyncResult(task_id).state == "PENDING"  # no result: it never ran
    assert not log_lines(worker, f"[{task_id}] received")
    assert_gone(stack, task_id)


def assert_gone(stack: Stack, task_id: str) -> None:
    """Neither waiting in the queue nor held unacknowledged (which Redis would hand back
    after the visibility timeout): discarded."""
    assert canvas.queue_depth(stack.app, QUEUE) == 0
    held = broker(stack).hvals("unacked")  # kombu's Redis transport: delivered, not acked
    assert not [m for m in held if task_id.encode() in m]


def ran(app: Celery, task_id: str) -> str:
    return str(app.AsyncResult(task_id).get(timeout=20))


def broker(stack: Stack) -> redis.Redis:
    return redis.Redis.from_url(stack.endpoints.broker_url)


def publish_raw(app: Celery, body: str, *, task: str, task_id: str) -> None:
    """A protocol 2 task message with the given body bytes, as a sender that wrote its
    own envelope would publish it."""
    message: Any = app.amqp.as_task_v2(task_id, task, args=(), kwargs={})
    queue = app.amqp.queues[QUEUE]
    with app.producer_or_acquire() as producer:
        producer.publish(body.encode(), exchange=queue.exchange, routing_key=queue.routing_key,
                         declare=[queue], headers=message.headers, content_type=CONTENT_TYPE,
                         content_encoding="utf-8", **message.properties)


def own_key(stack: Stack) -> daemon_key.DaemonKey:
    return daemon_key.load_or_create(stack.home)  # the workers' and the stack app's key


def test_a_signed_message_runs(stack: Stack, worker: Worker) -> None:
    sent = stack.app.send_task("skillq.whoami", queue=QUEUE)
    assert ran(stack.app, sent.id) == NODE


def test_an_unsigned_message_is_refused_and_not_run(stack: Stack, worker: Worker) -> None:
    sent = stack.app.send_task("skillq.whoami", queue=QUEUE, serializer="json")
    line = refusal(worker, sent.id)
    assert "unsigned (content type application/json)" in line and "no key" in line
    assert_not_run(stack, worker, sent.id)


def test_a_message_signed_with_a_key_not_enrolled_is_refused(
        stack: Stack, worker: Worker, foreign: tuple[Celery, daemon_key.DaemonKey]) -> None:
    app, key = foreign
    sent = app.send_task("skillq.whoami", queue=QUEUE)
    line = refusal(worker, sent.id)
    assert "signed with a key that is not enrolled" in line
    assert f"key {key.fingerprint}" in line
    assert_not_run(stack, worker, sent.id)


def test_enroll_and_revoke_through_the_cli(
        stack: Stack, worker: Worker, foreign: tuple[Celery, daemon_key.DaemonKey],
        tmp_path: Path) -> None:
    app, key = foreign
    shown = stack.cli("daemons", "key", cwd=tmp_path, env={"SKILLQ_HOME": str(key.path.parents[1]),
                                                           "SKILLQ_DAEMON": "outsider"})
    assert shown.returncode == 0, shown.stderr
    line = shown.stdout.strip()
    assert line.startswith("ssh-ed25519 ") and line.endswith(" skillq:outsider")
    key_file = tmp_path / "outsider.pub"
    key_file.write_text(line + "\n")

    enrolled = stack.cli("daemons", "enroll", str(key_file), "--json", cwd=tmp_path)
    assert enrolled.returncode == 0, enrolled.stderr
    record = json.loads(enrolled.stdout)
    assert record["fingerprint"] == key.fingerprint and record["daemon"] == "outsider"
    assert record["new"] and record["enrolled_via"] == "enroll"
    listed = stack.cli("daemons", "keys", "--json", cwd=tmp_path)
    assert key.fingerprint in {row["fingerprint"] for row in json.loads(listed.stdout)}

    time.sleep(REFRESH_S + 0.2)  # past the worker's last look at the keys (the test above)
    sent = app.send_task("skillq.whoami", queue=QUEUE)
    assert ran(app, sent.id) == NODE

    revoked = stack.cli("daemons", "revoke", key.fingerprint, cwd=tmp_path)
    assert revoked.returncode == 0, revoked.stderr
    assert f"revoked {key.fingerprint} (daemon outsider)" in revoked.stdout
    time.sleep(REFRESH_S + 0.2)
    refused = app.send_task("skillq.whoami", queue=QUEUE)
    line = refusal(worker, refused.id)
    assert "signed with a key revoked on" in line
    assert f"key {key.fingerprint} (daemon outsider)" in line
    assert_not_run(stack, worker, refused.id)

    again = stack.cli("daemons", "enroll", line_of(key_file), cwd=tmp_path)
    assert again.returncode == 2 and "never enrolled again" in again.stderr
    by_name = stack.cli("daemons", "revoke", "outsider", cwd=tmp_path)
    assert by_name.returncode == 0 and "already revoked:" in by_name.stdout
    unknown = stack.cli("daemons", "revoke", "no-such-daemon", cwd=tmp_path)
    assert unknown.returncode == 2 and "no enrolled key or daemon" in unknown.stderr


def line_of(path: Path) -> str:
    return path.read_text().strip()


def test_an_expired_message_is_refused(stack: Stack, worker: Worker) -> None:
    task_id = str(uuid.uuid4())
    an_hour_ago = time.time() - 3600  # far past the workers' clock skew allowance (300 s)
    body = seal([[], {}, {}], own_key(stack), task="skillq.whoami", task_id=task_id, eta=None,
                ttl_s=60, now=an_hour_ago)
    publish_raw(stack.app, body, task="skillq.whoami", task_id=task_id)
    line = refusal(worker, task_id)
    assert re.search(r"expired \d+ s ago", line), line
    assert f"key {own_key(stack).fingerprint} (daemon {HOST})" in line
    assert_not_run(stack, worker, task_id)


def test_headers_that_differ_from_what_was_signed_are_refused(stack: Stack,
                                                              worker: Worker) -> None:
    task_id = str(uuid.uuid4())
    body = seal([[], {}, {}], own_key(stack), task="skillq.ping", task_id=task_id, eta=None,
                ttl_s=60, now=time.time())
    publish_raw(stack.app, body, task="skillq.whoami", task_id=task_id)  # not the signed task
    line = refusal(worker, task_id)
    assert "its headers (task, id, eta: skillq.whoami, " in line
    assert f"are not what was signed (skillq.ping, {task_id}, None)" in line
    assert_not_run(stack, worker, task_id)


def test_the_exact_bytes_of_a_message_that_ran_are_refused_when_sent_again(
        stack: Stack, worker: Worker) -> None:
    client = broker(stack)
    capture = f"{QUEUE}-capture-{uuid.uuid4().hex[:8]}"  # a queue no worker consumes
    sent = stack.app.send_task("skillq.whoami", queue=capture)
    lists = wait_until(lambda: client.keys(f"{capture}*"), 10, "the captured message")
    raw = client.rpop(lists[0])
    assert raw is not None
    nonce = open_envelope(base64.b64decode(json.loads(raw)["body"])).nonce

    client.lpush(QUEUE, raw)  # delivered as it was sent: it runs
    assert ran(stack.app, sent.id) == NODE
    wait_until(lambda: client.exists(DONE_PREFIX + nonce), 10, "the nonce marked finished")
    stack.app.AsyncResult(sent.id).forget()

    client.lpush(QUEUE, raw)  # the very same bytes again
    line = refusal(worker, sent.id)
    assert "replayed: the task this message carried already finished" in line
    assert f"key {own_key(stack).fingerprint}" in line
    assert stack.app.AsyncResult(sent.id).state == "PENDING"  # no second result
    assert len(log_lines(worker, f"[{sent.id}] received")) == 1  # the first delivery only
    assert_gone(stack, sent.id)


def test_skillq_daemons_shows_each_daemons_key(stack: Stack, worker: Worker,
                                               tmp_path: Path) -> None:
    fingerprint = own_key(stack).fingerprint
    listing = stack.cli("daemons", "--json", cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    rows = {row["daemon"]: row for row in json.loads(listing.stdout)}
    assert fingerprint in rows[HOST]["key_fingerprints"]
    assert rows[HOST]["revoked_keys"] == []
    # How its steps are isolated (workers/sandbox/): bubblewrap, as root on CI.
    (mode,) = rows[HOST]["sandbox"]
    assert mode.startswith("bubblewrap, as skillq-step"), rows[HOST]
    table = stack.cli("daemons", cwd=tmp_path, env={"COLUMNS": "400"})
    assert table.returncode == 0 and fingerprint in table.stdout
    shown = stack.cli("daemons", "key", "--json", cwd=tmp_path)
    assert json.loads(shown.stdout)["fingerprint"] == fingerprint
