"""Celery tasks of the data plane (registered on whichever app the process created)."""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task

from orchestrator import canvas
from shared.states import StepState
from workers import step_runner
from workers.context import current


@shared_task(name="skillq.ping")
def ping() -> str:
    return "pong"


@shared_task(name="skillq.whoami", bind=True)
def whoami(self: Task[Any, Any]) -> str:
    """The node name of the worker that ran it: shows which worker a queue reaches."""
    return str(self.request.hostname)


@shared_task(name=canvas.EXECUTE, bind=True, acks_late=True, ignore_result=True)
def execute_step(self: Task[Any, Any], step_run_id: str) -> str:
    """Run one step attempt; its record, not this return value, is the result."""
    ctx = current()
    job = step_runner.claim(ctx, step_run_id, worker=self.request.hostname or ctx.hostname)
    if job is None:
        return "duplicate"
    try:
        result = step_runner.execute(ctx, job)
    except Exception as exc:  # an executor bug still settles the step, with the reason
        result = step_runner.Result(StepState.FAILED,
                                    error=f"internal error: {type(exc).__name__}: {exc}",
                                    error_kind="internal")
    nudge = step_runner.finish(ctx, job, result)
    child = result.extra.get("child_run_id")
    if child:  # a nested orchestrator: its own run starts moving
        canvas.request_advance(self.app, child)
    elif nudge:
        canvas.request_advance(self.app, job.run_id)
    return str(result.state)
