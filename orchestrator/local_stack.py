"""The local workers: one Celery worker process per queue class on this machine (and,
beside them, the local API: orchestrator/api/process.py).

One worker cannot hold different concurrency per queue (celery#1599), so each class is its
own process, and no general worker lists dom0 or cmd0 (it would share their tasks). They
are detached (own session; pidfile, log under home): `skillq up` exits, `skillq down` finds
them. The process helpers and the stack lock they share with the servers are in
processes.py.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from orchestrator.embedded import resolve_endpoints
from orchestrator.processes import (
    Service,
    cmdline,
    open_log,
    pid_alive,
    read_pid,
    stack_env,
    stack_lock,
    started,
    stop_pids,
    tail,
)
from shared.atomic import write_text
from shared.endpoints import Endpoints
from shared.errors import ConfigError, SkillqError
from shared.queues import CONTROL_QUEUE, QueueClass, queue_for
from shared.settings import get_settings

if TYPE_CHECKING:
    from shared.skill import Skill
    from shared.vault import Vault

READY_POLL_S = 0.05


class WorkerClass(NamedTuple):
    name: str
    queues: tuple[str, ...]
    concurrency: int


WORKER_CLASSES: tuple[WorkerClass, ...] = (
    WorkerClass("default", (QueueClass.DEFAULT.value, CONTROL_QUEUE), os.cpu_count() or 1),
    WorkerClass("agent", (QueueClass.AGENT.value,), 2),
    WorkerClass("gpu", (QueueClass.GPU.value,), 1),
    WorkerClass("dom0", (QueueClass.DOM0.value,), 1),  # one browser per machine
    WorkerClass("cmd0", (QueueClass.CMD0.value,), 1),  # one screen, mouse and keyboard
)


class WorkerProc(NamedTuple):
    worker: WorkerClass
    pid: int
    reused: bool  # already running from an earlier `skillq up`


def classes_for_queues(queues: Iterable[str]) -> list[WorkerClass]:
    """The worker classes serving ``queues`` (a daemon's own `dom0@laptop` is its class's),
    the default class always: it runs the planner's control tasks."""
    wanted = {q.split("@", 1)[0] for q in queues} | {CONTROL_QUEUE}
    return [c for c in WORKER_CLASSES if wanted & set(c.queues)]


def classes_for_vault(root: Path) -> list[WorkerClass]:
    """The classes a vault's skills run on: a laptop demo of script skills starts one
    worker, not five (the others start on first need: ``ensure_workers``)."""
    from shared.vault import open_vault

    try:
        skills = open_vault(root).skills.values() if root.is_dir() else []
    except SkillqError:  # an unreadable vault: its runs will say so; start the minimum
        skills = []
    return classes_for_queues(str(queue_for(s.manifest.effective_approach)) for s in skills
                              if not s.manifest.is_orchestrator)


def classes_for_skill(vault: Vault, skill: Skill) -> list[WorkerClass]:
    """The classes a run of ``skill`` will need, read from the manifests before planning:
    its leaves' through nested orchestrators, and the vault's if one of them is an agent
    (it may execute any skill). A cold `skillq run` starts these first; the planned run's
    steps are what `launch` then makes sure of."""
    seen: set[str] = set()
    todo, queues = [skill], []
    while todo:
        current = todo.pop()
        if current.name in seen:
            continue
        seen.add(current.name)
        if current.manifest.is_orchestrator:
            todo += [vault.skills[s.skill] for s in current.manifest.calling_steps
                     if s.skill in vault.skills]
            continue
        approach = current.manifest.effective_approach
        if queue_for(approach) is QueueClass.AGENT:
            return classes_for_vault(vault.root)
        queues.append(str(queue_for(approach)))
    return classes_for_queues(queues)


def start_early(classes: Iterable[WorkerClass]) -> None:
    """On the embedded default, start the servers and the workers of ``classes`` now and
    return without waiting: a worker is slow to import and announce itself,
    which then overlaps the command's own imports and planning (a cold `skillq run`). What
    later waits for them is ``ensure_workers``. With both server URLs set, nothing: the
    workers are someone else's (connect.py decides the same)."""
    settings = get_settings()
    if settings.broker_url and settings.database_url:
        return
    endpoints = resolve_endpoints(settings, start=True)
    start_workers(settings.home.expanduser().resolve(), endpoints, classes)


def ensure_workers(home: Path, endpoints: Endpoints, classes: Iterable[WorkerClass], *,
                   timeout_s: float = 60.0) -> list[WorkerProc]:
    """Start the workers of ``classes`` not running yet and wait for those that may not
    have announced themselves yet (started in the last timeout_s, by anyone: `skillq run`
    starts its workers before its own imports): a run that needs a class the stack has not
    started starts it, rather than waiting."""
    procs = start_workers(home, endpoints, classes)
    starting = [p.worker.name for p in procs
                if not p.reused or _age_s(_pidfile(home.expanduser().resolve(),
                                                   p.worker.name)) < timeout_s]
    if starting:
        wait_ready(endpoints, starting, timeout_s, home=home.expanduser().resolve())
    return procs


