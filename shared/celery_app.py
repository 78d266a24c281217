"""The Celery app factory: one configured app per process, built on demand.

Delivery is at least once: a step's message is acknowledged only after the step ran
(acks_late), a worker process that dies hands its message back (reject_on_worker_lost),
and each worker process holds one message at a time (prefetch 1). Redis redelivers an
unacknowledged message after its visibility timeout, so that timeout is set longer than
the longest step may take (see visibility_timeout_s). Everything travels as JSON, and
task messages as JSON in a signed envelope: the app signs what it sends and its workers
refuse what is not signed by an enrolled key (shared/signed_messages.py,
docs/security.md). Remote-control messages (ping, inspect, add_consumer) stay plain JSON.
"""

from __future__ import annotations

from typing import Any

from celery import Celery
from celery.app.control import Control
from kombu import Exchange, Queue

from shared import signed_messages
from shared.envelope import CONTENT_TYPE
from shared.queues import CONTROL_QUEUE, QueueClass
from shared.settings import Settings

TASK_MODULES = ("workers.tasks", "lifecycle.tasks")


def visibility_timeout_s(settings: Settings) -> int:
    """Longer than the longest step timeout, with room for retries' backoff."""
    return int(settings.max_step_timeout_s * 2 + 600)


EXCHANGE = "skillq"  # direct: each queue is bound by its own name only
# Redis consumes a queue's priority lists in order, the lowest number first (kombu's
# priority_steps): everything goes at NORMAL, and a retry or a re-dispatch after a lost
# worker at URGENT, so it runs next rather than behind a fan-out's backlog.
PRIORITY_STEPS = (0, 5)
URGENT_PRIORITY, NORMAL_PRIORITY = PRIORITY_STEPS


def queue(name: str) -> Queue:
    return Queue(name, Exchange(EXCHANGE, type="direct"), routing_key=name)


class JsonControl(Control):
    """Remote control (ping, inspect, add/cancel_consumer) in plain JSON both ways: task
    messages are signed, these are not (docs/security.md says what that leaves open)."""

    def __init__(self, app: Celery) -> None:
        super().__init__(app)
        mailbox: Any = getattr(self, "mailbox")  # noqa: B009 - not in celery-types
        mailbox.serializer = "json"
        mailbox.accept = ["json"]


def create_app(settings: Settings, *, broker_url: str, result_backend: str | None = None,
               database_url: str | None = None) -> Celery:
    """``database_url`` (default SKILLQ_DATABASE_URL) is where a worker of this app reads
    the enrolled daemon keys; a process that only sends needs none."""
    app = Celery("skillq", broker=broker_url, backend=result_backend or broker_url,
                 include=list(TASK_MODULES), task_cls="shared.signed_messages:GatedTask",
                 control=JsonControl)
    signed = signed_messages.install(app, settings,
                                     database_url=database_url or settings.database_url)
    # Celery's default binds every declared queue to one exchange under one routing key,
    # so a publish to that exchange reached all of them; one key per queue instead.
    queues = [queue(q.value) for q in QueueClass] + [queue(CONTROL_QUEUE)]
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
        task_default_exchange_type="direct",
        task_default_routing_key=QueueClass.DEFAULT.value,
        task_default_priority=NORMAL_PRIORITY,
        task_queues=queues,
        task_create_missing_queues=True,  # per-daemon queues such as dom0@laptop
        broker_transport_options={"visibility_timeout": visibility_timeout_s(settings),
                                  "priority_steps": list(PRIORITY_STEPS)},
        result_backend_transport_options={"visibility_timeout": visibility_timeout_s(settings)},
        result_expires=settings.result_ttl_s,
        broker_connection_retry_on_startup=True,
        # Task events cost a third of a fan-out's throughput (benchmarks/execution.py);
        # Flower turns them on remotely when someone is watching, or set
        # SKILLQ_TASK_EVENTS=1 (deploy/: where Flower runs) to have them from the start.
        worker_send_task_events=settings.task_events,
        task_send_sent_event=settings.task_events,
        worker_hijack_root_logger=False,
        timezone="UTC",
    )
    return app
