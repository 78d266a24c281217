"""Celery tasks of the data plane (registered on whichever app the process created)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from celery import Task, shared_task

from lifecycle import canvas
from lifecycle.context import current
from lifecycle.tasks import advance_run
from workers import step_runner

log = logging.getLogger(__name__)


@shared_task(name="skillq.ping")
def ping() -> str:
    return "pong"


@shared_task(name="skillq.whoami", bind=True)
def whoami(self: Task[Any, Any]) -> str:
    """The node name of the worker that ran it: shows which worker a queue reaches."""
    return str(self.request.hostname)


def _run(task: Task[Any, Any], ids: Sequence[str]) -> list[str]:
    ctx = current()

    def due(run_id: str) -> None:
        try:
            advance_run(task.app, ctx, run_id)
        except Exception:  # the steps are recorded: let a control worker move the run on
            log.exception("advancing %s in-process failed; asking the control queue", run_id)
            canvas.request_advance(task.app, run_id)

    states = step_runner.run_batch(ctx, ids, worker=task.request.hostname or ctx.hostname,
                                   on_due=due)
    return [str(s) for s in states]


@shared_task(name=canvas.EXECUTE, bind=True, acks_late=True, ignore_result=True)
def execute_step(self: Task[Any, Any], step_run_id: str) -> str:
    """Run one step attempt; its record, not this return value, is the result."""
    states = _run(self, [step_run_id])
    return states[0] if states else "duplicate"


@shared_task(name=canvas.EXECUTE_BATCH, bind=True, acks_late=True, ignore_result=True)
def execute_steps(self: Task[Any, Any], step_run_ids: list[str]) -> list[str]:
    """Run a batch of a quick step's attempts, one after another, recorded as they go."""
    return _run(self, step_run_ids)
