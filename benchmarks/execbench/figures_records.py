"""Figures (d): step-run records, the planner, a worker's claim + finish."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy import delete, func, select, text

from lifecycle.submit import create_run
from lifecycle.transitions import launch_attempts as insert_attempts
from shared.cache import input_hash
from shared.db.models import PipelineRun, StepCount, StepRun
from shared.db.session import transaction
from shared.states import StepState
from shared.store import pack

from .bench import Bench
from .figure import Figure, med


def _parent_run(b: Bench, n: int) -> str:
    with transaction(b.s.db) as session:
        return create_run(session, b.s.vault, b.s.vault.get("fan-true"),
                          {"items": list(range(n))}, source="test", triggered_by="benchmark")


def _step_values(run_id: str, n: int) -> list[dict[str, Any]]:
    rows = []
    for i in range(n):
        inputs = {"n": i}
        rows.append({"id": f"{run_id}/each/{i}/1", "run_id": run_id, "step_id": "each",
                     "item_index": i, "attempt": 1, "skill": "bench-true", "version": 1,
                     "state": StepState.PENDING.value, "source": "test", "queue": "default",
                     "inputs": inputs, "input_hash": input_hash(inputs)})
    return rows


# The what-if of (d4-lean): claim and finish as one statement each (the running-but-dead
# redelivery case of workers/claim.py is left out: it is not on the hot path).
LEAN_CLAIM = text(
    "UPDATE step_runs s SET state = 'running', worker = :worker, worker_pid = :pid, "
    "started_at = now(), heartbeat_at = now() FROM pipeline_runs r "
    "WHERE s.id = :id AND s.state = 'pending' AND r.id = s.run_id "
    "AND r.state NOT IN ('failed', 'cancelled') "
    "RETURNING s.run_id, s.step_id, s.skill, s.version, s.attempt, s.inputs, r.vault, "
    "r.plan -> 'workdir' AS workdir")
LEAN_FINISH = text(
    "UPDATE step_runs SET state = 'succeeded', outputs = '{}'::jsonb, finished_at = now(), "
    "duration_ms = 0 WHERE id = :id AND state = 'running' AND worker_pid = :pid "
    "RETURNING run_id")
LEAN_OPEN = text(
    "SELECT count(*) FROM step_runs WHERE run_id = :run AND step_id = :step "
    "AND state IN ('pending', 'running')")

COPY_COLUMNS = ("id", "run_id", "step_id", "item_index", "attempt", "skill", "version",
                "state", "source", "queue", "inputs", "input_hash", "cache_hit", "cost_usd",
                "tokens_in", "tokens_out")


def insert_planner(b: Bench, values: list[dict[str, Any]]) -> float:
    """As the planner's _launch records a fan-out: each item's inputs packed (by reference
    when large), then lifecycle.transitions.launch_attempts (COPY when wide), one commit."""
    inline = b.s.settings.inline_output_bytes
    t0 = time.perf_counter()
    with transaction(b.s.db) as session:
        insert_attempts(session, [{**v, "inputs": pack(session, v["inputs"], inline),
                                   "not_before": None} for v in values])
    return time.perf_counter() - t0


def insert_orm(b: Bench, values: list[dict[str, Any]]) -> float:
    """The planner's earlier way: a StepRun per item, one commit."""
    inline = b.s.settings.inline_output_bytes
    t0 = time.perf_counter()
    with transaction(b.s.db) as session:
        for v in values:
            session.add(StepRun(**{**v, "inputs": pack(session, v["inputs"], inline)}))
    return time.perf_counter() - t0


def insert_core(b: Bench, values: list[dict[str, Any]]) -> float:
    from sqlalchemy import insert

    t0 = time.perf_counter()
    with transaction(b.s.db) as session:
        session.execute(insert(StepRun), values)
    return time.perf_counter() - t0


def _copy_row(v: dict[str, Any]) -> list[Any]:
    return [*(v[c] for c in COPY_COLUMNS[:10]), json.dumps(v["inputs"]), v["input_hash"],
            False, 0.0, 0, 0]


def insert_executemany(b: Bench, values: list[dict[str, Any]]) -> float:
    import psycopg

    sql = (f"INSERT INTO step_runs ({', '.join(COPY_COLUMNS)}) VALUES "
           f"({', '.join(['%s'] * len(COPY_COLUMNS))})")
    with psycopg.connect(b.s.db.replace("postgresql+psycopg://", "postgresql://")) as conn:
        t0 = time.perf_counter()
        with conn.cursor() as cur:
            cur.executemany(sql, [_copy_row(v) for v in values])
        conn.commit()
        return time.perf_counter() - t0


