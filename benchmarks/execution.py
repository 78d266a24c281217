"""Execution overhead: skillq side by side with its raw-Celery floor, same broker, same run.

    .venv/bin/python benchmarks/execution.py [--quick] [--py-spy DIR] [--big-vault N]
                                             [--only a,b,d,e,cli] [--keep]

It starts its own stack: a real Redis and PostgreSQL under a temporary SKILLQ_HOME (the
embedded default, orchestrator/embedded.py), or the servers named by SKILLQ_BROKER_URL and
SKILLQ_DATABASE_URL when both are set (use a Redis database and a PostgreSQL database no
other skillq uses: the skillq side sends to the real `default` and `control` queues).
Then three worker processes, each at concurrency 2:

  skillq   `python -m workers.main --queues default,control` (what `skillq up` starts),
           serving a generated vault in the temporary folder;
  raw      `celery -A raw_tasks worker -Q bench-raw` (benchmarks/raw_tasks.py: a no-op and
           a subprocess task, plain Celery defaults), on its own queue of the same broker;
  raw-strict  the same tasks with skillq's Celery settings (acks_late, prefetch 1,
              task events, track_started): an attribution row, not a target

The skillq side goes through the real `skillq run` path: orchestrator.submit.create_run in
a transaction, canvas.request_advance, and a wait that polls the run record as `skillq run`
does (its terminal check every tick, its progress counts every 0.25 s). The raw side
waits by polling a fresh AsyncResult per task id. Both sides poll at the same interval
(2 ms for latency, 20 ms for fan-outs), so neither pays the CLI's 0.25 s poll period.

Figures (ratio, target):
  a  one-step pipeline latency vs a bare Celery round trip, median of N        <= 1.3x
  b  1,000-item fan-out of the cheapest step vs a group of 1,000 no-ops,
     throughput                                                                 >= 0.8x
     The cheapest step skillq can run is a cache hit: a script skill with
     `cache: {enabled: true}` whose inputs were seen before succeeds from the cache
     without spawning anything (orchestrator steps start a nested run, instruction-only
     steps have no executor). Every other step is a script, so (c) is reported too.
  c  1,000-item fan-out of a script skill running `true` vs a Celery group of 1,000
     tasks each running `true` through subprocess, time                         <= 1.15x
  d  step-run records: the planner's way (StepRun ORM objects, one commit) vs
     PostgreSQL COPY of the same rows into the same table, throughput          >= 0.35x
  e  widths 10, 100, 1,000, 5,000 (--quick: up to 1,000): the marginal time per item,
     (T(w) - T(1)) / (w - 1), stays within +-20 % of its median over the widths
Informational rows (no target) break the gaps down:
  a2 a3 a4   latency of a script step; raw Celery with skillq's Celery settings (acks_late,
             prefetch 1, task events, track_started); `skillq run` from the shell
  b2 b3      the script fan-out against no-ops; a no-op group with skillq's Celery settings
  *-cpu      CPU seconds of each process group (skillq worker and its pool children and
             their subprocesses, PostgreSQL, Redis, this client) during a fan-out
  c2         (full run) scripts running `python3 -I -S -c pass`; the workers' PATH starts
             with this venv's bin, so python3 is an interpreter, not a pyenv shim
  b-vault    (full run, --big-vault N) the same fan-out in a vault of N more skills
  d-*, d2-d6 the same rows through Core insert() and psycopg executemany; the planner's
             launch and an advance with nothing to do; a worker's claim + finish per step
             in a narrow and a wide fan-out, against a lean-SQL what-if; what pool pre-ping
             adds to a transaction; one benchmarks.json refresh
  and, after the table, the phases of a one-step run read from its records.
With --py-spy DIR, one fan-out of each kind runs again under py-spy (on-CPU, then with
idle samples) and the worker's hotspots are printed.

Results: a rich table, and benchmarks/results/execution-<date>.json with every sample.
Every process it started is stopped at the end, on Ctrl-C and on errors too. Exit status
1 when a target is missed. On 2 cores the full run takes 6-12 minutes, --quick 1-3.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))  # raw_tasks

import raw_tasks  # noqa: E402
from celery import group  # noqa: E402
from celery.result import AsyncResult  # noqa: E402
from sqlalchemy import delete, func, select, text  # noqa: E402

from orchestrator import canvas  # noqa: E402
from orchestrator.embedded import resolve_endpoints, stop_embedded  # noqa: E402
from orchestrator.history import descendant_run_ids, latest_states  # noqa: E402
from orchestrator.local_stack import pid_alive, stop_pids  # noqa: E402
from orchestrator.submit import create_run  # noqa: E402
from shared.cache import input_hash  # noqa: E402
from shared.celery_app import create_app  # noqa: E402
from shared.db.migrate import upgrade  # noqa: E402
from shared.db.models import PipelineRun, StepRun  # noqa: E402
from shared.db.session import transaction  # noqa: E402
from shared.settings import Settings  # noqa: E402
from shared.states import RunState, StepState  # noqa: E402
from shared.store import pack  # noqa: E402
from shared.vault import Vault, load_vault  # noqa: E402

console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
RESULTS = HERE / "results"
LATENCY_POLL_S = 0.002
FANOUT_POLL_S = 0.020
SETTLE_S = 0.05  # between latency samples: each starts on an idle worker
COUNTS_EVERY_S = 0.25  # `skillq run` refreshes its progress counts this often
WORKER_READY_S = 60.0
RUN_TIMEOUT_S = 900.0
SKILLQ_WORKER, RAW_WORKER, STRICT_WORKER = "bench-skillq", "bench-raw", "bench-raw-strict"
TRUE_ARGV = ["true"]
PYTHON_ARGV = ["python3", "-I", "-S", "-c", "pass"]

# -- the generated vault ------------------------------------------------------------------

LEAF = """---
name: {name}
description: {description}
version: 1
approach: code
{inputs}run:
  command: "{command}"
  timeout: 30
  retries: 0
