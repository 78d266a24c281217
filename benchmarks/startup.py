"""Start-up: how long `skillq` takes before it does anything, against a bare interpreter.

    .venv/bin/python benchmarks/startup.py [--quick] [--runs N] [--keep]

Every figure is the wall time of a fresh process, as a user's shell starts it, the median
of N runs (default 15, --quick 5) after one warm-up (so the page cache holds the files
and the bytecode is cached: PYTHONPYCACHEPREFIX under the stack's home, whatever
PYTHONDONTWRITEBYTECODE says):

  python   `python -c pass` with this venv's interpreter: the floor every command pays
  help     `skillq --help`                                  target: <= 8x python
  version  `skillq --version`                               (informational)
  validate `skillq validate VAULT` on the offline example vault (examples/agent-local)
  list     `skillq list --vault VAULT`, with the stack below running, so it also reads
           the library state (labels, pins) from PostgreSQL as a user's `list` does
  catalog  `skillq catalog --vault VAULT`                   (informational)
  run      `skillq run` of a one-step script skill (`skillq new`'s scaffold) on a running
           stack: submit, a worker runs the script, the result comes back; through the
           stack's local API, as `skillq up` starts it (the thin client: no Celery,
           SQLAlchemy or vault code in the command)     target: <= 300 ms wall

The stack is its own: a real Redis and PostgreSQL under a temporary SKILLQ_HOME (the
embedded default), one worker serving `default,control` at concurrency 2 and the local
API (orchestrator/api/process.py start_api), as `skillq up` starts them. For each
command it also records, from `python -X importtime`, the modules that took longest to
import and whether SQLAlchemy, Celery or Alembic were
imported at all (the vault commands need none of them to read a vault).

Results: a table, and benchmarks/results/startup-<date>.json with every sample. Every
process it started is stopped at the end, on Ctrl-C and on errors too. Exit status 1 when
a target is missed.
"""

from __future__ import annotations

import argparse
import contextlib
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
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
EXAMPLE_VAULT = ROOT / "examples" / "agent-local"
SKILLQ = Path(sys.executable).with_name("skillq")
HEAVY = ("sqlalchemy", "celery", "alembic", "kombu", "psycopg")
HELP_RATIO = 8.0
RUN_TARGET_S = 0.300
console = Console(stderr=True)


@dataclass
class Figure:
    key: str
    argv: list[str]
    samples: list[float] = field(default_factory=list)
    target: str = ""
    passed: bool | None = None
    heavy: list[str] = field(default_factory=list)
    slowest_imports: list[tuple[str, float]] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=120, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n"
                         f"{done.stdout.decode(errors='replace')[-2000:]}"
                         f"{done.stderr.decode(errors='replace')[-2000:]}")
    return elapsed


