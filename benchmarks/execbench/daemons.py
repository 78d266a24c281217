"""The daemon-scaling run (benchmarks/daemon_scaling.py): 1, 2, 3 daemons, each in its own
network namespace, serving `default`; the same script fan-out timed on each count."""

from __future__ import annotations

import argparse
import socket
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import raw_tasks
from celery import group
from rich.progress import Progress
from sqlalchemy import func, select

from shared.db.daemon_models import DaemonWorker
from shared.db.models import StepRun
from shared.db.session import transaction

from .bench import Bench, wait_run, wait_tasks
from .config import FANOUT_POLL_S, WORKER_READY_S
from .cpu import CpuMeter
from .figures_fanout import WARM_WIDTH
from .netns import Namespace, Namespaces
from .stack import Stack

CONTROL = "bench-control"  # the host's worker: the planner's `control` queue only
SKILL = "fan-true"  # figure (c)'s skill: bench-true (a script running `true`) per item


def parse_args(description: str, argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="200 items, 2 timed runs per count (default: 1,000 and 3)")
    parser.add_argument("--items", type=int, default=None, help="fan-out width")
    parser.add_argument("--runs", type=int, default=None,
                        help="timed runs per daemon count, after one warm-up")
    parser.add_argument("--daemons", type=int, default=3, help="up to this many (default 3)")
    parser.add_argument("--concurrency", type=int, default=2, help="per daemon (default 2)")
    parser.add_argument("--no-raw", action="store_true", help="skip the raw-Celery floor")
    parser.add_argument("--keep", action="store_true", help="keep the temporary SKILLQ_HOME")
    args = parser.parse_args(argv)
    args.items = args.items or (200 if args.quick else 1000)
    args.runs = args.runs or (2 if args.quick else 3)
    return args


@dataclass
class Machine:
    """One simulated machine: a namespace with a daemon (and a raw Celery worker) in it."""

    index: int
    ns: Namespace
    daemon: str  # its daemon name, and its worker's node is d@<daemon>
    raw_node: str | None


def machine_env(stack: Stack, ns: Namespace) -> tuple[dict[str, str], list[int]]:
    """The stack's worker environment with every server URL pointed at the host's end of
    ``ns``'s veth link; and the ports to forward there."""
    env, ports = dict(stack.env), set()
    for key in ("SKILLQ_BROKER_URL", "SKILLQ_RESULT_BACKEND", "SKILLQ_DATABASE_URL",
                "BENCH_RAW_BROKER"):
        if not env.get(key):
            continue
        url = urlsplit(env[key])
        if url.port is None or url.hostname not in ("127.0.0.1", "localhost"):
            raise SystemExit(f"{key} is not a loopback URL with a port: the namespaced "
                             "daemons reach the servers through a forwarder to loopback")
        ports.add(url.port)
        env[key] = env[key].replace(f"@{url.hostname}:", f"@{ns.host_ip}:").replace(
            f"//{url.hostname}:", f"//{ns.host_ip}:")
    return env, sorted(ports)


def add_machine(stack: Stack, nss: Namespaces, concurrency: int, raw: bool) -> Machine:
    ns = nss.add()
    i = len(nss.all)
    env, ports = machine_env(stack, ns)
    ns.forward(ports, stack.home / "logs" / f"forward-{i}.log")
    home = stack.home / "daemons" / f"d{i}"  # its own SKILLQ_HOME (and daemon key)
    home.mkdir(parents=True)
    daemon = f"bench-d{i}"
    stack._spawn(daemon, ns.argv([sys.executable, "-m", "workers.main", "--queues", "default",
                                  "--concurrency", str(concurrency), "--name", "d",
                                  "--daemon", daemon]),
                 {**env, "SKILLQ_HOME": str(home)}, cwd=home)
    nodes, raw_node = [f"d@{daemon}"], None
    if raw:
        raw_node = f"bench-raw{i}@{socket.gethostname()}"  # netns keeps the host name
        stack._spawn(f"bench-raw{i}", ns.argv([
            sys.executable, "-m", "celery", "-A", "raw_tasks", "worker", "-Q",
            raw_tasks.QUEUE, "--concurrency", str(concurrency), "--pool", "prefork",
            "--without-mingle", "--without-gossip", "--hostname", raw_node, "--loglevel",
            "WARNING"]), env)
        nodes.append(raw_node)
    stack._wait_ready(nodes)
    deadline = time.monotonic() + WORKER_READY_S  # online for routing: it announced itself
    while not announced(stack, f"d@{daemon}"):
        if time.monotonic() > deadline:
            raise SystemExit(f"daemon {daemon} did not announce itself through its veth link")
        time.sleep(0.1)
    return Machine(i, ns, daemon, raw_node)


