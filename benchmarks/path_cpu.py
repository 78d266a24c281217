"""Where a one-step run's time goes, function by function, in every process.

    .venv/bin/python benchmarks/path_cpu.py [--runs N] [--base REV [--rounds R]]
                                            [--functions module:Qual.name,...]
    .venv/bin/python benchmarks/path_cpu.py --show benchmarks/results/pathcpu-....json

Figure (a) of execution.py says how long a one-step cache-hit run takes; this says where
that goes. Each named function logs its entry and exit, wall clock and its thread's
CPU, in the client, the skillq worker's main process and its pool (a `sitecustomize`
on the stack's PYTHONPATH: pathcpu/hook/). The table shows, for each, the median over N
runs (default 100) of the wall and CPU milliseconds spent in it per run. The logging
costs a few microseconds a call, so the end-to-end latency it prints is a little
above figure (a)'s.

With --base REV, the revision REV (a git worktree of it) and this tree are measured in
turn, R rounds (default 3) of each, alternating, on the same host: CPU per function
tells two versions apart on a host whose noise swamps their end-to-end ratios. The
functions nobody changed are the control. A second table, the timeline, gives when each
function runs (its median first entry and last exit after the run's start).

Results: benchmarks/results/pathcpu-<time>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
HOOK = HERE / "pathcpu" / "hook"
# The path of a cache hit through the client, the worker's main process and its pool.
FUNCTIONS = (
    "orchestrator.launch:launch", "lifecycle.submit:create_run", "lifecycle.tasks:advance_in",
    "lifecycle.canvas:dispatch_steps", "orchestrator.run_end_listener:RunEndListener.ended",
    "shared.signed_messages:Gate.admit", "workers.claim:_claim_lone",
    "lifecycle.transitions.claims:claim_lone", "workers.claim:_look_up_cache",
    "shared.cache:lookup_many", "workers.claim:_answer_from_cache",
    "workers.step_records:record_in", "lifecycle.planner:advance",
    "sqlalchemy.orm.session:SessionTransaction.commit", "lifecycle.recording:write_files")
console = Console(width=None if sys.stdout.isatty() else 160)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--base", help="a git revision to measure beside this tree")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--functions", help="module:Qual.name,... (default: a cache "
                        "hit's path)")
    parser.add_argument("--show", type=Path, help="print the table of a results file")
    args = parser.parse_args()
    if args.show:
        shown = json.loads(args.show.read_text())["sides"]
        console.print(table(shown))
        console.print(timeline(shown))
        return 0
    functions = args.functions.split(",") if args.functions else list(FUNCTIONS)
    rounds = args.rounds or (3 if args.base else 1)
    measured: Measured = {}
    with contextlib.ExitStack() as stack:
        sides = {"this tree": ROOT}
        if args.base:
            sides = {args.base: stack.enter_context(worktree(args.base)), **sides}
        with console.status("measuring") as status:
            for i in range(rounds):
                for label, root in sides.items():
                    status.update(f"round {i + 1}/{rounds}: {label}, {args.runs} runs")
                    measured.setdefault(label, []).append(side(root, args.runs, functions))
    console.print(table(measured))
    console.print(timeline(measured))
    out = ROOT / "benchmarks" / "results" / \
        f"pathcpu-{datetime.now(UTC):%Y-%m-%d-%H%M%S}.json"
    out.write_text(json.dumps({"runs": args.runs, "functions": functions,
                               "sides": measured}, indent=1))
    console.print(f"results: {out.relative_to(ROOT)}")
    return 0


@contextlib.contextmanager
def worktree(rev: str) -> Iterator[Path]:
    where = Path(tempfile.mkdtemp(prefix="skillq-pathcpu-base-"))
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(where),
                    rev], check=True)
    try:
        yield where
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)],
                       check=False)
        shutil.rmtree(where, ignore_errors=True)


def side(root: Path, runs: int, functions: list[str]) -> dict[str, object]:
    """One side measured in a process of its own: the tree at ``root``, the hook of
    this one."""
    with tempfile.TemporaryDirectory(prefix="skillq-pathcpu-logs-") as logs:
        out = Path(logs) / "side.json"
        env = {**os.environ, "PATHCPU_DIR": logs, "PATHCPU_FUNCS": ",".join(functions),
               "PYTHONPATH": os.pathsep.join([str(HOOK), str(root), str(root / "benchmarks"),
                                              str(HERE)])}
        # This tree's side.py measures either tree: the stack it starts is root's.
        done = subprocess.run([sys.executable, str(HERE / "pathcpu" / "side.py"), "--runs",
                               str(runs), "--out", str(out)], cwd=root, env=env,
                              capture_output=True, text=True, check=False)
        if done.returncode != 0 or not out.exists():
            raise SystemExit(f"measuring {root} failed:\n{done.stderr[-3000:]}")
        result: dict[str, object] = json.loads(out.read_text())
        return result


Measured = dict[str, list[dict[str, Any]]]  # by side: each round's side.json


def _keys(measured: Measured) -> list[str]:
    return sorted({k for results in measured.values() for r in results
                   for k in r["functions"]})


def _grid(measured: Measured, title: str, keys: list[str],
          cell: Callable[[dict[str, float]], str]) -> Table:
    """A row per function, a column per side, a cell per round (``cell`` of its figures,
    "-" where a round did not see the function)."""
    t = Table(title=title)
    t.add_column("process and function")
    for label in measured:
        t.add_column(label, justify="right")
    for key in keys:
        t.add_row(key, *("  ".join(cell(f) if (f := r["functions"].get(key)) else "-"
                                   for r in results) for results in measured.values()))
    return t


def table(measured: Measured) -> Table:
    t = _grid(measured, "ms per one-step cache-hit run: median wall / CPU, each round",
              _keys(measured), lambda f: f"{f['wall_ms']:.2f}/{f['cpu_ms']:.2f}")
    t.add_row("latency, end to end", *("  ".join(f"{r['latency_ms']:.1f}" for r in results)
                                       for results in measured.values()))
    return t


def timeline(measured: Measured) -> Table:
    """When each function runs: the median ms after the run's start of its first entry
    and its last exit, in order, so the gaps between processes show (the broker, the
    pool's pipe, the NOTIFY)."""
    timed = [r["functions"] for results in measured.values() for r in results
             if any("from_ms" in f for f in r["functions"].values())]  # older files: none
    first = timed[0] if timed else {}
    keys = sorted(_keys(measured), key=lambda k: first.get(k, {}).get("from_ms", 1e9))
    return _grid(measured, "ms after the run's start: median first entry - last exit, "
                 "each round", keys,
                 lambda f: f"{f['from_ms']:.2f}-{f['to_ms']:.2f}" if "from_ms" in f else "-")


if __name__ == "__main__":
    sys.exit(main())