def import_profile(argv: list[str], env: dict[str, str], cwd: Path
                   ) -> tuple[list[str], list[tuple[str, float]]]:
    """(heavy packages imported, the 8 slowest top-level-ish imports in ms) of a command."""
    done = subprocess.run(argv, env={**env, "PYTHONPROFILEIMPORTTIME": "1"}, cwd=cwd,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120, check=False)
    cumulative: dict[str, float] = {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _, cum, name = line[len("import time:"):].split("|")
        depth = (len(name) - len(name.lstrip(" "))) // 2
        if depth <= 2:  # a package's own and its first imports, not every leaf
            cumulative[name.strip()] = max(cumulative.get(name.strip(), 0.0),
                                           int(cum) / 1000)
    heavy = [h for h in HEAVY if re.search(rf"\|\s+{h}(\.\S+)?$", done.stderr, re.M)]
    slowest = sorted(cumulative.items(), key=lambda kv: kv[1], reverse=True)[:8]
    return heavy, slowest


class Stack:
    """Embedded Redis and PostgreSQL under home, and one skillq worker."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.worker: subprocess.Popen[bytes] | None = None
        self.env: dict[str, str] = {}
        self.api_pid: int | None = None

    def start(self, vault: Path) -> None:
        from orchestrator.embedded import resolve_endpoints
        from shared.db.migrate import upgrade
        from shared.settings import Settings

        settings = Settings(_env_file=None, home=self.home, vault=vault, broker_url=None,
                            database_url=None, result_backend=None)
        endpoints = resolve_endpoints(settings)
        upgrade(endpoints.database_url)
        # Bytecode cached as in a user's install (the warm-up writes it), even where the
        # caller's environment says not to write any (PYTHONDONTWRITEBYTECODE): under
        # home, so the checkout is left as it was.
        keep = {k: v for k, v in os.environ.items()
                if not k.startswith("SKILLQ_") and k != "PYTHONDONTWRITEBYTECODE"}
        self.env = {**keep, "PYTHONPYCACHEPREFIX": str(self.home / "pycache"),
                    **endpoints.env(), "SKILLQ_HOME": str(self.home),
                    "SKILLQ_VAULT": str(vault),
                    # the step's `python3` is an interpreter, not a pyenv shim
                    "PATH": os.pathsep.join([str(Path(sys.executable).parent),
                                             os.environ.get("PATH", "")])}
        log = (self.home / "worker.log").open("ab")
        self.worker = subprocess.Popen(
            [sys.executable, "-m", "workers.main", "--queues", "default,control",
             "--concurrency", "2", "--name", "bench-startup"],
            env=self.env, cwd=self.home, stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True)
        # the local API as `skillq up` starts it, for clients with the commands' env
        from orchestrator.api.apifile import endpoints_key
        from orchestrator.api.process import start_api

        self.api_pid = start_api(self.home, endpoints, endpoints_key(self.env)).pid

    def stop(self) -> None:
        from orchestrator.api.process import stop_api
        from orchestrator.embedded import stop_embedded
        from orchestrator.processes import stop_pids

        stop_api(self.home)
        if self.worker is not None and self.worker.poll() is None:
            stop_pids([(self.worker.pid, signal.SIGTERM)], group=True, timeout_s=15)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.worker.wait(timeout=5)
        stop_embedded(self.home)


def wait_until_runs(argv: list[str], env: dict[str, str], cwd: Path, timeout_s: float) -> None:
    """The first run that succeeds: the worker has started and announced itself."""
    deadline = time.monotonic() + timeout_s
    while True:
        done = subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=120, check=False)
        if done.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"no successful run after {timeout_s:.0f}s:\n{done.stderr}")
        time.sleep(0.5)


def measure(figures: list[Figure], env: dict[str, str], cwd: Path, runs: int) -> None:
    for f in figures:
        console.print(f"[dim]measuring {f.key}: {' '.join(f.argv[1:]) or 'python -c pass'}")
        timed(f.argv, env, cwd)  # warm-up: the page cache, .pyc files
        f.samples = [timed(f.argv, env, cwd) for _ in range(runs)]
        if f.key != "python":
            f.heavy, f.slowest_imports = import_profile(f.argv, env, cwd)


def judge(figures: dict[str, Figure]) -> None:
    floor = figures["python"].median
    help_ = figures["help"]
    help_.target = f"<= {HELP_RATIO:.0f}x python"
    help_.passed = help_.median / floor <= HELP_RATIO
    run = figures["run"]
    run.target = f"<= {RUN_TARGET_S * 1000:.0f} ms"
    run.passed = run.median <= RUN_TARGET_S


def render(figures: dict[str, Figure]) -> Table:
    floor = figures["python"].median
    table = Table(title="skillq start-up (wall time of a fresh process, median)")
    for column in ("figure", "command", "median", "ratio", "target", "", "imports"):
        table.add_column(column, overflow="fold")
    for f in figures.values():
        verdict = {True: "[green]pass[/]", False: "[red]FAIL[/]", None: "[dim]info[/]"}[
            f.passed]
        command = "python -c pass" if f.key == "python" else "skillq " + " ".join(
            Path(a).name if "/" in a else a for a in f.argv[1:])
        table.add_row(f.key, command, f"{f.median * 1000:.0f} ms",
                      f"{f.median / floor:.1f}x", f.target, verdict,
                      "-" if f.key == "python" else ", ".join(f.heavy) or "none heavy")
    return table


def write_results(figures: dict[str, Figure], runs: int, started: datetime) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"startup-{started:%Y-%m-%d-%H%M%S}.json"
    floor = figures["python"].median
    data: dict[str, Any] = {
        "benchmark": "startup", "started": started.isoformat(), "runs": runs,
        "host": socket.gethostname(), "python": platform.python_version(),
        "cpus": os.cpu_count(), "load_avg": os.getloadavg(),
        "figures": [{**asdict(f), "median_s": f.median, "ratio": f.median / floor}
                    for f in figures.values()]}
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 runs per figure")
    parser.add_argument("--runs", type=int, default=None, help="runs per figure")
    parser.add_argument("--keep", action="store_true", help="keep the temporary SKILLQ_HOME")
    args = parser.parse_args()
    runs = args.runs or (5 if args.quick else 15)
    started = datetime.now()
    home = Path(tempfile.mkdtemp(prefix="skillq-startup-"))
    stack = Stack(home)
    try:
        vault = home / "vault"
        shutil.copytree(EXAMPLE_VAULT, vault, ignore=shutil.ignore_patterns("__pycache__"))
        from orchestrator.scaffold import new_skill

        new_skill(vault, "bench-echo", calls=[])
        console.print("[dim]starting Redis, PostgreSQL and a worker")
        stack.start(vault)
        run_argv = [str(SKILLQ), "run", "bench-echo", "--vault", str(vault),
                    "--input", "text=hi"]
        wait_until_runs(run_argv, stack.env, home, timeout_s=60)
        figures = {f.key: f for f in [
            Figure("python", [sys.executable, "-c", "pass"]),
            Figure("help", [str(SKILLQ), "--help"]),
            Figure("version", [str(SKILLQ), "--version"]),
            Figure("validate", [str(SKILLQ), "validate", str(vault)]),
            Figure("list", [str(SKILLQ), "list", "--vault", str(vault)]),
            Figure("catalog", [str(SKILLQ), "catalog", "--vault", str(vault)]),
            Figure("run", run_argv),
        ]}
        measure(list(figures.values()), stack.env, home, runs)
    finally:
        stack.stop()
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)
    judge(figures)
    # piped (CI logs, a file) at a readable width, not folded to 80 columns
    Console(width=None if sys.stdout.isatty() else 140).print(render(figures))
    for f in figures.values():
        if f.slowest_imports:
            slow = ", ".join(f"{name} {ms:.0f}" for name, ms in f.slowest_imports[:5])
            console.print(f"[dim]{f.key}: slowest imports (ms, cumulative): {slow}")
    console.print(f"results: {write_results(figures, runs, started)}")
    return 0 if all(f.passed is not False for f in figures.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