cache:
  enabled: {cache}
  ttl: 86400
---
# {name}

{description}
"""

FAN = """---
name: {name}
description: Fan {leaf} out over a list of integers, one step per item.
version: 1
inputs:
  - name: items
    type: integer[]
    required: true
steps:
  - id: each
    skill: {leaf}
    for_each: ${{inputs.items}}
{with_}---
# {name}

One step: `{leaf}` for each item of `items`.
"""

N_INPUT = """inputs:
  - name: n
    type: integer
    required: false
    default: 0
"""


def write_vault(root: Path) -> Vault:
    leaves = {
        # no inputs and cache on: after one run, every call is a cache hit
        "bench-cached": ("Does nothing, deterministically; cached, so a repeat is a cache hit.",
                         "true", "", "true"),
        "bench-true": ("Runs true, the cheapest script a step can spawn.", "true", N_INPUT,
                       "false"),
        "bench-python": ("Starts an isolated Python that does nothing.",
                         " ".join(PYTHON_ARGV), N_INPUT, "false"),
    }
    for name, (description, command, inputs, cache) in leaves.items():
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_text(LEAF.format(
            name=name, description=description, command=command, inputs=inputs, cache=cache))
    fans = {"fan-cached": ("bench-cached", ""),
            "fan-true": ("bench-true", "    with:\n      n: ${item}\n"),
            "fan-python": ("bench-python", "    with:\n      n: ${item}\n")}
    for name, (leaf, with_) in fans.items():
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_text(FAN.format(name=name, leaf=leaf, with_=with_))
    vault = load_vault(root)
    if vault.problems:
        raise SystemExit("the generated vault is invalid:\n"
                         + "\n".join(str(p) for p in vault.problems))
    return vault


# -- the stack ------------------------------------------------------------------------------

@dataclass
class Worker:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path


class Stack:
    """Servers (embedded unless configured), the skillq worker and the raw workers."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.vault_dir = home / "vault"
        self.workers: list[Worker] = []
        self.embedded = False
        self.started_servers = False

    def start(self, progress: Callable[[str], None]) -> None:
        env_broker = os.environ.get("SKILLQ_BROKER_URL") or None
        env_db = os.environ.get("SKILLQ_DATABASE_URL") or None
        self.embedded = not (env_broker and env_db)
        self.settings = Settings(_env_file=None, home=self.home, vault=self.vault_dir,
                                 broker_url=env_broker if not self.embedded else None,
                                 database_url=env_db if not self.embedded else None,
                                 result_backend=None if self.embedded else
                                 os.environ.get("SKILLQ_RESULT_BACKEND") or None)
        progress("starting Redis and PostgreSQL" if self.embedded else "checking the servers")
        self.started_servers = self.embedded
        self.endpoints = resolve_endpoints(self.settings)
        self.db = self.endpoints.database_url
        upgrade(self.db)
        self.vault = write_vault(self.vault_dir)
        self.app = create_app(self.settings, broker_url=self.endpoints.broker_url,
                              result_backend=self.endpoints.result_backend)
        self.raw = raw_tasks.make_app(self.endpoints.broker_url)
        self.strict = raw_tasks.make_app(self.endpoints.broker_url, strict=True)
        progress("starting workers")
        # python3 must be a real interpreter for (c2), not a pyenv shim (a bash script
        # costing ~60 ms a start): the venv's bin comes first on the workers' PATH.
        path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        env = {**os.environ, **self.endpoints.env(), "PATH": path,
               "SKILLQ_HOME": str(self.home),
               "SKILLQ_VAULT": str(self.vault_dir), "BENCH_RAW_BROKER": self.endpoints.broker_url,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE),
                                                           os.environ.get("PYTHONPATH")]))}
        self._spawn(SKILLQ_WORKER, [sys.executable, "-m", "workers.main", "--queues",
                                    "default,control", "--concurrency", "2", "--name",
                                    SKILLQ_WORKER], env)
        raw = [sys.executable, "-m", "celery", "-A", "raw_tasks", "worker", "--concurrency",
               "2", "--pool", "prefork", "--without-mingle", "--without-gossip"]
        self._spawn(RAW_WORKER, [*raw, "-Q", raw_tasks.QUEUE, "--hostname",
                                 f"{RAW_WORKER}@%h", "--loglevel", "WARNING"], env)
        self._spawn(STRICT_WORKER, [*raw, "-Q", raw_tasks.STRICT_QUEUE, "--hostname",
                                    f"{STRICT_WORKER}@%h", "--loglevel", "INFO"],
                    {**env, "BENCH_RAW_STRICT": "1"})
        self._wait_ready()

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        log = self.home / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as fh:
            # Own session: a terminal's Ctrl-C reaches only this script, which stops them.
            proc = subprocess.Popen(argv, env=env, cwd=self.home, stdin=subprocess.DEVNULL,
                                    stdout=fh, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        self.workers.append(Worker(name, proc, log))

    def _wait_ready(self) -> None:
        host = socket.gethostname()
        wanted = {f"{w.name}@{host}" for w in self.workers}
        ready: set[str] = set()
        deadline = time.monotonic() + WORKER_READY_S
        while ready != wanted:
            for w in self.workers:
                if w.proc.poll() is not None:
                    raise SystemExit(f"worker {w.name} exited; its log {w.log}:\n"
                                     + w.log.read_text(errors="replace")[-3000:])
            for reply in self.app.control.ping(destination=sorted(wanted - ready),
                                               timeout=0.5) or []:
                ready.update(name for name in reply if name in wanted)
            if time.monotonic() > deadline:
                raise SystemExit(f"workers not ready after {WORKER_READY_S:.0f}s: "
                                 f"{sorted(wanted - ready)}")

    def worker_pid(self, name: str) -> int:
        return next(w.proc.pid for w in self.workers if w.name == name)

    def stop(self) -> None:
        live = [w for w in self.workers if w.proc.poll() is None]
        # SIGTERM to the worker itself (warm shutdown), SIGKILL its whole group after 15 s.
        stop_pids([(w.proc.pid, signal.SIGTERM) for w in live], group=True, timeout_s=15)
        for w in self.workers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                w.proc.wait(timeout=5)
        self.workers.clear()
        if self.started_servers:
            stop_embedded(self.home)
            self.started_servers = False


# -- CPU accounting ------------------------------------------------------------------------

TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def _proc_table() -> dict[int, tuple[str, int, float]]:
    """pid -> (command name, parent pid, CPU seconds of it and its reaped children)."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue
        name = raw[raw.index("(") + 1:raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2:].split()
        # fields[1] ppid; [11..14] utime stime cutime cstime
        ticks = sum(int(x) for x in fields[11:15])
        table[int(entry.name)] = (name, int(fields[1]), ticks * TICK_S)
    return table


class CpuMeter:
    """CPU seconds spent by the servers, each worker (with its pool children and the
    processes they spawned and reaped) and this client, between start() and stop()."""

    def __init__(self, workers: dict[str, int]) -> None:
        self.workers = workers

    def _sample(self) -> dict[str, float]:
        table, out = _proc_table(), {}
        for pid, (name, ppid, cpu) in table.items():
            if name.startswith("postgres"):
                group_name = "postgres"
            elif name.startswith("redis-server"):
                group_name = "redis"
            elif pid == os.getpid():
                group_name = "client"
            else:
                group_name = next((w for w, wpid in self.workers.items()
                                   if wpid in (pid, ppid)), "")
            if group_name:
                out[group_name] = out.get(group_name, 0.0) + cpu
        return out

    def __enter__(self) -> CpuMeter:
        self.before = self._sample()
        return self

    def __exit__(self, *exc: object) -> None:
        after = self._sample()
        self.used = {k: round(after.get(k, 0.0) - self.before.get(k, 0.0), 2)
                     for k in sorted(set(after) | set(self.before))}

    def only(self, *groups: str) -> dict[str, float]:
        return {k: v for k, v in self.used.items() if k in groups and v > 0}


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


# -- figures --------------------------------------------------------------------------------

@dataclass
class Figure:
    key: str
    name: str
    skillq: float | None
    raw: float | None
    unit: str
    ratio: float | None
    target: str = ""
    passed: bool | None = None  # None: informational
    note: str = ""
    samples: dict[str, Any] = field(default_factory=dict)


def med(values: Sequence[float]) -> float:
    return float(statistics.median(values))


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
            points = [("submit -> first advance starts (create_run, send, queue)",
                       submitted, run.started_at.timestamp()),
                      ("advance: plan + commit + dispatch + queue + claim",
                       run.started_at.timestamp(), step.started_at.timestamp()),
                      ("step: vault, cache/script, record",
                       step.started_at.timestamp(), step.finished_at.timestamp()),
                      ("step recorded -> run succeeded (count, benchmarks.json, "
                       "advance again)", step.finished_at.timestamp(),
                       run.finished_at.timestamp()),
                      ("run succeeded -> client sees it (commit, poll)",
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
            "<= 1.3x" if key == "a" else "", ratio <= 1.3 if key == "a" else None,
            note=f"median of {n}; p90 skillq {sorted(sk)[int(0.9 * (n - 1))] * 1000:.1f} ms",
            samples={"skillq_s": sk, "raw_s": raw,
                     "skillq_phases_ms": latency_phases(b.s.db, run_ids, seen)}))
    return out


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
    from orchestrator.connect import consumed_queues  # what `skillq run` checks first

    t0 = time.perf_counter()
    consumed_queues(b.s.app)
    inspect_s = time.perf_counter() - t0
    python = subprocess.run([sys.executable, "-c", "pass"], capture_output=True)
    assert python.returncode == 0
    return Figure("a4", "`skillq run` CLI wall time, one step (as a user sees it)",
                  med(took) * 1000, None, "ms", None,
                  note=f"of which its queue check (inspect active_queues) {inspect_s * 1000:.0f}"
                  " ms; poll period 250 ms", samples={"cli_s": took, "inspect_s": inspect_s})


def fig_fanouts(b: Bench, width: int, reps: int, python: bool) -> list[Figure]:
    out: list[Figure] = []
    pairs = [("b", "fan-cached", b.s.raw, raw_tasks.NOOP, ()),
             ("c", "fan-true", b.s.raw, raw_tasks.SPAWN, (TRUE_ARGV,))]
    if python:
        pairs.append(("c2", "fan-python", b.s.raw, raw_tasks.SPAWN, (PYTHON_ARGV,)))
    times: dict[str, tuple[list[float], list[float]]] = {}
    cpu: dict[str, dict[str, dict[str, float]]] = {}
    for key, skill, app, task, args in pairs:
        sk, raw = [], []
        for rep in range(reps):
            label = f"({key}) rep {rep + 1}/{reps}"
            raw.append(b.raw_fan(app, task, args, width, label))
            cpu[key] = {"raw": b.last_cpu}
            sk.append(b.skillq_fan(skill, width, label))
            cpu[key]["skillq"] = b.last_cpu
        times[key] = (sk, raw)
    sk, raw = times["b"]
    tput_sk, tput_raw = width / med(sk), width / med(raw)
    out.append(Figure("b", f"fan-out x{width:,}, cheapest step (cache hit) vs no-op group",
                      tput_sk, tput_raw, "items/s", tput_sk / tput_raw, ">= 0.8x",
                      tput_sk / tput_raw >= 0.8, note=f"median of {reps}; "
                      f"{med(sk):.2f} s vs {med(raw):.2f} s",
                      samples={"skillq_s": sk, "raw_s": raw}))
    sk_c, raw_c = times["c"]
    out.append(Figure("c", f"fan-out x{width:,}, script `true` vs group spawning `true`",
                      med(sk_c), med(raw_c), "s", med(sk_c) / med(raw_c), "<= 1.15x",
                      med(sk_c) / med(raw_c) <= 1.15, note=f"median of {reps}",
                      samples={"skillq_s": sk_c, "raw_s": raw_c}))
    tput_true = width / med(sk_c)
    out.append(Figure("b2", f"fan-out x{width:,}, script `true` vs no-op group", tput_true,
                      tput_raw, "items/s", tput_true / tput_raw,
                      note="the cheapest step that spawns: same runs as (c)"))
    if python:
        sk_p, raw_p = times["c2"]
        out.append(Figure("c2", f"fan-out x{width:,}, `python -I -S -c pass` script vs group",
                          med(sk_p), med(raw_p), "s", med(sk_p) / med(raw_p),
                          note=f"median of {reps}", samples={"skillq_s": sk_p, "raw_s": raw_p}))
    cpu_rows: list[Figure] = []
    for key in cpu:  # CPU seconds of the last repetition, by process group
        sk_cpu, raw_cpu = cpu[key]["skillq"], cpu[key]["raw"]
        split = "; ".join(f"{side}: " + ", ".join(f"{k} {v:.1f}" for k, v in used.items())
                          for side, used in (("skillq", sk_cpu), ("raw", raw_cpu)))
        total_sk, total_raw = sum(sk_cpu.values()), sum(raw_cpu.values())
        cpu_rows.append(Figure(f"{key}-cpu", f"CPU seconds, x{width:,} fan-out of ({key})",
                               total_sk, total_raw, "s", total_sk / max(total_raw, 1e-9),
                               note=split, samples=cpu[key]))
    return out + cpu_rows


def fig_strict_fan(b: Bench, width: int, reps: int) -> Figure:
    strict, plain = [], []
    cpu: dict[str, dict[str, float]] = {}
    for rep in range(reps):
        plain.append(b.raw_fan(b.s.raw, raw_tasks.NOOP, (), width, f"strict rep {rep + 1}"))
        cpu["raw"] = b.last_cpu
        strict.append(b.raw_fan(b.s.strict, raw_tasks.NOOP, (), width,
                                f"strict rep {rep + 1}"))
        cpu["strict"] = b.last_cpu
    t_s, t_p = width / med(strict), width / med(plain)
    cpu_note = "; ".join(f"{side}: " + ", ".join(f"{k} {v:.1f}" for k, v in used.items())
                         for side, used in cpu.items())
    return Figure("b3", f"no-op group x{width:,}, raw Celery with skillq's Celery settings",
                  t_s, t_p, "items/s", t_s / t_p,
                  note="attribution: acks_late, prefetch 1, events, track_started; CPU s "
                  + cpu_note, samples={"strict_s": strict, "raw_s": plain, "cpu_s": cpu})


def make_big_vault(root: Path, extra: int) -> Vault:
    """The bench skills plus ``extra`` realistic ones (benchmarks/validate_vault.py's)."""
    from validate_vault import generate

    root.mkdir(parents=True)
    generate(root, extra, seed=7)
    write_vault(root)
    vault = load_vault(root)
    if vault.problems:
        raise SystemExit(f"the big vault has {len(vault.problems)} problems, e.g. "
                         f"{vault.problems[0]}")
    return vault


def fig_big_vault(b: Bench, big: Vault, width: int, reps: int) -> Figure:
    small, large = [], []
    for rep in range(reps):
        small.append(b.skillq_fan("fan-cached", width, f"(b-vault) rep {rep + 1}"))
        large.append(b.skillq_fan("fan-cached", width, f"(b-vault) rep {rep + 1}", big))
    t_large, t_small = width / med(large), width / med(small)
    t0 = time.perf_counter()
    load_vault(big.root)
    load_s = time.perf_counter() - t0
    return Figure("b-vault", f"fan-out x{width:,} (cache hits) in a vault of "
                  f"{len(big.skills):,} skills vs {len(b.s.vault.skills)}", t_large, t_small,
                  "items/s", t_large / t_small,
                  note=f"raw column: the small vault. load_vault takes {load_s:.2f} s here; "
                  "every pool child reloads the whole vault when its 5 s discovery TTL "
                  "expires (open_vault in step_runner.execute)",
                  samples={"small_s": small, "large_s": large, "load_vault_s": load_s})


def fig_widths(b: Bench, widths: Sequence[int]) -> list[Figure]:
    reps = {1: 9, 10: 9, 100: 3}
    totals: dict[int, tuple[float, float]] = {}
    for width in (1, *widths):
        sk, raw = [], []
        for rep in range(reps.get(width, 1)):
            label = f"(e) width {width:,} rep {rep + 1}"
            raw.append(b.raw_fan(b.s.raw, raw_tasks.NOOP, (), width, label))
            sk.append(b.skillq_fan("fan-cached", width, label))
        totals[width] = (med(sk), med(raw))
    fixed_sk, fixed_raw = totals[1]
    marginal = {w: ((totals[w][0] - fixed_sk) / (w - 1) * 1000,
                    (totals[w][1] - fixed_raw) / (w - 1) * 1000) for w in widths}
    middle = med([m[0] for m in marginal.values()])
    middle_raw = med([m[1] for m in marginal.values()])
    out = []
    for w in widths:
        m_sk, m_raw = marginal[w]
        off, off_raw = m_sk / middle - 1, m_raw / middle_raw - 1
        out.append(Figure(
            f"e{w}", f"width {w:,}: marginal ms per item (cache-hit fan-out)", m_sk, m_raw,
            "ms/item", m_sk / m_raw, "+-20% of median", abs(off) <= 0.2,
            note=f"{off:+.0%} vs median {middle:.2f} (raw {off_raw:+.0%}); total "
            f"{totals[w][0]:.2f} s vs {totals[w][1]:.2f} s; gross "
            f"{totals[w][0] / w * 1000:.2f} ms/item",
            samples={"skillq_total_s": totals[w][0], "raw_total_s": totals[w][1]}))
    out[0].samples["fixed_s"] = {"skillq": fixed_sk, "raw": fixed_raw}
    return out


# -- (d) records ----------------------------------------------------------------------------

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
# redelivery case of step_runner.claim is left out: it is not on the hot path).
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


def insert_orm(b: Bench, values: list[dict[str, Any]]) -> float:
    """As the planner's _launch records a fan-out: a StepRun per item, one commit."""
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


@contextlib.contextmanager
def _plain_txn(engine: Any) -> Iterator[Any]:
    from sqlalchemy.orm import Session

    with Session(engine, expire_on_commit=False) as session, session.begin():
        yield session


def fig_records(b: Bench, n: int, reps: int, lifecycle: int) -> list[Figure]:
    from orchestrator.planner import advance
    from workers import step_runner
    from workers.context import WorkerContext
    from workers.recording import refresh_skill_benchmarks

    ways: dict[str, Callable[[Bench, list[dict[str, Any]]], float]] = {
        "orm": insert_orm, "copy": insert_copy, "core": insert_core,
        "executemany": insert_executemany}
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
        orm, copy = took["orm"], took["copy"]
        out = [Figure("d", f"step-run records x{n:,}: StepRun ORM (one commit) vs COPY",
                      n / med(orm), n / med(copy), "rows/s", med(copy) / med(orm), ">= 0.35x",
                      med(copy) / med(orm) >= 0.35, note=f"median of {reps}; the planner's "
                      "_launch path: session.add per row", samples=took)]
        for way, what in (("core", "Core insert(StepRun) with a list of dicts"),
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
        assert len(launched.dispatch) == n, len(launched.dispatch)
        tick(1)
        t0 = time.perf_counter()
        with transaction(b.s.db) as session:
            again = advance(session, run_id, b.s.settings)
        reread_s = time.perf_counter() - t0
        assert not again.dispatch
        tick(2)
        out.append(Figure("d2", f"planner launch of x{n:,} (resolve, StepRun ORM, commit)",
                          n / launch_s, n / med(copy), "rows/s", med(copy) / launch_s,
                          note=f"{launch_s:.2f} s"))
        out.append(Figure("d3", f"planner advance with nothing to do, {n:,} rows", reread_s *
                          1000, None, "ms", None, note="what every advance and watch pays: it "
                          "loads every step row of the run"))

        # Per step, a worker claims and finishes its record: two locked transactions and a
        # count of the step's open items; measured in a narrow and in a wide fan-out.
        ctx = WorkerContext(settings=b.s.settings, database_url=b.s.db, vault=b.s.vault_dir,
                            hostname=socket.gethostname(), pid=os.getpid())
        from sqlalchemy import create_engine

        lean_engine = create_engine(b.s.db, pool_size=2)

        # claim() gained a worker-name argument while this was written: pass it if wanted.
        claim_kw = {"worker": f"benchmark@{ctx.hostname}"} \
            if "worker" in inspect.signature(step_runner.claim).parameters else {}

        def skillq_cycle(step_run: str) -> None:
            job = step_runner.claim(ctx, step_run, **claim_kw)
            assert job is not None
            step_runner.finish(ctx, job, step_runner.Result(StepState.SUCCEEDED, outputs={},
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
                          note="skillq column: the wide fan-out; raw column: x100. It grows "
                          "with width: the open-item COUNT scans the step's rows and every "
                          "claim loads the run row, whose inputs hold the whole list",
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
                          "that skill: its aggregates scan all of them, so it grows with "
                          "history"))
        return out
    finally:
        with transaction(b.s.db) as session:
            session.execute(delete(PipelineRun).where(PipelineRun.id.in_(runs)))


# -- profiling ------------------------------------------------------------------------------

def profile(b: Bench, worker: int, out: Path, width: int
            ) -> dict[str, list[tuple[float, float, str]]]:
    """One fan-out of each kind under py-spy: on-CPU samples, then with idle ones (waits)."""
    if _py_spy() is None:
        console.print("[yellow]py-spy not found: pip install py-spy into the venv[/]")
        return {}
    found = {}
    for skill in ("fan-cached", "fan-true"):
        for idle in (False, True):
            label = f"{skill}-x{width}{'-idle' if idle else ''}"
            with py_spy(worker, out, label, idle=idle):
                b.skillq_fan(skill, width, f"py-spy {label}")
            if (out / f"{label}.txt").exists():
                found[label] = hotspots(out / f"{label}.txt")
    return found


def _py_spy() -> str | None:
    return shutil.which("py-spy", path=os.pathsep.join(
        [str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


@contextlib.contextmanager
def py_spy(pid: int | None, out: Path | None, label: str, idle: bool = False
           ) -> Iterator[None]:
    """Record the skillq worker and its pool children with py-spy while the block runs
    (collapsed stacks, one line per stack: ``frame;frame;... count``)."""
    exe = _py_spy()
    if pid is None or out is None or exe is None:
        yield
        return
    out.mkdir(parents=True, exist_ok=True)
    argv = [exe, "record", "--pid", str(pid), "--subprocesses", "--rate", "250", "--format",
            "raw", "--output", str(out / f"{label}.txt"), "--nonblocking"]
    proc = subprocess.Popen(argv + (["--idle"] if idle else []), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(1.5)  # attaching
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


PROJECT_FRAME = re.compile(r"\((shared|orchestrator|workers)/")
WATCHED = ("do_ping", "SessionTransaction.commit", "EventDispatcher.publish",
           "Connection._recv (billiard", "QoS", "basic_ack")


def hotspots(path: Path, top: int = 18) -> list[tuple[float, float, str]]:
    """(inclusive %, self %, frame) from a collapsed-stack file: skillq's own functions
    first, then a few library frames worth watching, then the hottest leaves. Percentages
    are of all samples of the worker (its main process and pool children)."""
    inclusive: dict[str, int] = {}
    own: dict[str, int] = {}
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + n
        own[frames[-1]] = own.get(frames[-1], 0) + n
    if not total:
        return []
    ranked = sorted(inclusive.items(), key=lambda kv: -kv[1])
    ours = [(f, n) for f, n in ranked if PROJECT_FRAME.search(f)
            and not f.startswith(("<module>", "main "))][:top]
    watched = [(f, n) for f, n in ranked if f.startswith(WATCHED)][:8]
    leaves = sorted(own.items(), key=lambda kv: -kv[1])[:10]
    rows = [(100 * n / total, 100 * own.get(f, 0) / total, f) for f, n in ours + watched]
    return rows + [(100 * inclusive[f] / total, 100 * n / total, f"leaf: {f}")
                   for f, n in leaves]


# -- report ---------------------------------------------------------------------------------

def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit in ("items/s", "rows/s"):
        return f"{value:,.0f} {unit}"
    if unit == "s":
        return f"{value:.2f} s"
    return f"{value:,.2f} {unit}"


def render(figures: Sequence[Figure]) -> Table:
    table = Table(title="skillq execution vs raw Celery (same broker, same run)")
    for column, justify in (("figure", "left"), ("skillq", "right"), ("raw Celery", "right"),
                            ("ratio", "right"), ("target", "left"), ("", "center"),
                            ("note", "left")):
        table.add_column(column, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for f in figures:
        verdict = {True: "[green]pass[/]", False: "[red]FAIL[/]", None: "[dim]info[/]"}[f.passed]
        table.add_row(f"({f.key}) {f.name}", fmt(f.skillq, f.unit), fmt(f.raw, f.unit),
                      "-" if f.ratio is None else f"{f.ratio:.2f}x", f.target, verdict,
                      f.note)
    return table


def source_state() -> dict[str, Any]:
    """Which code was measured: the commit, and the files changed on top of it."""
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}  # read-only: never touch the index
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, env=env, text=True,
                              capture_output=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=ROOT, env=env, text=True, capture_output=True,
                               timeout=10).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"commit": head, "modified": [line[3:] for line in dirty if line.strip()]}


def machine() -> dict[str, Any]:
    import celery
    import sqlalchemy

    return {"host": socket.gethostname(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "celery": celery.__version__,
            "sqlalchemy": sqlalchemy.__version__, "platform": platform.platform(),
            "load_avg_at_end": os.getloadavg()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples, widths to 1,000")
    parser.add_argument("--keep", action="store_true", help="keep the temporary SKILLQ_HOME")
    parser.add_argument("--py-spy", type=Path, default=None, metavar="DIR",
                        help="record the skillq worker with py-spy during the fan-outs")
    parser.add_argument("--big-vault", type=int, default=None, metavar="N",
                        help="also run (b) in a vault with N more skills (default: 2,000; "
                        "--quick: 0)")
    parser.add_argument("--only", default="", help="comma-separated figure groups: "
                        "a,b,d,e,cli (default: all)")
    args = parser.parse_args()
    quick = args.quick
    only = set(filter(None, args.only.split(","))) or {"a", "b", "d", "e", "cli"}
    cfg = {"latency_n": 15 if quick else 40, "latency_warm": 3, "fan_width": 1000,
           "fan_reps": 1 if quick else 3, "widths": [10, 100, 1000] if quick
           else [10, 100, 1000, 5000], "records_n": 2000 if quick else 10000,
           "records_reps": 2 if quick else 3, "lifecycle_n": 300 if quick else 1000,
           "cli_runs": 2 if quick else 5, "python_fanout": not quick,
           "big_vault": args.big_vault if args.big_vault is not None else
           (0 if quick else 2000)}

    def stop_on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop_on_term)
    home = Path(tempfile.mkdtemp(prefix="skillq-bench-"))
    stack = Stack(home)
    figures: list[Figure] = []
    profiles: dict[str, list[tuple[float, float, str]]] = {}
    started, load_at_start, interrupted = datetime.now(UTC), os.getloadavg(), False
    source = source_state()  # at the start: other people may edit the tree meanwhile
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
               MofNCompleteColumn(), TimeElapsedColumn())
    try:
        big = None
        if cfg["big_vault"] and "b" in only:
            big = make_big_vault(home / "big-vault", cfg["big_vault"])
        with Progress(*columns, console=console, transient=False) as progress:
            phase = progress.add_task("stack", total=None)

            def step(text: str) -> None:
                progress.update(phase, description=f"[bold]{text}")

            stack.start(step)
            b = Bench(stack, progress)
            step("warming up (and filling bench-cached's cache entry)")
            for _ in range(3):
                b.skillq_once("bench-cached")
                b.skillq_once("bench-true")
                b.raw_once(stack.raw, raw_tasks.NOOP)
                b.raw_once(stack.strict, raw_tasks.NOOP)
            worker = stack.worker_pid(SKILLQ_WORKER)
            if "a" in only:
                step("(a) one-step latency")
                figures += fig_latency(b, cfg["latency_n"], cfg["latency_warm"])
                figures.append(fig_strict_latency(b, cfg["latency_n"]))
            if "cli" in only:
                step("`skillq run` from the command line")
                figures.append(cli_latency(b, cfg["cli_runs"]))
            if "b" in only:
                step(f"(b, c) fan-outs x{cfg['fan_width']:,}")
                figures += fig_fanouts(b, cfg["fan_width"], cfg["fan_reps"],
                                       cfg["python_fanout"])
                figures.append(fig_strict_fan(b, cfg["fan_width"], cfg["fan_reps"]))
                if big is not None:
                    figures.append(fig_big_vault(b, big, cfg["fan_width"], cfg["fan_reps"]))
            if "e" in only:
                step("(e) widths")
                figures += fig_widths(b, cfg["widths"])
            if "d" in only:
                step("(d) run records")
                figures += fig_records(b, cfg["records_n"], cfg["records_reps"],
                                       cfg["lifecycle_n"])
            if args.py_spy:
                step("profiling the skillq worker with py-spy")
                profiles = profile(b, worker, args.py_spy, cfg["fan_width"])
            step("done")
    except KeyboardInterrupt:
        interrupted = True
        console.print("[yellow]interrupted: stopping the workers and servers; the figures "
                      "measured so far follow[/]")
    finally:
        with console.status("stopping workers and servers"):
            stack.stop()
        if args.keep:
            console.print(f"kept {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)
        leftovers = [w.name for w in stack.workers if pid_alive(w.proc.pid)]
        if leftovers:
            console.print(f"[red]still running: {leftovers}[/]")
    for name, top in profiles.items():
        table = Table(title=f"py-spy, skillq worker + pool children: {name}")
        for column in ("incl %", "self %", "frame"):
            table.add_column(column, justify="left" if column == "frame" else "right")
        for incl, own, frame in top:
            table.add_row(f"{incl:.1f}", f"{own:.1f}", frame)
        console.print(table)
    console.print(render(figures))
    phases = next((f.samples.get("skillq_phases_ms") for f in figures if f.key == "a"), None)
    if phases:
        console.print("[bold]one-step run (a), median ms per phase, from its records:[/]")
        for name, ms in phases.items():
            console.print(f"  {ms:8.2f}  {name}")
    RESULTS.mkdir(exist_ok=True)
    suffix = ("-quick" if quick else "") + ("-partial" if interrupted else "")
    path = RESULTS / f"execution-{started:%Y-%m-%d-%H%M%S}{suffix}.json"
    path.write_text(json.dumps({
        "started": started.isoformat(), "quick": quick, "interrupted": interrupted,
        "config": cfg, "machine": {**machine(), "load_avg_at_start": load_at_start},
        "source": source,
        "embedded": stack.embedded, "poll_s": {"latency": LATENCY_POLL_S,
                                               "fanout": FANOUT_POLL_S},
        "figures": [asdict(f) for f in figures]}, indent=2, default=str) + "\n")
    console.print(f"results: {path.relative_to(ROOT)}")
    if interrupted:
        return 130
    failed = [f.key for f in figures if f.passed is False]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