def _age_s(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0


def start_workers(home: Path, endpoints: Endpoints, classes: Iterable[WorkerClass]
                  ) -> list[WorkerProc]:
    """One detached worker per class, reusing those already running against the same broker."""
    home = home.expanduser().resolve()
    env, procs = stack_env(home, endpoints), []
    with stack_lock(home):
        for sub in ("run", "logs"):
            (home / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
        for worker in classes:
            pidfile, log = _pidfile(home, worker.name), home / f"logs/worker-{worker.name}.log"
            pid = read_pid(pidfile)
            if pid and _is_worker(pid, worker.name):
                if _serves(pid, endpoints):
                    procs.append(WorkerProc(worker, pid, reused=True))
                    continue
                # it talks to another broker (the URLs changed since): replace it
                stop_pids([(pid, signal.SIGTERM)], group=True, timeout_s=30)
            argv = [sys.executable, "-m", "workers.main", "--queues", ",".join(worker.queues),
                    "--concurrency", str(worker.concurrency), "--name", worker.name,
                    # one step at a time needs no pool process beside the worker's own
                    "--pool", "threads" if worker.concurrency == 1 else "prefork"]
            with open_log(log) as fh:
                proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=fh,
                                        stderr=subprocess.STDOUT, start_new_session=True)
            started.append(proc)
            write_text(pidfile, f"{proc.pid}\n")
            procs.append(WorkerProc(worker, proc.pid, reused=False))
    return procs


def wait_ready(endpoints: Endpoints, classes: Iterable[str], timeout_s: float, *,
               home: Path, progress: Callable[[int, int], None] | None = None) -> None:
    """Return once each class's worker has announced itself: its daemon_workers row (this
    machine's node of the class) carries the pid this stack started, which is what `skillq
    run` routes by. Show nothing itself.

    The rows are polled every READY_POLL_S (a Celery ping round is slow, and a ping sent
    before a worker's mailbox exists is lost). A worker whose process has exited fails at
    once, with its log's last lines. progress(ready, wanted) is called on each round.
    """
    import psycopg  # here: no cost to the commands that never wait

    from shared.db import libpq

    wanted = {name: read_pid(_pidfile(home, name)) for name in classes}
    host = get_settings().daemon or socket.gethostname()  # as workers.main names its node
    ready: set[str] = set()
    deadline = time.monotonic() + timeout_s
    pg = None
    try:
        while pending := sorted(set(wanted) - ready):
            try:
                pg = pg or libpq.connect(endpoints.database_url, connect_timeout_s=2)
                rows = pg.execute("SELECT node, pid FROM daemon_workers WHERE pid = ANY(%s)",
                                  [[p for p in wanted.values() if p]]).fetchall()
            except psycopg.Error:  # not up yet, or a fresh home's tables not made yet
                if pg is not None:
                    pg.close()
                pg, rows = None, []
            ready.update(name for node, pid in rows for name in pending
                         if node == f"{name}@{host}" and pid == wanted[name])
            if progress:
                progress(len(ready), len(wanted))
            for name in (n for n in pending if n not in ready):
                if not pid_alive(wanted[name]):
                    log = home / f"logs/worker-{name}.log"
                    raise ConfigError(f"worker {name} exited; last lines of {log}:\n{tail(log)}")
            if len(ready) == len(wanted):
                return
            if time.monotonic() > deadline:
                late = ", ".join(n for n in pending if n not in ready)
                raise ConfigError(f"workers not ready after {timeout_s:.0f}s: {late}")
            time.sleep(READY_POLL_S)
    finally:
        if pg is not None:
            pg.close()


def stop_workers(home: Path, timeout_s: float = 30.0) -> list[str]:
    """SIGTERM each worker (warm shutdown: running steps finish), SIGKILL its group after
    timeout_s; remove the pidfiles. Return the classes that were running."""
    home = home.expanduser().resolve()
    if not (home / "run").is_dir():
        return []
    with stack_lock(home):
        pidfiles = sorted((home / "run").glob("worker-*.pid"))
        live = [(pid, f.stem.removeprefix("worker-")) for f in pidfiles
                if (pid := read_pid(f)) and _is_worker(pid, f.stem.removeprefix("worker-"))]
        stop_pids([(pid, signal.SIGTERM) for pid, _ in live], group=True, timeout_s=timeout_s)
        for pidfile in pidfiles:
            pidfile.unlink(missing_ok=True)
    return [name for _, name in live]


def worker_services(home: Path) -> list[Service]:
    """The workers ever started under home (resolved), running or not."""
    found = []
    for worker in WORKER_CLASSES:
        pidfile = _pidfile(home, worker.name)
        if pidfile.exists():
            pid = read_pid(pidfile)
            running = pid is not None and _is_worker(pid, worker.name)
            found.append(Service(f"worker {worker.name}", pid, running,
                                 f"queues {','.join(worker.queues)}, "
                                 f"concurrency {worker.concurrency}"))
    return found


def _pidfile(home: Path, worker: str) -> Path:
    return home / f"run/worker-{worker}.pid"


def _is_worker(pid: int, name: str) -> bool:
    """pid is alive and is `python -m workers.main ... --name <name>`, not a reused pid."""
    argv = cmdline(pid) if pid_alive(pid) else []
    return argv is None or ("workers.main" in argv and "--name" in argv[:-1]
                            and argv[argv.index("--name") + 1] == name)


def _serves(pid: int, endpoints: Endpoints) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return True  # no /proc: trust it
    return f"SKILLQ_BROKER_URL={endpoints.broker_url}".encode() in environ
