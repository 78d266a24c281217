"""The Celery app factory: one configured app per process, built on demand.

Delivery is at least once: a step's message is acknowledged only after the step ran
(acks_late), a worker process that dies hands its message back (reject_on_worker_lost),
and each worker process holds one message at a time (prefetch 1). Redis redelivers an
unacknowledged message after its visibility timeout, so that timeout is set longer than
the longest step may take (see visibility_timeout_s). Everything travels as JSON, and
task messages as JSON in a signed envelope: the app signs what it sends and its workers
refuse what is not signed by an enrolled key (shared/signed_messages.py,
docs/security.md). Remote-control messages (ping, inspect, add_consumer) stay plain JSON.

On RabbitMQ (an ``amqp://`` broker URL) every queue, per-daemon ones included, is a
durable quorum queue on one topic exchange: RabbitMQ gives an unacknowledged message
back as soon as its consumer's connection closes, so there is no visibility timeout to
wait out. Countdowns travel through RabbitMQ's delayed-delivery queues (Celery's native
delayed delivery) instead of waiting in a worker's memory, and priorities are numbered
the AMQP way round (docs/scaling.md says what else differs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import celery
from celery import Celery
from celery.app.amqp import AMQP, Queues
from celery.app.control import Control
from celery.result import AsyncResult
from kombu import Consumer, Exchange, Queue

from shared import signed_messages
from shared.envelope import CONTENT_TYPE
from shared.errors import ConfigError
from shared.queues import CONTROL_QUEUE, QueueClass
from shared.settings import Settings

TASK_MODULES = ("workers.tasks", "lifecycle.tasks")


def visibility_timeout_s(settings: Settings) -> int:
    """Longer than the longest step timeout, with room for retries' backoff."""
    return int(settings.max_step_timeout_s * 2 + 600)


EXCHANGE = "skillq"  # each queue is bound by its own name only
# Redis consumes a queue's priority lists in order, the lowest number first (kombu's
# priority_steps): everything goes at NORMAL, and a retry or a re-dispatch after a lost
# worker at URGENT, so it runs next rather than behind a fan-out's backlog.
PRIORITY_STEPS = (0, 5)
URGENT_PRIORITY, NORMAL_PRIORITY = PRIORITY_STEPS

AMQP_SCHEMES = frozenset({"amqp", "amqps", "pyamqp"})
# RabbitMQ drops a message handed back (a worker or its connection lost while holding
# it) more often than this; skillq's watchdog sends a dropped step's attempt again
# (lifecycle/tasks.py resend_stranded). 20 is RabbitMQ 4's default, fixed here so that
# 3.x behaves alike. A queue argument: every process must declare the same value, so it
# is a constant, not a setting (a policy may lower it on the server).
DELIVERY_LIMIT = 20
QUORUM_ARGUMENTS: Mapping[str, Any] = {"x-queue-type": "quorum",
                                       "x-delivery-limit": DELIVERY_LIMIT}
AMQP_MAX_PRIORITY = 9  # AMQP: higher is sooner; RabbitMQ 4 quorum queues: 5-9 are "high"
NATIVE_DELAYS_SINCE = (5, 5)  # Celery's native delayed delivery for quorum queues


def is_amqp(url: str) -> bool:
    """Whether a broker URL (or the first of a ``;`` failover list) names RabbitMQ."""
    return url.split(";", 1)[0].partition("://")[0].lower() in AMQP_SCHEMES


def queue(name: str, *, quorum: bool = False) -> Queue:
    """A queue bound to the skillq exchange under its own name: on Redis a direct
    exchange (as ever); on RabbitMQ a quorum queue on a topic exchange, which Celery's
    native delayed delivery needs (a countdown to a direct exchange would wait in the
    worker that took it, holding one of its prefetch slots)."""
    if not quorum:
        return Queue(name, Exchange(EXCHANGE, type="direct"), routing_key=name)
    return Queue(name, Exchange(EXCHANGE, type="topic"), routing_key=name,
                 queue_arguments=dict(QUORUM_ARGUMENTS))


