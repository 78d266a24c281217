"""Figures (a): one-step latency, raw Celery with skillq's settings, `skillq run`."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import raw_tasks
from sqlalchemy import select

from shared.db.models import PipelineRun, StepRun
from shared.db.session import transaction

from .bench import Bench
from .config import (
    LATENCY_POLL_S,
    SETTLE_S,
    TRUE_ARGV,
)
from .figure import Figure, med

LATENCY_TARGET = 2.0  # (a) against the raw round trip of the same run (issue 16)


def latency_phases(db: str, run_ids: Sequence[str], seen: dict[str, tuple[float, float]]
                   ) -> dict[str, float]:
    """Median ms of each phase of one-step runs, from their records and client clocks."""
    phases: dict[str, list[float]] = {}
    with transaction(db) as session:
        for run_id in run_ids:
            run = session.get(PipelineRun, run_id)
            step = session.scalars(select(StepRun).where(StepRun.run_id == run_id)).first()
            if run is None or step is None or None in (run.started_at, run.finished_at,
                                                       step.started_at, step.finished_at):
                continue
            submitted, observed = seen[run_id]
            points = [("client: build the plan, record the run, start planning it",
                       submitted, run.started_at.timestamp()),
                      ("client: route, insert, commit + send; broker; worker claims",
                       run.started_at.timestamp(), step.started_at.timestamp()),
                      ("worker: skill, cache lookup or script, record the step",
                       step.started_at.timestamp(), step.finished_at.timestamp()),
                      ("worker: plan again, run succeeded",
                       step.finished_at.timestamp(), run.finished_at.timestamp()),
                      ("worker: commit + NOTIFY; client wakes, reads run",
                       run.finished_at.timestamp(), observed)]
            for name, start, end in points:
                phases.setdefault(name, []).append((end - start) * 1000)
    return {name: round(med(ms), 2) for name, ms in phases.items()}


def fig_latency(b: Bench, n: int, warm: int) -> list[Figure]:
    out = []
    for key, skill, task, args, what in (
            ("a", "bench-cached", raw_tasks.NOOP, (), "cache-hit step vs a no-op"),
            ("a2", "bench-true", raw_tasks.SPAWN, (TRUE_ARGV,), "script `true` vs a task "
             "running `true`")):
        label = f"({key}) latency: {what}"
        tick = b._items(label, warm + n)
        sk, raw, run_ids, seen = [], [], [], {}
        for i in range(warm + n):  # interleaved, so both sides share the machine's moods
            raw_s = b.raw_once(b.s.raw, task, args)
            time.sleep(SETTLE_S)
            wall = time.time()
            sk_s, run_id = b.skillq_once(skill)
            time.sleep(SETTLE_S)
            if i >= warm:
                raw.append(raw_s)
                sk.append(sk_s)
                run_ids.append(run_id)
                seen[run_id] = (wall, wall + sk_s)
            tick(i + 1)
        ratio = med(sk) / med(raw)
        out.append(Figure(
            key, f"one-step latency, {what}", med(sk) * 1000, med(raw) * 1000, "ms", ratio,
            f"<= {LATENCY_TARGET:g}x" if key == "a" else "",
            ratio <= LATENCY_TARGET if key == "a" else None,
            note=f"median of {n}; p90 skillq {sorted(sk)[int(0.9 * (n - 1))] * 1000:.1f} ms",
            samples={"skillq_s": sk, "raw_s": raw,
                     "skillq_phases_ms": latency_phases(b.s.db, run_ids, seen)}))
    return out


def fig_latency_cpu(b: Bench, n: int) -> Figure:
    """CPU milliseconds one one-step run costs every process, each side alone (as in
    figure a: an idle pause before each run): on a small machine, what bounds latency."""
    ran: dict[str, Callable[[], object]] = {
        "raw": lambda: b.raw_once(b.s.raw, raw_tasks.NOOP),
        "skillq": lambda: b.skillq_once("bench-cached")}
    per_run: dict[str, dict[str, float]] = {}
    tick = b._items("CPU of one-step runs", 2 * n)
    for side, once in ran.items():
        with b.cpu() as cpu:
            for i in range(n):
                time.sleep(SETTLE_S)
                once()
                tick(i + 1 + (n if side == "skillq" else 0))
        groups = ("skillq", "postgres", "redis", "client") if side == "skillq" else \
            ("raw", "redis", "client")
        per_run[side] = {g: round(v / n * 1000, 2) for g, v in cpu.only(*groups).items()}
    totals = {side: sum(ms.values()) for side, ms in per_run.items()}
    shown = "; ".join(f"{side}: " + ", ".join(f"{g} {ms:.1f}" for g, ms in groups.items())
                      for side, groups in per_run.items())
    return Figure("a-cpu", "CPU ms per one-step run, all processes (cache hit vs no-op)",
                  totals["skillq"], totals["raw"], "ms",
                  totals["skillq"] / totals["raw"] if totals["raw"] else None,
                  note=f"{n} runs each; {shown} (skillq: its worker with its pool)",
                  samples={"per_run_ms": per_run})


FLOOR_TABLE = "CREATE TEMP TABLE IF NOT EXISTS latency_floor (id int PRIMARY KEY, v jsonb)"


def fig_durable_floor(b: Bench, n: int) -> Figure:
    """What any design pays that records a run before it answers: two durable commits
    (the run, then its step's result) and one Celery round trip, with nothing else."""
    import psycopg

    dsn = b.s.db.replace("postgresql+psycopg://", "postgresql://")
    tick = b._items("latency floor: 2 durable commits + a round trip", n)
    floor, raw = [], []
    with psycopg.connect(dsn) as pg:
        pg.execute(FLOOR_TABLE)
        pg.commit()
        for i in range(n):
            raw.append(b.raw_once(b.s.raw, raw_tasks.NOOP))
            t0 = time.perf_counter()
            pg.execute("INSERT INTO latency_floor VALUES (%s, '{}')", (i,))
            pg.commit()
            b.raw_once(b.s.raw, raw_tasks.NOOP)
            pg.execute("UPDATE latency_floor SET v = '{\"ok\": true}' WHERE id = %s", (i,))
            pg.commit()
            floor.append(time.perf_counter() - t0)
            tick(i + 1)
    ratio = med(floor) / med(raw)
    return Figure("a-floor", "floor: 2 durable PostgreSQL commits + 1 Celery round trip",
                  med(floor) * 1000, med(raw) * 1000, "ms", ratio,
                  note=f"no planning, no files: if this alone is above {LATENCY_TARGET:g}x, "
                  "target (a) is out "
                  "of reach for a design that records each run durably",
                  samples={"floor_s": floor, "raw_s": raw})


def fig_strict_latency(b: Bench, n: int) -> Figure:
    tick = b._items("latency: raw Celery with skillq's settings", n)
    strict, plain = [], []
    for i in range(n):
        plain.append(b.raw_once(b.s.raw, raw_tasks.NOOP))
        strict.append(b.raw_once(b.s.strict, raw_tasks.NOOP))
        tick(i + 1)
    return Figure("a3", "round trip, raw Celery with skillq's Celery settings",
                  med(strict) * 1000, med(plain) * 1000, "ms", med(strict) / med(plain),
                  note="attribution: acks_late, prefetch 1, events, track_started",
                  samples={"strict_s": strict, "raw_s": plain})


def fig_raw_waits(b: Bench, n: int) -> Figure:
    """The raw side's wait: (a) and its floors wait for the raw result with
    ``AsyncResult.get()`` (pub/sub); polling every LATENCY_POLL_S, as (a) did until
    2026-12-05, is a little slower, which flattered skillq's ratio."""
    tick = b._items("raw round trip: AsyncResult.get() vs polled", n)
    polled, got = [], []
    for i in range(n):
        polled.append(b.raw_polled(b.s.raw, raw_tasks.NOOP))
        time.sleep(SETTLE_S)
        got.append(b.raw_once(b.s.raw, raw_tasks.NOOP))
        time.sleep(SETTLE_S)
        tick(i + 1)
    return Figure("a-wait", "raw round trip, polled (as (a) was until 2026-12-05) vs "
                  "AsyncResult.get() (as (a) is)",
                  med(polled) * 1000, med(got) * 1000, "ms", med(polled) / med(got),
                  note=f"median of {n} each, interleaved; polled every "
                  f"{LATENCY_POLL_S * 1000:g} ms",
                  samples={"polled_s": polled, "get_s": got})


def cli_latency(b: Bench, runs: int) -> Figure:
    """`skillq run bench-cached` as a user types it: a process, the vault, the queue check."""
    env = {**os.environ, **b.s.endpoints.env(), "SKILLQ_HOME": str(b.s.home),
           "SKILLQ_VAULT": str(b.s.vault_dir)}
    skillq = Path(sys.executable).with_name("skillq")
    tick = b._items("`skillq run` CLI, one step", runs)
    took = []
    for i in range(runs):
        t0 = time.perf_counter()
        done = subprocess.run([str(skillq), "run", "bench-cached", "--json"], env=env,
                              cwd=b.s.home, capture_output=True, text=True, timeout=120)
        took.append(time.perf_counter() - t0)
        if done.returncode:
            raise RuntimeError(f"skillq run failed ({done.returncode}): {done.stderr[-2000:]}")
        tick(i + 1)
    python = subprocess.run([sys.executable, "-c", "pass"], capture_output=True)
    assert python.returncode == 0
    return Figure("a4", "`skillq run` CLI wall time, one step (as a user sees it)",
                  med(took) * 1000, None, "ms", None,
                  note="a new process: imports, the vault, the daemon-registry check, the run",
                  samples={"cli_s": took})
