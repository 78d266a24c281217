"""One side of path_cpu.py, in a process of its own started with the hook on PYTHONPATH:
a stack, warm-up runs, then N one-step cache-hit runs (as figure a runs them, an idle
pause before each); the per-function medians as JSON."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import raw_tasks
from execbench.bench import Bench
from execbench.config import SETTLE_S, SKILLQ_WORKER, progress_display
from execbench.stack import Stack, remove_home


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    logs = Path(os.environ["PATHCPU_DIR"])
    home = Path(tempfile.mkdtemp(prefix="skillq-pathcpu-"))
    stack = Stack(home)
    windows: list[tuple[float, float]] = []
    try:
        with progress_display() as progress:
            stack.start(lambda _: None)
            b = Bench(stack, progress)
            for _ in range(5):
                b.skillq_once("bench-cached")
                b.raw_once(stack.raw, raw_tasks.NOOP)
            roles = {os.getpid(): "client", stack.worker_pid(SKILLQ_WORKER): "worker"}
            for _ in range(args.runs):
                time.sleep(SETTLE_S)
                start = time.time()
                took_s, _run_id = b.skillq_once("bench-cached")
                windows.append((start, start + took_s))
    finally:
        stack.stop()
        remove_home(stack, home, keep=False)
    args.out.write_text(json.dumps({
        "latency_ms": statistics.median(end - start for start, end in windows) * 1000,
        "functions": medians(logs, windows, roles)}, indent=1))


def medians(logs: Path, windows: list[tuple[float, float]], roles: dict[int, str]
            ) -> dict[str, dict[str, float]]:
    """By "role function": the median over runs of the wall and CPU ms spent in it
    per run (calls within a run summed), and of when it was first entered and last left
    (ms after the run's start), for those seen in at least half the runs. A
    process neither the client nor the worker's main one is its pool ("pool")."""
    if not windows:
        return {}
    events = []
    for log in logs.glob("*.log"):
        pid = int(log.stem)
        for line in log.read_text().splitlines():
            wall, cpu, mark, name = line.split(" ", 3)
            events.append((float(wall), float(cpu), pid, mark, name))
    events.sort()
    per_run: dict[str, list[tuple[float, ...]]] = defaultdict(list)
    # A run's window lasts until the next one starts: what it causes after its client
    # has the result (its benchmarks.json files, the message's ack) counts to it too.
    ends = [start for start, _ in windows[1:]] + [windows[-1][1] + SETTLE_S]
    for (start, _), end in zip(windows, ends, strict=True):
        open_calls: dict[tuple[int, str], list[tuple[float, float]]] = defaultdict(list)
        spent: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        span: dict[str, list[float]] = {}  # first entry and last exit, ms after the start
        for wall, cpu, pid, mark, name in events:
            if not start <= wall < end:
                continue
            if mark == ">":
                open_calls[(pid, name)].append((wall, cpu))
            elif open_calls[(pid, name)]:
                wall0, cpu0 = open_calls[(pid, name)].pop()
                key = f"{roles.get(pid, 'pool')} {name}"
                spent[key][0] += (wall - wall0) * 1000
                spent[key][1] += cpu - cpu0
                at = span.setdefault(key, [(wall0 - start) * 1000, 0.0])
                at[1] = (wall - start) * 1000
        for key, (wall_ms, cpu_ms) in spent.items():
            per_run[key].append((wall_ms, cpu_ms, *span[key]))
    return {key: {"wall_ms": round(statistics.median(s[0] for s in seen), 3),
                  "cpu_ms": round(statistics.median(s[1] for s in seen), 3),
                  "from_ms": round(statistics.median(s[2] for s in seen), 3),
                  "to_ms": round(statistics.median(s[3] for s in seen), 3)}
            for key, seen in sorted(per_run.items()) if len(seen) >= len(windows) / 2}


if __name__ == "__main__":
    main()