def is_quorum(q: Queue) -> bool:
    return bool((q.queue_arguments or {}).get("x-queue-type") == "quorum")


class SkillqQueues(Queues):
    """On RabbitMQ a queue made on demand (a per-daemon queue such as ``dom0@laptop``)
    is declared like the declared ones; on Redis Celery's own way, as before."""

    def new_missing(self, name: str) -> Queue:
        template = dict.get(self, QueueClass.DEFAULT.value)
        if template is None or not is_quorum(template):
            return super().new_missing(name)
        return queue(name, quorum=True)


class SkillqAMQP(AMQP):
    queues_cls = SkillqQueues

    def TaskConsumer(self, channel: Any, queues: list[Queue] | None = None,
                     accept: list[str] | None = None, **kw: Any) -> Consumer:
        """On RabbitMQ a worker declares every queue the app knows, not only those it
        consumes: Celery's native delayed delivery binds each of them next, and a queue
        nobody declared yet (on a new vhost, one only another worker serves) fails its
        binding, logged as "native delayed delivery will not be available"."""
        known = list(self.queues.values())
        if known and is_quorum(known[0]):
            for q in known:
                q(channel).declare()
        return super().TaskConsumer(channel, queues, accept, **kw)


class SkillqCelery(Celery[Any]):
    """The app; on RabbitMQ it adjusts what it sends (``on_rabbitmq``)."""

    rabbitmq = False

    def send_task(self, name: str, *args: Any, **options: Any) -> AsyncResult[Any]:
        if self.rabbitmq and len(args) <= 4:
            options.update(zip(("args", "kwargs", "countdown", "eta"), args, strict=False))
            options = on_rabbitmq(options, self.now())
            args = ()
        return super().send_task(name, *args, **options)


def on_rabbitmq(options: dict[str, Any], now: datetime) -> dict[str, Any]:
    """A message's options as RabbitMQ wants them.

    A countdown or ETA becomes whole seconds, rounded up: Celery routes it through the
    delayed-delivery queues by its whole seconds and fails on a delay under one second
    (``int(0.4)`` is 0, which kombu refuses). A priority is turned round: skillq numbers
    them as Redis does (0 first), AMQP the other way (9 first). (Celery's Task.retry,
    which resends with the priority it received, would turn it round twice: skillq's
    retries are new attempts the planner sends.)
    """
    out = dict(options)
    eta, delay = out.pop("eta", None), out.get("countdown")
    if eta is not None:
        when = datetime.fromisoformat(eta) if isinstance(eta, str) else eta
        delay = (when if when.tzinfo else when.replace(tzinfo=UTC)) - now
        delay = delay.total_seconds()
    if delay is not None:
        out["countdown"] = math.ceil(delay) if delay > 0 else None
    if out.get("priority") is not None:
        out["priority"] = AMQP_MAX_PRIORITY - int(out["priority"])
    return out


class JsonControl(Control):
    """Remote control (ping, inspect, add/cancel_consumer) in plain JSON both ways: task
    messages are signed, these are not (docs/security.md says what that leaves open)."""

    def __init__(self, app: Celery) -> None:
        super().__init__(app)
        mailbox: Any = getattr(self, "mailbox")  # noqa: B009 - not in celery-types
        mailbox.serializer = "json"
        mailbox.accept = ["json"]


def result_backend_for(broker_url: str, result_backend: str | None) -> str:
    """Results go to ``result_backend``, else to the broker when it is Redis. An AMQP URL
    (Celery 5 has no amqp result backend) means none: skillq reads no Celery results,
    and its replay guard, which keeps its marks in a Redis result backend, says once per
    process that it is off (set SKILLQ_RESULT_BACKEND to a Redis URL to have it)."""
    url = result_backend or broker_url
    return "disabled" if is_amqp(url) else url


