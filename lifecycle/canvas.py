"""The Celery adapter: the only module that builds signatures and sends messages.

A launch of ready steps is one ``group`` of step signatures, each routed to its own
queue; messages carry only step-run ids (inputs and outputs live in PostgreSQL and the
store), so they never grow with the pipeline. A message names one attempt, or a batch
of a quick step's items (the planner sizes batches from the skill's history). Fan-in is
not a chord: the planner tracks it in PostgreSQL, because a redelivered task
(at-least-once delivery) would be counted twice by a chord, and an empty chord never
fires (celery#4333).

Every send says ``ignore_result``: a send by name does not know the task's own
``ignore_result``, and without it a Redis result backend subscribes the sending process
to a result channel per message, which nobody reads and nothing unsubscribes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from celery import Celery, group
from celery.canvas import Signature
from kombu.exceptions import ChannelError

from lifecycle.dispatch import Dispatch
from shared.attempt_id import AttemptId
from shared.celery_app import NORMAL_PRIORITY, URGENT_PRIORITY
from shared.queues import CONTROL_QUEUE

EXECUTE = "skillq.execute_step"
EXECUTE_BATCH = "skillq.execute_steps"
ADVANCE = "skillq.advance"
WATCH = "skillq.watch"


def readable_args(d: Dispatch) -> str:
    """What Flower and worker logs show as a message's arguments: the step's skill and
    its attempt id(s), never inputs (those stay in PostgreSQL, secrets never leave the
    worker). ``<run>/<step>/<item>/<attempt>`` already names the step; a batch shows
    its first id and how many more."""
    ids = d.step_run_ids
    label = d.label or AttemptId.parse(ids[0]).step_id  # when the planner gave no label
    more = f" (+{len(ids) - 1} more)" if len(ids) > 1 else ""
    return f"{label}: {ids[0]}{more}"


def _signature(app: Celery, d: Dispatch) -> Signature:
    ids = d.step_run_ids
    shown: dict[str, Any] = {"argsrepr": readable_args(d), "kwargsrepr": "{}",
                             "priority": URGENT_PRIORITY if d.urgent else NORMAL_PRIORITY,
                             "ignore_result": True}
    if len(ids) == 1:  # the task id is the attempt's id: Flower shows which step it is
        return app.signature(EXECUTE, args=(ids[0],), queue=d.queue, task_id=ids[0],
                             **shown)
    return app.signature(EXECUTE_BATCH, args=(list(ids),), queue=d.queue,
                         task_id=f"{ids[0]}+{len(ids) - 1}", **shown)


def dispatch_steps(app: Celery, dispatches: Sequence[Dispatch]) -> None:
    if not dispatches:
        return
    sigs = [_signature(app, d) for d in dispatches]
    if len(sigs) == 1:
        sigs[0].apply_async()
    else:
        group(sigs).apply_async()


def queue_depth(app: Celery, queue: str) -> int:
    """Messages waiting in ``queue`` (not those a worker has reserved)."""
    with app.connection_for_read() as conn, conn.channel() as channel:
        declare: Any = getattr(channel, "queue_declare")  # noqa: B009 - untyped in kombu
        try:
            return int(declare(queue=queue, passive=True).message_count)
        except ChannelError:  # Redis drops an empty list: no such queue is no message
            return 0


def request_advance(app: Celery, run_id: str) -> None:
    app.send_task(ADVANCE, args=(run_id,), queue=CONTROL_QUEUE, priority=NORMAL_PRIORITY,
                  ignore_result=True)


def schedule_watch(app: Celery, run_id: str, delay_s: float) -> None:
    app.send_task(WATCH, args=(run_id,), queue=CONTROL_QUEUE, countdown=delay_s,
                  priority=NORMAL_PRIORITY, ignore_result=True)
