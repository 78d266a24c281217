"""The app per broker, without a server: Redis as before, RabbitMQ with quorum queues on a
topic exchange (the real RabbitMQ: tests/integration/test_rabbitmq*.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from shared.celery_app import (
    DELIVERY_LIMIT,
    EXCHANGE,
    NORMAL_PRIORITY,
    URGENT_PRIORITY,
    create_app,
    is_amqp,
    on_rabbitmq,
    result_backend_for,
    visibility_timeout_s,
)
from shared.settings import Settings

QUORUM = {"x-queue-type": "quorum", "x-delivery-limit": DELIVERY_LIMIT}


def settings(tmp_path: Path) -> Settings:
    return Settings(_env_file=None, home=tmp_path)


@pytest.mark.parametrize(("url", "amqp"), [
    ("amqp://u:p@rabbit:5672/skillq", True), ("AMQPS://rabbit//", True),
    ("pyamqp://rabbit", True), ("amqp://a//;amqp://b//", True),
    ("redis://:pw@127.0.0.1:6379/0", False), ("rediss://h/0", False),
    ("sentinel://h:26379", False)])
def test_which_urls_are_rabbitmq(url: str, amqp: bool) -> None:
    assert is_amqp(url) is amqp


def test_results_follow_a_redis_broker_and_are_off_with_rabbitmq() -> None:
    assert result_backend_for("redis://h/0", None) == "redis://h/0"
    assert result_backend_for("redis://h/0", "redis://h/1") == "redis://h/1"
    assert result_backend_for("amqp://h//", None) == "disabled"
    assert result_backend_for("amqp://h//", "amqp://h//") == "disabled"  # Endpoints' default
    assert result_backend_for("amqp://h//", "redis://h/1") == "redis://h/1"


def test_a_redis_app_is_as_it_was(tmp_path: Path) -> None:
    app = create_app(settings(tmp_path), broker_url="redis://127.0.0.1:1/0")
    conf = app.conf
    assert conf.task_default_exchange_type == "direct"
    assert conf.broker_transport_options == {
        "visibility_timeout": visibility_timeout_s(settings(tmp_path)), "priority_steps": [0, 5]}
    for name, q in app.amqp.queues.items():
        assert (q.exchange.name, q.exchange.type, q.routing_key) == (EXCHANGE, "direct", name)
        assert not q.queue_arguments
    made = app.amqp.queues["dom0@laptop"]  # Celery's own way: an exchange of its name
    assert (made.exchange.name, made.queue_arguments) == ("dom0@laptop", None)
    assert not getattr(app, "rabbitmq")  # noqa: B009 - an attribute of skillq's subclass


def test_a_rabbitmq_app_declares_quorum_queues_on_a_topic_exchange(tmp_path: Path) -> None:
    app = create_app(settings(tmp_path), broker_url="amqp://guest:guest@127.0.0.1:1//")
    conf = app.conf
    assert conf.task_default_exchange_type == "topic"
    assert conf.broker_transport_options == {"confirm_publish": True}
    assert conf.broker_heartbeat == 60.0
    assert conf.worker_cancel_long_running_tasks_on_connection_loss is False
    assert type(app.backend).__name__ == "DisabledBackend"
    for name in ("default", "dom0", "cmd0", "agent", "gpu", "control", "cmd0@desk"):
        q = app.amqp.queues[name]
        assert (q.exchange.name, q.exchange.type, q.routing_key) == (EXCHANGE, "topic", name)
        assert q.queue_arguments == QUORUM and q.durable and not q.auto_delete


NOW = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)


@pytest.mark.parametrize(("given", "countdown"), [
    ({"countdown": 0.4}, 1), ({"countdown": 1.0}, 1), ({"countdown": 14.2}, 15),
    ({"countdown": 0}, None), ({"countdown": -3}, None),
    ({"eta": NOW + timedelta(seconds=2.5)}, 3), ({"eta": NOW - timedelta(seconds=1)}, None),
    ({"eta": (NOW + timedelta(seconds=0.2)).isoformat()}, 1),
    ({"eta": (NOW + timedelta(seconds=4)).replace(tzinfo=None)}, 4)])
def test_a_delay_becomes_whole_seconds_rounded_up(given: dict[str, object],
                                                  countdown: int | None) -> None:
    out = on_rabbitmq(dict(given), NOW)
    assert out.get("countdown") == countdown and "eta" not in out


def test_priorities_are_turned_the_amqp_way_round() -> None:
    assert on_rabbitmq({"priority": URGENT_PRIORITY}, NOW)["priority"] == 9
    assert on_rabbitmq({"priority": NORMAL_PRIORITY}, NOW)["priority"] == 4
    assert on_rabbitmq({"queue": "default"}, NOW) == {"queue": "default"}
