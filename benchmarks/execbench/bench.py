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

from orchestrator import launch
from orchestrator.connect import Connection
from orchestrator.launch import Progress as RunProgress
from shared.db.models import PipelineRun, StepRun
from shared.db.session import transaction
from shared.plan import build_plan
from shared.states import RunState
from shared.vault import Vault

from .config import (
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


def wait_run(b: Bench, run_id: str, on_done: Callable[[int, int], None] | None = None,
             on_end: Callable[[PipelineRun], None] | None = None) -> PipelineRun:
    """As `skillq run` waits (orchestrator.launch.wait_run: woken by the planner's NOTIFY;
    ``on_end`` when it would show the result, before the run's files are awaited)."""
    def show(p: RunProgress) -> None:
        if on_done:
            on_done(p.done, p.total)

    run = launch.wait_run(b.conn, run_id, on_progress=show, timeout_s=RUN_TIMEOUT_S,
                          on_end=on_end)
    if run.state != RunState.SUCCEEDED:
        raise RuntimeError(f"run {run_id} of {run.skill} {run.state}: {run.error}")
    return run


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

    @property
    def conn(self) -> Connection:
        return Connection(self.s.settings, self.s.endpoints, self.s.app, self.s.embedded)

    def submit(self, skill: str, inputs: dict[str, Any], vault: Vault | None = None) -> str:
        """As `skillq run` starts a run once its checks passed (orchestrator.launch)."""
        vault = vault or self.s.vault
        chosen = vault.get(skill)
        plan = build_plan(chosen, vault.skills, inputs)
        return launch.launch(self.conn, vault, chosen, inputs, plan=plan, source="production",
                             triggered_by="benchmark", waiting=True)

    def skillq_once(self, skill: str) -> tuple[float, str]:
        """Seconds until the client has the result (when `skillq run` prints it: its
        benchmarks.json files are awaited after, as the command does), and the run id."""
        shown: list[float] = []
        t0 = time.perf_counter()
        run_id = self.submit(skill, {})
        wait_run(self, run_id, on_end=lambda _: shown.append(time.perf_counter()))
        return shown[0] - t0, run_id

    def raw_once(self, app: Any, task: str, args: tuple[Any, ...] = ()) -> float:
        """Seconds of one raw round trip, waited as a Celery user waits:
        ``AsyncResult.get()``, woken by the Redis backend's pub/sub (as skillq's client
        is woken by its NOTIFY)."""
        queue = app.conf.task_default_queue
        t0 = time.perf_counter()
        app.send_task(task, args=args, queue=queue).get(timeout=RUN_TIMEOUT_S)
        return time.perf_counter() - t0

    def raw_polled(self, app: Any, task: str, args: tuple[Any, ...] = ()) -> float:
        """``raw_once`` waited by polling every LATENCY_POLL_S, as (a) was measured
        until 2026-12-05 (figure a-wait keeps the two side by side)."""
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
            wait_run(self, run_id, lambda done, _total: tick(done))
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