def announced(stack: Stack, node: str) -> bool:
    with transaction(stack.db) as session:
        return session.get(DaemonWorker, node) is not None


class ScaleBench(Bench):
    def __init__(self, stack: Stack, progress: Progress) -> None:
        super().__init__(stack, progress)
        self.forwarders: dict[str, int] = {}  # name -> pid of each namespace's forwarder

    def cpu(self) -> CpuMeter:  # every worker and forwarder of the run, by name
        return CpuMeter({**{w.name: w.proc.pid for w in self.s.workers}, **self.forwarders})

    def fan(self, width: int, label: str) -> dict[str, Any]:
        """One skillq fan-out: its seconds, and its items by daemon and by queue."""
        tick = self._items(f"{label}: skillq {SKILL} x{width:,}", width)
        with self.cpu() as cpu:
            t0 = time.perf_counter()
            run_id = self.submit(SKILL, {"items": list(range(width))})
            wait_run(self, run_id, lambda done, _total: tick(done))
            took = time.perf_counter() - t0
        with transaction(self.s.db) as session:
            def by(column: Any) -> dict[str, int]:
                rows = session.execute(select(column, func.count()).where(
                    StepRun.run_id == run_id, StepRun.step_id == "each")
                    .group_by(column)).all()
                return {str(k): int(n) for k, n in sorted(rows, key=lambda r: str(r[0]))}
            daemons, queues, routes = by(StepRun.daemon), by(StepRun.queue), by(StepRun.route)
        tick(width)
        return {"s": took, "run_id": run_id, "daemons": daemons, "queues": queues,
                "routes": routes, "cpu_s": cpu.used}

    def raw_group(self, width: int, label: str) -> dict[str, Any]:
        """A group of ``width`` subprocess `true` tasks on the raw workers."""
        app = self.s.raw
        tick = self._items(f"{label}: raw {raw_tasks.SPAWN} x{width:,}", width)
        with self.cpu() as cpu:
            t0 = time.perf_counter()
            sigs = [app.signature(raw_tasks.SPAWN, args=(["true"],), queue=raw_tasks.QUEUE)
                    for _ in range(width)]
            ids = [r.id for r in group(sigs).apply_async().results]
            wait_tasks(app, ids, FANOUT_POLL_S, tick)
            took = time.perf_counter() - t0
        tick(width)
        return {"s": took, "cpu_s": cpu.used}


def measure(b: ScaleBench, machines: list[Machine], width: int, runs: int, raw: bool
            ) -> dict[str, Any]:
    """One warm-up and ``runs`` timed fan-outs on the machines now up (raw first, in turn)."""
    n = len(machines)
    sk: list[dict[str, Any]] = []
    rw: list[dict[str, Any]] = []
    for rep in range(runs + 1):
        label = f"{n} daemon(s), " + ("warm-up" if rep == 0 else f"run {rep}/{runs}")
        if raw:
            rw.append(b.raw_group(width, label))
        sk.append(b.fan(width, label))
    timed = sk[1:]
    wanted = {m.daemon for m in machines}
    missing = wanted - {d for r in timed for d in r["daemons"]}
    order = sorted(range(len(timed)), key=lambda k: timed[k]["s"])
    median_run = timed[order[(len(order) - 1) // 2]]  # the lower median for an even count
    return {"daemons": n, "names": sorted(wanted), "skillq": sk, "raw": rw,
            "median_run": median_run, "idle_daemons": sorted(missing),
            "items_by_daemon_total": dict(sum((Counter(r["daemons"]) for r in timed),
                                              Counter()))}


def warm_up(b: ScaleBench, raw: bool) -> None:
    """Untimed: the skill's history sizes its batches (lifecycle/planner.py), as in
    figures_fanout.py; and one raw task, so the raw side's first run is not its connects."""
    b.fan(WARM_WIDTH, "history for batch sizing")
    if raw:
        b.raw_group(WARM_WIDTH, "raw warm-up")

