"""The Celery adapter: the only module that builds signatures and sends messages.

A launch of ready steps is one ``group`` of step signatures, each routed to its own
queue; messages carry only step-run ids (inputs and outputs live in PostgreSQL and the
store), so they never grow with the pipeline. A message names one attempt, or a batch
of a quick step's items (the planner sizes batches from the skill's history). Fan-in is
not a chord: the planner tracks it in PostgreSQL, because a redelivered task
(at-least-once delivery) would be counted twice by a chord, and an empty chord never
fires (celery#4333).
"""

from __future__ import annotations

from collections.abc import Sequence

from celery import Celery, group
from celery.canvas import Signature

from orchestrator.planner import Dispatch
from shared.queues import CONTROL_QUEUE

EXECUTE = "skillq.execute_step"
EXECUTE_BATCH = "skillq.execute_steps"
ADVANCE = "skillq.advance"
WATCH = "skillq.watch"


def _signature(app: Celery, d: Dispatch) -> Signature:
    ids = d.step_run_ids
    if len(ids) == 1:  # the task id is the attempt's id: Flower shows which step it is
        return app.signature(EXECUTE, args=(ids[0],), queue=d.queue, task_id=ids[0])
    return app.signature(EXECUTE_BATCH, args=(list(ids),), queue=d.queue,
                         task_id=f"{ids[0]}+{len(ids) - 1}")


def dispatch_steps(app: Celery, dispatches: Sequence[Dispatch]) -> None:
    if not dispatches:
        return
    sigs = [_signature(app, d) for d in dispatches]
    if len(sigs) == 1:
        sigs[0].apply_async()
    else:
        group(sigs).apply_async()


def request_advance(app: Celery, run_id: str) -> None:
    app.send_task(ADVANCE, args=(run_id,), queue=CONTROL_QUEUE)


def schedule_watch(app: Celery, run_id: str, delay_s: float) -> None:
    app.send_task(WATCH, args=(run_id,), queue=CONTROL_QUEUE, countdown=delay_s)
