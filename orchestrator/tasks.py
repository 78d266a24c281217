"""Celery tasks of the control plane: moving pipeline runs forward, watching them."""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task

from orchestrator import canvas
from orchestrator.planner import advance as plan_advance
from shared.db.session import transaction
from workers.context import current
from workers.recording import refresh_benchmarks


def _advance(app: Task[Any, Any], run_id: str) -> None:
    ctx = current()
    with transaction(ctx.database_url) as session:
        out = plan_advance(session, run_id, ctx.settings)
    # Sent only after the commit, so a worker never sees a step row that is not there.
    canvas.dispatch_steps(app.app, out.dispatch)
    for parent in out.advance_runs:
        canvas.request_advance(app.app, parent)
    if out.watch_in_s is not None:
        canvas.schedule_watch(app.app, run_id, out.watch_in_s)
    # benchmarks.json windows: once per settled step and per finished pipeline, not per
    # item, so a 5,000-item fan-out rewrites each file once.
    refresh_benchmarks(ctx, run_id, out.settled_skills, pipeline=out.finished)


@shared_task(name=canvas.ADVANCE, bind=True, acks_late=True, ignore_result=True)
def advance(self: Task[Any, Any], run_id: str) -> None:
    _advance(self, run_id)


@shared_task(name=canvas.WATCH, bind=True, acks_late=True, ignore_result=True)
def watch(self: Task[Any, Any], run_id: str) -> None:
    """The watchdog: with no step reporting, a dead worker is still noticed."""
    ctx = current()
    with transaction(ctx.database_url) as session:
        from shared.db.models import PipelineRun

        run = session.get(PipelineRun, run_id, with_for_update=True)
        if run is not None:
            run.watch_at = None  # this watch has fired; advance schedules the next
    _advance(self, run_id)