def _broker_conf(settings: Settings, broker_url: str) -> dict[str, Any]:
    if not is_amqp(broker_url):
        return {"task_default_exchange_type": "direct",
                "broker_transport_options": {"visibility_timeout": visibility_timeout_s(settings),
                                             "priority_steps": list(PRIORITY_STEPS)}}
    if tuple(int(p) for p in celery.__version__.split(".")[:2]) < NATIVE_DELAYS_SINCE:
        raise ConfigError(f"RabbitMQ needs celery 5.5 or later (quorum queues, native "
                          f"delayed delivery); this is {celery.__version__}")
    return {
        "task_default_exchange_type": "topic",
        "broker_transport_options": {"confirm_publish": settings.broker_confirm_publish},
        # Dead peers are noticed by the missed heartbeats of either side (0 = none).
        "broker_heartbeat": settings.broker_heartbeat_s,
        # Per-consumer prefetch (quorum queues have no global QoS) and countdowns through
        # RabbitMQ's delayed-delivery queues: Celery's defaults, spelled out.
        "worker_detect_quorum_queues": True,
        "broker_native_delayed_delivery_queue_type": "quorum",
    }


def create_app(settings: Settings, *, broker_url: str, result_backend: str | None = None,
               database_url: str | None = None) -> Celery:
    """``database_url`` (default SKILLQ_DATABASE_URL) is where a worker of this app reads
    the enrolled daemon keys; a process that only sends needs none."""
    rabbitmq = is_amqp(broker_url)
    app = SkillqCelery("skillq", broker=broker_url,
                       backend=result_backend_for(broker_url, result_backend),
                       include=list(TASK_MODULES), task_cls="shared.signed_messages:GatedTask",
                       control=JsonControl, amqp=SkillqAMQP)
    app.rabbitmq = rabbitmq
    signed = signed_messages.install(app, settings,
                                     database_url=database_url or settings.database_url)
    # Celery's default binds every declared queue to one exchange under one routing key,
    # so a publish to that exchange reached all of them; one key per queue instead.
    queues = [queue(q.value, quorum=rabbitmq) for q in QueueClass] + [
        queue(CONTROL_QUEUE, quorum=rabbitmq)]
    app.conf.update(
        task_serializer=signed,
        result_serializer="json",
        accept_content=[CONTENT_TYPE],  # a plain json or pickle task message is refused
        result_accept_content=["json"],  # results are not signed
        event_serializer="json",
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_track_started=True,
        task_default_queue=QueueClass.DEFAULT.value,
        task_default_exchange=EXCHANGE,
        task_default_routing_key=QueueClass.DEFAULT.value,
        task_default_priority=NORMAL_PRIORITY,
        task_queues=queues,
        task_create_missing_queues=True,  # per-daemon queues such as dom0@laptop
        result_backend_transport_options={"visibility_timeout": visibility_timeout_s(settings)},
        result_expires=settings.result_ttl_s,
        broker_connection_retry_on_startup=True,
        # A step running when the broker connection drops runs on: its message comes
        # back to the queue (RabbitMQ) and a worker taking it again finds the attempt
        # running under a live heartbeat and drops it as a duplicate
        # (workers/step_runner.py claim), so nothing runs twice; cancelling it, as
        # Celery 6 will by default, would throw the step's work away at every broker blip.
        worker_cancel_long_running_tasks_on_connection_loss=False,
        # Task events slow a fan-out down markedly (benchmarks/README.md);
        # Flower turns them on remotely when someone is watching, or set
        # SKILLQ_TASK_EVENTS=1 (deploy/: where Flower runs) to have them from the start.
        worker_send_task_events=settings.task_events,
        task_send_sent_event=settings.task_events,
        worker_hijack_root_logger=False,
        timezone="UTC",
        **_broker_conf(settings, broker_url),
    )
    return app
