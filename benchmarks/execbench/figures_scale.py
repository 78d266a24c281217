"""Figures (s): the planner and a fan-out at scale (issue 16: an advance costs what
changed, not the size of the run; a wide fan-out costs per item what a narrow one does)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from sqlalchemy import delete

from lifecycle import transitions
from lifecycle.planner import LAZY
from shared.db.models import PipelineRun, StepCount
from shared.db.session import transaction
from shared.states import StepState

from .bench import Bench
from .config import SKILLQ_WORKER
from .figure import Figure, med
from .figures_records import _parent_run, _unwatched
from .memory import RssMeter

BENCH_PID = 4_000_000  # a pid no process has: the "worker" of the simulated retry


def _timed(fn: Callable[[], object], reps: int) -> list[float]:
    took = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        took.append((time.perf_counter() - t0) * 1000)
    return took


def _advance_figures(b: Bench, sizes: Sequence[int], reps: int,
                     runs: list[str]) -> list[Figure]:
    from lifecycle.planner import advance

    out: list[Figure] = []
    idle: dict[int, float] = {}
    for n in sizes:
        tick = b._items(f"(s) planner advances over x{n:,}", 4)
        run_id = _parent_run(b, n)
        runs.append(run_id)
        t0 = time.perf_counter()
        with transaction(b.s.db) as session:
            launched = advance(session, run_id, b.s.settings)
            _unwatched(session, run_id)
        launch_s = time.perf_counter() - t0
        assert sum(len(d.step_run_ids) for d in launched.dispatch) == n
        tick(1)

        def nothing(rid: str = run_id) -> None:
            with transaction(b.s.db) as session:
                again = advance(session, rid, b.s.settings)
                assert not again.dispatch and not again.finished
                _unwatched(session, rid)

        def floor(rid: str = run_id) -> None:
            # What any advance must do: lock the run's row, read its plan and ledger (not
            # its inputs: those hold the items), write it back.
            with transaction(b.s.db) as session:
                run = session.get(PipelineRun, rid, with_for_update=True, options=LAZY)
                assert run is not None
                run.progress = dict(run.progress)
                run.watch_at = None

        nothing()  # warm: the first pass after a launch also parses the plan afresh
        idle_ms, floor_ms = [], []
        for _ in range(reps):  # interleaved: what else the machine does falls on both
            floor_ms += _timed(floor, 1)
            idle_ms += _timed(nothing, 1)
        idle[n] = med(idle_ms)
        tick(2)

        # One item retried: the advance that follows adds its next attempt (one row).
        item = f"{run_id}/each/0/1"
        with transaction(b.s.db) as session:
            transitions.claim_pending(session, [item], worker="bench@retry", pid=BENCH_PID,
                                      daemon=None, now=datetime.now(UTC))
            transitions.finish_attempt(session, {
                "id": item, "state": StepState.RETRYING.value, "outputs": None,
                "error": "transient", "error_kind": "transient", "cache_hit": False,
                "exit_code": 75, "stdout_tail": "", "stderr_tail": "",
                "now": datetime.now(UTC), "duration_ms": 1.0, "not_before": None},
                pid=BENCH_PID)
        t0 = time.perf_counter()
        with transaction(b.s.db) as session:
            retried = advance(session, run_id, b.s.settings)
            _unwatched(session, run_id)
        retry_ms = (time.perf_counter() - t0) * 1000
        assert [d.step_run_ids for d in retried.dispatch] == [(f"{run_id}/each/0/2",)], \
            retried.dispatch
        tick(4)
        out.append(Figure(f"d3-{n // 1000}k", f"planner advance with nothing to do, "
                          f"x{n:,} pending items", idle[n], med(floor_ms), "ms",
                          idle[n] / med(floor_ms), note=f"median of {reps}; raw column: the "
                          "floor, locking the run's row, reading it and writing it back",
                          samples={"advance_ms": idle_ms, "floor_ms": floor_ms}))
        out.append(Figure(f"d3r-{n // 1000}k", f"planner advance after one item of x{n:,} "
                          "is retrying (adds its next attempt)", retry_ms, med(floor_ms),
                          "ms", retry_ms / med(floor_ms), note="raw column: the same floor"))
        out.append(Figure(f"d2-{n // 1000}k", f"planner launch of x{n:,} (resolve, pack, "
                          "COPY, commit)", n / launch_s, None, "rows/s", None,
                          note=f"{launch_s:.2f} s"))
    small, large = min(sizes), max(sizes)
    if small != large:
        grew = idle[large] - idle[small]
        out.append(Figure("d3-flat", f"advance with nothing to do: x{large:,} vs x{small:,}",
                          idle[large], idle[small], "ms", idle[large] / idle[small],
                          "within 10 ms", abs(grew) <= 10.0,
                          note=f"{grew:+.1f} ms from x{small:,} to x{large:,}"))
    return out


def _fan(b: Bench, width: int, label: str) -> tuple[float, dict[str, float], dict[str, float]]:
    groups = {"client": os.getpid(), "worker": b.s.worker_pid(SKILLQ_WORKER)}
    with RssMeter(groups) as rss:
        took = b.skillq_fan("fan-cached", width, label)
    return took, rss.start, rss.peak


def _fan_figures(b: Bench, base: int, wide: int, reps: int) -> list[Figure]:
    b.skillq_fan("fan-cached", 50, "(s) warm-up")  # history sizes its batches, as in (b)
    narrow = [_fan(b, base, f"(s) x{base:,} rep {r + 1}/{reps}") for r in range(reps)]
    took, start, peak = _fan(b, wide, f"(s) x{wide:,}")
    per_base = med([t for t, _, _ in narrow]) / base * 1000
    per_wide = took / wide * 1000
    off = per_wide / per_base - 1
    out = [Figure("f", f"fan-out x{wide:,} (cache hits): ms per item vs x{base:,}", per_wide,
                  per_base, "ms/item", per_wide / per_base, "+-20%", abs(off) <= 0.2,
                  note=f"{took:.1f} s for x{wide:,}; x{base:,}: median of {reps}, "
                  f"{med([t for t, _, _ in narrow]):.2f} s",
                  samples={"wide_s": took, "base_s": [t for t, _, _ in narrow]})]
    _, base_start, base_peak = narrow[len(narrow) // 2]
    for group, what in (("client", "the waiting client (it also plans the launch)"),
                        ("worker", "the skillq worker and its pool (it plans the rest)")):
        grown, grown_base = peak[group] - start[group], base_peak[group] - base_start[group]
        out.append(Figure(f"f-rss-{group}", f"peak RSS of {what}, x{wide:,} vs x{base:,}",
                          peak[group], base_peak[group], "MiB",
                          peak[group] / max(base_peak[group], 1e-9),
                          note=f"grew {grown:+.0f} MiB during x{wide:,}, "
                          f"{grown_base:+.0f} MiB during x{base:,}",
                          samples={"wide": {"start": start[group], "peak": peak[group]},
                                   "base": {"start": base_start[group],
                                            "peak": base_peak[group]}}))
    return out


def fig_scale(b: Bench, sizes: Sequence[int], reps: int, fan_base: int, fan_wide: int,
              fan_reps: int) -> list[Figure]:
    # The fan-outs first: the client's memory is then what they made it, not what the
    # advances below (run in this process too) left behind.
    out = _fan_figures(b, fan_base, fan_wide, fan_reps)
    runs: list[str] = []
    try:
        out += _advance_figures(b, sizes, reps, runs)
    finally:
        with transaction(b.s.db) as session:
            session.execute(delete(PipelineRun).where(PipelineRun.id.in_(runs)))
            # Counts have no foreign key to cascade from (migration 0015).
            session.execute(delete(StepCount).where(StepCount.run_id.in_(runs)))
    return out
