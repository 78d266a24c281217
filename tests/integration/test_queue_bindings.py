"""Each queue is bound to its own routing key only (on d773015 all six queues were bound
to exchange ``default`` under one key, so one publish there reached every queue).

The queues are declared on a database of the stack's Redis that no worker consumes, so
the probe messages are counted, never run.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from celery import Celery
from conftest import Stack

from lifecycle import canvas
from shared.celery_app import EXCHANGE, create_app
from shared.queues import CONTROL_QUEUE, QueueClass
from shared.settings import Settings

pytestmark = pytest.mark.integration
QUEUES = [q.value for q in QueueClass] + [CONTROL_QUEUE]
PROBE_DB = 13


@pytest.fixture
def probe_app(stack: Stack) -> Iterator[Celery]:
    url = stack.endpoints.broker_url.rsplit("/", 1)[0] + f"/{PROBE_DB}"
    app = create_app(Settings(), broker_url=url)
    with app.connection_for_write() as conn:
        conn.default_channel.client.flushdb()
        for queue in app.amqp.queues.values():
            queue(conn.default_channel).declare()
    try:
        yield app
    finally:
        with app.connection_for_write() as conn:
            conn.default_channel.client.flushdb()
        app.close()


def depths(app: Celery) -> dict[str, int]:
    return {q: canvas.queue_depth(app, q) for q in QUEUES}


def publish(app: Celery, exchange: str, routing_key: str) -> None:
    with app.producer_or_acquire() as producer:
        producer.publish({"probe": routing_key}, exchange=exchange, routing_key=routing_key,
                         serializer="json")


def test_a_publish_reaches_the_queue_its_key_names_and_no_other(probe_app: Celery) -> None:
    expected = dict.fromkeys(QUEUES, 0)
    for name in QUEUES:
        publish(probe_app, EXCHANGE, name)
        expected[name] += 1
        assert depths(probe_app) == expected, name


def test_the_old_shared_exchange_and_key_reach_nothing(probe_app: Celery) -> None:
    publish(probe_app, "default", "default")
    assert depths(probe_app) == dict.fromkeys(QUEUES, 0)
