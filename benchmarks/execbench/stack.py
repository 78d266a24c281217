"""The stack: servers (embedded unless configured), the skillq worker and the raw workers."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

import raw_tasks

from orchestrator.embedded import resolve_endpoints, stop_embedded
from orchestrator.processes import pid_alive, stop_pids
from shared.celery_app import create_app
from shared.db.migrate import upgrade
from shared.settings import Settings

from .config import (
    HERE,
    RAW_WORKER,
    SKILLQ_WORKER,
    STRICT_WORKER,
    WORKER_READY_S,
    console,
)
from .vaultgen import write_vault


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
        self.start_servers(progress)
        progress("starting workers")
        self.start_workers()

    def start_servers(self, progress: Callable[[str], None]) -> None:
        """The servers, the schema, the generated vault, the client apps and self.env (what
        a worker process is started with); no worker."""
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
        # python3 must be a real interpreter for (c2), not a pyenv shim (a bash script
        # costing ~60 ms a start): the venv's bin comes first on the workers' PATH.
        path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        self.env = {**os.environ, **self.endpoints.env(), "PATH": path,
                    "SKILLQ_HOME": str(self.home), "SKILLQ_VAULT": str(self.vault_dir),
                    "BENCH_RAW_BROKER": self.endpoints.broker_url,
                    "PYTHONPATH": os.pathsep.join(filter(None, [
                        str(HERE), os.environ.get("PYTHONPATH")]))}

    def start_workers(self) -> None:
        """The skillq worker and the two raw workers (execution.py's three)."""
        env = self.env
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

    def _spawn(self, name: str, argv: list[str], env: dict[str, str],
               cwd: Path | None = None) -> None:
        log = self.home / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as fh:
            # Own session: a terminal's Ctrl-C reaches only this script, which stops them.
            proc = subprocess.Popen(argv, env=env, cwd=cwd or self.home,
                                    stdin=subprocess.DEVNULL,
                                    stdout=fh, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        self.workers.append(Worker(name, proc, log))

    def _wait_ready(self, nodes: Collection[str] | None = None) -> None:
        """Until every node answers a ping (default: each worker's `name@host`)."""
        host = socket.gethostname()
        wanted = set(nodes) if nodes is not None else {f"{w.name}@{host}" for w in self.workers}
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


def remove_home(stack: Stack, home: Path, *, keep: bool) -> None:
    """After ``stack.stop()``: the temporary SKILLQ_HOME removed (or kept, and said so),
    and any worker still alive named."""
    if keep:
        console.print(f"kept {home}")
    else:
        shutil.rmtree(home, ignore_errors=True)
    leftovers = [w.name for w in stack.workers if pid_alive(w.proc.pid)]
    if leftovers:
        console.print(f"[red]still running: {leftovers}[/]")
