"""Celery tasks of the data plane (registered on whichever app the process created)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from celery import Task, shared_task
from celery.exceptions import Reject, Retry
from sqlalchemy.orm import Session

from lifecycle import canvas
from lifecycle.context import current
from lifecycle.tasks import advance_in, advance_run, send_outcome
from shared.db.models import PipelineRun
from shared.db.outage import is_outage
from shared.errors import StepFailed
from shared.states import StepState
from workers import step_runner
from workers.pool_loss import StepRequest

log = logging.getLogger(__name__)


@shared_task(name="skillq.ping")
def ping() -> str:
    return "pong"


@shared_task(name="skillq.whoami", bind=True)
def whoami(self: Task[Any, Any]) -> str:
    """The node name of the worker that ran it: shows which worker a queue reaches."""
    return str(self.request.hostname)


def _run(task: Task[Any, Any], ids: Sequence[str]) -> list[str]:
    """Run the message's attempts; the task ends as its steps did, so Flower and task
    events tell the truth: FAILURE with the step's error when one failed (skipped items
    too: they failed), RETRY when one will be tried again, SUCCESS otherwise."""
    ctx = current()

    def due(run_id: str) -> None:
        try:
            advance_run(task.app, ctx, run_id)
        except Exception:  # the steps are recorded: let a control worker move the run on
            log.exception("advancing %s in-process failed; asking the control queue", run_id)
            canvas.request_advance(task.app, run_id)

    def plan_in(session: Session, run: PipelineRun) -> Callable[[], None]:
        """Plan the run in the transaction recording its step (step_records.finish_batch);
        what is returned sends the outcome after the commit."""
        run_id = run.id
        out = advance_in(session, ctx, run_id, locked=run)

        def send() -> None:
            try:
                send_outcome(task.app, ctx, run_id, out)
            except Exception:  # recorded and planned: a control worker sends what is due
                log.exception("sending %s's next steps failed; asking the control queue",
                              run_id)
                canvas.request_advance(task.app, run_id)
        return send

    try:
        results = step_runner.run_batch(ctx, ids, worker=task.request.hostname or ctx.hostname,
                                        on_due=due, plan_in=plan_in)
    except Exception as exc:
        if is_outage(exc):  # the database stayed away longer than database_outage_s
            raise Reject(f"database unreachable: {exc}", requeue=True) from exc
        raise
    failed = [r for r in results if r.state == StepState.FAILED]
    if failed:
        raise StepFailed(failed[0].error or "failed", failed=len(failed), of=len(results))
    retrying = [r for r in results if r.state == StepState.RETRYING]
    if retrying:  # the planner sends the next attempt: this only marks the task RETRY
        why = retrying[0].error or "transient failure"
        raise Retry(why, exc=StepFailed(why), when=retrying[0].not_before)
    return [str(r.state) for r in results]


_STEP_TASK: dict[str, Any] = {"bind": True, "acks_late": True, "ignore_result": True,
                              "Request": StepRequest, "throws": (StepFailed,)}


@shared_task(name=canvas.EXECUTE, **_STEP_TASK)
def execute_step(self: Task[Any, Any], step_run_id: str) -> str:
    """Run one step attempt; its record, not this return value, is the result."""
    states = _run(self, [step_run_id])
    return states[0] if states else "duplicate"


@shared_task(name=canvas.EXECUTE_BATCH, **_STEP_TASK)
def execute_steps(self: Task[Any, Any], step_run_ids: list[str]) -> list[str]:
    """Run a batch of a quick step's attempts, one after another, recorded as they go."""
    return _run(self, step_run_ids)
