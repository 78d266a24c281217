"""Waiting for tasks and runs, and running one side or the other (skillq or raw Celery)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import raw_tasks
from celery import group
from celery.result import AsyncResult
from rich.progress import (
    Progress,
)
from sqlalchemy import func, select

from orchestrator import canvas
from orchestrator.history import descendant_run_ids, latest_states
from orchestrator.submit import create_run
from shared.db.models import PipelineRun, StepRun
from shared.db.session import transaction
from shared.states import RunState
from shared.vault import Vault

from .config import (
    COUNTS_EVERY_S,
    FANOUT_POLL_S,
    LATENCY_POLL_S,
    RAW_WORKER,
    RUN_TIMEOUT_S,
    SKILLQ_WORKER,
    STRICT_WORKER,
)
from .cpu import CpuMeter
from .stack import Stack

# -- waiting --------------------------------------------------------------------------------

def wait_tasks(app: Any, ids: Sequence[str], poll_s: float, on_done: Callable[[int], None]
               | None = None) -> None:
    """Poll a fresh AsyncResult per id, in order, until every one is ready."""
    i, failed, deadline = 0, [], time.monotonic() + RUN_TIMEOUT_S
    while i < len(ids):
        state = AsyncResult(ids[i], app=app).state
        if state in ("SUCCESS", "FAILURE", "REVOKED"):
            if state != "SUCCESS":
                failed.append(ids[i])
            i += 1
            continue
        if on_done:
            on_done(i)
        if time.monotonic() > deadline:
            raise RuntimeError(f"raw tasks not done after {RUN_TIMEOUT_S:.0f}s ({i}/{len(ids)})")
        time.sleep(poll_s)
    if failed:
        raise RuntimeError(f"{len(failed)} raw task(s) failed, e.g. {failed[0]}")


def wait_run(db: str, run_id: str, poll_s: float, on_done: Callable[[int, int], None]
             | None = None) -> PipelineRun:
    """As `skillq run` waits: the run record each tick, the step counts every 0.25 s."""
    last_counts, deadline = 0.0, time.monotonic() + RUN_TIMEOUT_S
    while True:
        with transaction(db) as session:
            run = session.get(PipelineRun, run_id)
            assert run is not None
            if RunState(run.state).terminal:
                session.expunge(run)
                if run.state != RunState.SUCCEEDED:
                    raise RuntimeError(f"run {run_id} of {run.skill} {run.state}: {run.error}")
                return run
            now = time.monotonic()
            if now - last_counts >= COUNTS_EVERY_S:
                last_counts = now
                counts = latest_states(session, descendant_run_ids(session, run_id))
                if on_done:
                    on_done(counts.get("succeeded", 0) + counts.get("failed", 0)
                            + counts.get("skipped", 0), sum(counts.values()))
        if now > deadline:
            raise RuntimeError(f"run {run_id} not done after {RUN_TIMEOUT_S:.0f}s")
        time.sleep(poll_s)


# -- one side or the other ---------------------------------------------------------------

class Bench:
    def __init__(self, stack: Stack, progress: Progress) -> None:
        self.s = stack
        self.progress = progress
        self.items = progress.add_task("", total=None, visible=False)
        self.last_cpu: dict[str, float] = {}

    def _items(self, label: str, total: int | None) -> Callable[[int], None]:
        self.progress.update(self.items, description=f"  {label}", total=total, completed=0,
                             visible=True)
        return lambda done: self.progress.update(self.items, completed=done)

    def submit(self, skill: str, inputs: dict[str, Any], vault: Vault | None = None) -> str:
        vault = vault or self.s.vault
        with transaction(self.s.db) as session:
            run_id = create_run(session, vault, vault.get(skill), inputs,
                                source="production", triggered_by="benchmark")
        canvas.request_advance(self.s.app, run_id)
        return run_id

    def skillq_once(self, skill: str, poll_s: float = LATENCY_POLL_S) -> tuple[float, str]:
        t0 = time.perf_counter()
        run_id = self.submit(skill, {})
        wait_run(self.s.db, run_id, poll_s)
        return time.perf_counter() - t0, run_id

    def raw_once(self, app: Any, task: str, args: tuple[Any, ...] = ()) -> float:
        queue = app.conf.task_default_queue
        t0 = time.perf_counter()
        sent = app.send_task(task, args=args, queue=queue)
        wait_tasks(app, [sent.id], LATENCY_POLL_S)
        return time.perf_counter() - t0

    def skillq_fan(self, skill: str, width: int, label: str, vault: Vault | None = None
                   ) -> float:
        tick = self._items(f"{label}: skillq {skill} x{width:,}", width)
        with self.cpu() as cpu:
            t0 = time.perf_counter()
            run_id = self.submit(skill, {"items": list(range(width))}, vault)
            wait_run(self.s.db, run_id, FANOUT_POLL_S, lambda done, _total: tick(done))
            took = time.perf_counter() - t0
        self.last_cpu = cpu.only("skillq", "postgres", "redis", "client")
        if skill == "fan-cached":  # the figure is about cache hits: make sure they were
            with transaction(self.s.db) as session:
                misses = session.scalar(select(func.count()).select_from(StepRun).where(
                    StepRun.run_id == run_id, StepRun.cache_hit.is_(False)))
            if misses:
                raise RuntimeError(f"{misses} of {width} fan-cached steps missed the cache")
        tick(width)
        return took

    def cpu(self) -> CpuMeter:
        return CpuMeter({"skillq": self.s.worker_pid(SKILLQ_WORKER),
                         "raw": self.s.worker_pid(RAW_WORKER),
                         "raw-strict": self.s.worker_pid(STRICT_WORKER)})

    def raw_fan(self, app: Any, task: str, args: tuple[Any, ...], width: int,
                label: str) -> float:
        queue = app.conf.task_default_queue
        tick = self._items(f"{label}: raw {task} x{width:,}", width)
        with self.cpu() as cpu:
            t0 = time.perf_counter()
            sigs = [app.signature(task, args=args, queue=queue) for _ in range(width)]
            result = group(sigs).apply_async() if width > 1 else sigs[0].apply_async()
            ids = [r.id for r in result.results] if width > 1 else [result.id]
            wait_tasks(app, ids, FANOUT_POLL_S, tick)
            took = time.perf_counter() - t0
        worker = "raw-strict" if queue == raw_tasks.STRICT_QUEUE else "raw"
        self.last_cpu = cpu.only(worker, "redis", "client")
        tick(width)
        return took