def insert_copy(b: Bench, values: list[dict[str, Any]]) -> float:
    import psycopg

    dsn = b.s.db.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn) as conn:
        t0 = time.perf_counter()
        with conn.cursor() as cur, cur.copy(
                f"COPY step_runs ({', '.join(COPY_COLUMNS)}) FROM STDIN") as copy:
            for v in values:
                copy.write_row(_copy_row(v))
        conn.commit()
        return time.perf_counter() - t0


def _unwatched(session: Any, run_id: str) -> None:
    """These runs are driven by the figure itself: without a watch time, the workers'
    sweep (workers/sweeper.py) leaves them alone instead of advancing them meanwhile."""
    run = session.get(PipelineRun, run_id)
    run.watch_at = None


@contextlib.contextmanager
def _plain_txn(engine: Any) -> Iterator[Any]:
    from sqlalchemy.orm import Session

    with Session(engine, expire_on_commit=False) as session, session.begin():
        yield session


def fig_records(b: Bench, n: int, reps: int, lifecycle: int) -> list[Figure]:
    from lifecycle.context import WorkerContext
    from lifecycle.planner import LAZY, advance
    from lifecycle.recording import refresh_skill_benchmarks
    from workers import step_records, step_types
    from workers.claim import claim

    ways: dict[str, Callable[[Bench, list[dict[str, Any]]], float]] = {
        "planner": insert_planner, "copy": insert_copy, "orm": insert_orm,
        "core": insert_core, "executemany": insert_executemany}
    tick = b._items(f"(d) records: {n:,} rows, 4 ways", len(ways) * reps)
    runs: list[str] = []
    took: dict[str, list[float]] = {way: [] for way in ways}
    try:
        for rep in range(reps):  # interleaved, a fresh parent run each time
            for i, (way, insert) in enumerate(ways.items()):
                run_id = _parent_run(b, n)
                runs.append(run_id)
                took[way].append(insert(b, _step_values(run_id, n)))
                tick(rep * len(ways) + i + 1)
        mine, copy = took["planner"], took["copy"]
        out = [Figure("d", f"step-run records x{n:,}: the planner's insert vs bare COPY",
                      n / med(mine), n / med(copy), "rows/s", med(copy) / med(mine), ">= 0.35x",
                      med(copy) / med(mine) >= 0.35, note=f"median of {reps}; inputs packed "
                      "per row, then COPY (transitions.launch_attempts)", samples=took)]
        for way, what in (("orm", "StepRun ORM objects (the earlier planner)"),
                          ("core", "Core insert(StepRun) with a list of dicts"),
                          ("executemany", "psycopg executemany (pipeline mode)")):
            out.append(Figure(f"d-{way}", f"the same rows, {what}", n / med(took[way]),
                              n / med(copy), "rows/s", med(copy) / med(took[way]),
                              note="what-if for the planner's insert"))

        # The planner itself: launching a fan-out of n, then an advance with nothing to do.
        run_id = _parent_run(b, n)
        runs.append(run_id)
        tick = b._items(f"(d) planner advance over {n:,} items", 2)
        t0 = time.perf_counter()
        with transaction(b.s.db) as session:
            launched = advance(session, run_id, b.s.settings)
        launch_s = time.perf_counter() - t0
        sent = sum(len(d.step_run_ids) for d in launched.dispatch)
        assert sent == n, sent
        tick(1)
        t0 = time.perf_counter()
        with transaction(b.s.db) as session:
            again = advance(session, run_id, b.s.settings)
            _unwatched(session, run_id)
        reread_s = time.perf_counter() - t0
        assert not again.dispatch
        t0 = time.perf_counter()
        with transaction(b.s.db) as session:  # the floor: lock, read, write the run's row
            locked = session.get(PipelineRun, run_id, with_for_update=True, options=LAZY)
            assert locked is not None
            locked.progress = dict(locked.progress)
            locked.watch_at = None
        floor_s = time.perf_counter() - t0
        tick(2)
        out.append(Figure("d2", f"planner launch of x{n:,} (resolve, pack, COPY, commit)",
                          n / launch_s, n / med(copy), "rows/s", med(copy) / launch_s,
                          note=f"{launch_s:.2f} s"))
        out.append(Figure("d3", f"planner advance with nothing to do, {n:,} rows", reread_s *
                          1000, floor_s * 1000, "ms", reread_s / floor_s, note="what every "
                          "advance and watch pays (one sample; (s) has medians at 10,000 and "
                          "100,000); raw column: locking, reading and writing the run's row"))

        # Per step, a worker claims and finishes its record: two locked transactions and a
        # count of the step's open items; measured in a narrow and in a wide fan-out.
        ctx = WorkerContext(settings=b.s.settings, database_url=b.s.db, vault=b.s.vault_dir,
                            hostname=socket.gethostname(), pid=os.getpid())
        from sqlalchemy import create_engine

        lean_engine = create_engine(b.s.db, pool_size=2)

        def skillq_cycle(step_run: str) -> None:
            # the worker's claim: a message of one attempt (claim_batch, as workers/tasks.py)
            taken = claim(ctx, [step_run], f"benchmark@{ctx.hostname}",
                          on_due=lambda run_id: None).jobs
            assert len(taken) == 1
            job = taken[0]
            step_records.finish(ctx, job, step_types.Result(StepState.SUCCEEDED, outputs={},
                                                            duration_ms=0.0))

        def lean_cycle(step_run: str) -> None:
            with lean_engine.begin() as conn:
                row = conn.execute(LEAN_CLAIM, {"worker": ctx.hostname, "pid": ctx.pid,
                                                "id": step_run}).one()
            with lean_engine.begin() as conn:
                conn.execute(LEAN_FINISH, {"id": step_run, "pid": ctx.pid}).one()
                conn.execute(LEAN_OPEN, {"run": row.run_id, "step": row.step_id}).scalar()

        per_step: dict[str, dict[int, float]] = {"skillq": {}, "lean": {}}
        for how, cycle in (("skillq", skillq_cycle), ("lean", lean_cycle)):
            for width in (100, n):
                rid = _parent_run(b, width)
                runs.append(rid)
                with transaction(b.s.db) as session:
                    advance(session, rid, b.s.settings)
                    _unwatched(session, rid)
                m = min(width, lifecycle)
                tick = b._items(f"(d) {how} claim + finish, {m:,} steps of a x{width:,} "
                                "fan-out", m)
                t0 = time.perf_counter()
                for i in range(m):
                    cycle(f"{rid}/each/{i}/1")
                    if i % 50 == 0:
                        tick(i)
                per_step[how][width] = (time.perf_counter() - t0) / m
                tick(m)
        lean_engine.dispose()
        sk = per_step["skillq"]
        out.append(Figure("d4", f"per-step records: claim + finish, x{n:,} vs x100 fan-out",
                          sk[n] * 1000, sk[100] * 1000, "ms/step", sk[n] / sk[100],
                          note="skillq column: the wide fan-out; raw column: x100. One item per "
                          "call (no batch): claim, finish and the open-item COUNT, a transaction "
                          "each; batches of quick items share them",
                          samples=per_step))
        lean = per_step["lean"]
        out.append(Figure("d4-lean", f"what-if: the same records as lean SQL, x{n:,} vs x100",
                          lean[n] * 1000, lean[100] * 1000, "ms/step", lean[n] / lean[100],
                          note="claim = one UPDATE ... FROM pipeline_runs RETURNING, finish = "
                          "one UPDATE ... RETURNING + the same COUNT; no ORM, no pre-ping"))

        # What pool_pre_ping costs: every transaction() checks its connection out with a ping.
        plain = create_engine(b.s.db, pool_size=2, pool_pre_ping=False)
        probe = f"{run_id}/each/0/1"
        timings = {}
        for label, begin in (("skillq transaction()", lambda: transaction(b.s.db)),
                             ("no pre-ping", lambda: _plain_txn(plain))):
            for _ in range(20):
                with begin() as session:
                    session.get(StepRun, probe)
            t0 = time.perf_counter()
            for _ in range(500):
                with begin() as session:
                    session.get(StepRun, probe)
            timings[label] = (time.perf_counter() - t0) / 500 * 1000
        plain.dispose()
        out.append(Figure("d6", "a one-row read transaction: skillq's vs no pre-ping",
                          timings["skillq transaction()"], timings["no pre-ping"], "ms",
                          timings["skillq transaction()"] / timings["no pre-ping"],
                          note="pool_pre_ping=True adds a round trip (SELECT 1) to every "
                          "transaction; a step runs 4 or 5 of them"))

        with transaction(b.s.db) as session:
            history = session.scalar(select(func.count()).select_from(StepRun).where(
                StepRun.skill == "bench-true"))
        calls = 30
        t0 = time.perf_counter()
        for _ in range(calls):
            refresh_skill_benchmarks(ctx, b.s.vault_dir, "bench-true")
        refresh_ms = (time.perf_counter() - t0) / calls * 1000
        out.append(Figure("d5", "one benchmarks.json refresh (per settled step and run)",
                          refresh_ms, None, "ms", None, note=f"with {history:,} step rows of "
                          "that skill: the window is an index scan, the aggregates one "
                          "skill_stats row, so it stays flat as history grows"))
        return out
    finally:
        with transaction(b.s.db) as session:
            session.execute(delete(PipelineRun).where(PipelineRun.id.in_(runs)))
            # Counts have no foreign key to cascade from (migration 0015).
            session.execute(delete(StepCount).where(StepCount.run_id.in_(runs)))
