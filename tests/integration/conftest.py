"""A real skillq stack for the integration tests: no mocks, no machine services.

One stack per pytest process (session scope; under ``pytest -n 2`` each xdist worker
builds its own):

- embedded Redis and PostgreSQL started under a session tmp SKILLQ_HOME through
  ``orchestrator.embedded.resolve_endpoints`` (the code path a user gets), migrations
  applied with ``shared.db.migrate.upgrade``;
- real Celery workers started as ``python -m workers.main`` (as orchestrator/local_stack.py
  starts them): ``default`` serving default,control (concurrency 2), ``dom0`` serving dom0
  (1) and ``agent-gpu-cmd0`` serving agent,gpu,cmd0 (1).

The workers run with short liveness settings so the recovery tests are quick:
SKILLQ_HEARTBEAT_S=0.5 (a running step touches its record twice a second) and
SKILLQ_DEAD_AFTER_S=3 (a step whose heartbeat is older than 3 s is declared lost by the
planner's watchdog, which the planner re-arms every dead_after_s / 2 = 1.5 s). So a step
of a dead worker is re-dispatched within DEAD_AFTER_S + WATCH_INTERVAL_S (4.5 s) of its
last heartbeat. SKILLQ_INLINE_OUTPUT_BYTES=1024 makes a few-KB output travel by
reference through the ``artifacts`` table. TMPDIR points into the stack's home, so every
script's scratch folder (and so its cwd) is under it: teardown finds stray script
processes of this stack by their cwd, never touching anything else.

Worker logs are under ``<home>/logs``; their tails are attached to every failing test's
report. Teardown (even after failures) stops each worker (SIGTERM, then SIGKILL of its
process group, pool children included), stray scripts, then Redis and PostgreSQL.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from celery import Celery
from sqlalchemy import select
from sqlalchemy.orm import Session
from support.fake_llm import FakeLLM

from orchestrator.embedded import resolve_endpoints, stop_embedded
from shared.celery_app import create_app
from shared.db.daemon_models import DaemonWorker
from shared.db.migrate import upgrade
from shared.db.models import PipelineRun, StepRun
from shared.db.session import transaction
from shared.endpoints import Endpoints
from shared.settings import Settings
from workers.sandbox.runner import scratch_root

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

HEARTBEAT_S = 0.5
DEAD_AFTER_S = 3.0
WATCH_INTERVAL_S = DEAD_AFTER_S / 2  # lifecycle/planner.py advance(): dead_after_s / 2
INLINE_OUTPUT_BYTES = 1024
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
RUN_TIMEOUT_S = 60.0  # a hang guard for a whole pipeline run, not a speed assert

CHROMIUM = "/usr/bin/chromium"  # the `browser` fixture's (test_dashboard.py has its own)

HERE = Path(__file__).parent
VAULTS = HERE / "vaults"
REPO = HERE.parent.parent
EXAMPLES = REPO / "examples"
HOST = socket.gethostname()


@dataclass(frozen=True)
class WorkerSpec:
    name: str
    queues: str
    concurrency: int


STANDARD_WORKERS = (
    WorkerSpec("default", "default,control", 2),
    WorkerSpec("dom0", "dom0", 1),
    WorkerSpec("agent-gpu-cmd0", "agent,gpu,cmd0", 1),
)


def nodename(name: str) -> str:
    return f"{name}@{HOST}"  # as workers/main.py names its Celery node


def proc_stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat fields after the command: [state, ppid, pgrp, ...], None if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def gone_or_zombie(pid: int) -> bool:
    fields = proc_stat(pid)
    return fields is None or fields[0] == "Z"


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        fields = proc_stat(int(entry.name))
        if fields and fields[1] == str(pid) and fields[0] != "Z":
            found.append(int(entry.name))
    return sorted(found)


def host_pid(pid: int, hint: str) -> int | None:
    """The pid, as this process sees it, of a step's process that wrote ``pid`` from
    inside its sandbox (its own PID namespace): the process whose innermost pid it is and
    whose inputs file names ``hint`` (the folder the pid file went to). A pid written
    outside any sandbox is returned as is; None while no such process is found."""
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError, ValueError):
            line = next(x for x in status.read_text().splitlines() if x.startswith("NSpid:"))
            chain = [int(p) for p in line.split()[1:]]
            if len(chain) < 2 or chain[-1] != pid:
                continue
            environ = (status.parent / "environ").read_bytes().split(b"\0")
            inputs = next((v.split(b"=", 1)[1] for v in environ
                           if v.startswith(b"SKILL_INPUTS=")), None)
            if inputs and hint in Path(inputs.decode()).read_text():
                return chain[0]
    proc = Path(f"/proc/{pid}/status")
    with contextlib.suppress(OSError):
        if any(x.startswith("NSpid:") and len(x.split()) == 2
               for x in proc.read_text().splitlines()):
            return pid  # not namespaced: the writer was not sandboxed
    return None


def step_processes(row_id: str) -> list[int]:
    """Every live process of step attempt ``row_id``, by the tag in its environment
    (workers/attempt_end.py), as this process sees them: a pid a sandboxed script wrote
    is its sandbox's, gone with it."""
    tag = f"SKILLQ_STEP_RUN={row_id}".encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        with contextlib.suppress(OSError, ValueError):
            if tag in environ.read_bytes().split(b"\0") and not gone_or_zombie(
                    int(environ.parent.name)):
                found.append(int(environ.parent.name))
    return found


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now (for a server a test starts)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def kill_pids(pids: Sequence[int], sig: signal.Signals = signal.SIGKILL) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def wait_until(check: Callable[[], Any], timeout_s: float, what: str,
               every_s: float = 0.05) -> Any:
    """check()'s first truthy value; AssertionError naming ``what`` after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(every_s)


def tail(path: Path, lines: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) or "(empty)"
    except OSError:
        return "(no log)"


@dataclass
class Worker:
    spec: WorkerSpec
    proc: subprocess.Popen[bytes]
    log: Path
    # What its environment held on top of the stack's (None: a variable it was started
    # without): ensure_standard_workers compares it with Stack.worker_env.
    extra_env: dict[str, str | None] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def node(self) -> str:
        return nodename(self.spec.name)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def pool(self) -> list[int]:
        """The prefork pool's child processes."""
        return children_of(self.pid)

    def kill9(self) -> list[int]:
        """SIGKILL the main process and every pool child at once (a crashed machine)."""
        victims = [self.pid, *self.pool()]
        kill_pids(victims)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        return victims

    def exited(self) -> bool:
        """The main process exited; WNOWAIT leaves it a zombie, so its pid and process
        group id cannot be reused before we reap it."""
        if self.proc.returncode is not None:
            return True
        try:
            return os.waitid(os.P_PID, self.pid,
                             os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM (warm shutdown: running steps finish), then SIGKILL of the whole
        process group (the worker started its own session; its pool children are in it),
        then reap."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout_s
            while not self.exited() and time.monotonic() < deadline:
                time.sleep(0.05)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            kill_pids(self.pool())  # none left after killpg, unless one left the group
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)


@dataclass
class Stack:
    home: Path
    endpoints: Endpoints
    env: dict[str, str]
    app: Celery
    workers: dict[str, Worker] = field(default_factory=dict)
    # Standard workers a test left in a doubtful state (say, a replaced pool process):
    # the next test that asks for a healthy stack gets them restarted.
    tainted: set[str] = field(default_factory=set)
    # The environment, on top of ``env``, a standard worker is to run with for now (None
    # unsets a variable), by worker: the ``worker_env`` fixture's, set by ``healthy``
    # for its test. ensure_standard_workers restarts a standard worker started with
    # anything else, so the tests that want the same environment share one worker.
    worker_env: dict[str, dict[str, str | None]] = field(default_factory=dict)

    # -- workers ----------------------------------------------------------------------
    def start_worker(self, spec: WorkerSpec,
                     extra_env: dict[str, str | None] | None = None) -> Worker:
        """Start a worker with the stack's environment, plus ``extra_env`` (a None value
        unsets that variable)."""
        if spec.name in self.workers and self.workers[spec.name].alive():
            raise RuntimeError(f"worker {spec.name} already runs")
        extra = dict(extra_env or {})
        env = {**self.env, **{k: v for k, v in extra.items() if v is not None}}
        for name in [k for k, v in extra.items() if v is None]:
            env.pop(name, None)
        log = self.home / "logs" / f"worker-{spec.name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "workers.main", "--queues", spec.queues,
                "--concurrency", str(spec.concurrency), "--name", spec.name]
        with log.open("ab") as fh:
            proc = subprocess.Popen(argv, env=env, cwd=self.home,
                                    stdin=subprocess.DEVNULL, stdout=fh,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        worker = Worker(spec, proc, log, extra)
        self.workers[spec.name] = worker
        return worker

    def wait_ready(self, names: Sequence[str], timeout_s: float = READY_TIMEOUT_S) -> None:
        """Return once each named worker answers a Celery ping."""
        pending = {nodename(n): n for n in names}
        deadline = time.monotonic() + timeout_s
        while pending:
            for reply in self.app.control.ping(destination=list(pending), timeout=0.5) or []:
                for node in reply:
                    pending.pop(node, None)
            for name in list(pending.values()):
                worker = self.workers[name]
                if not worker.alive():
                    raise RuntimeError(f"worker {name} exited ({worker.proc.returncode}); "
                                       f"{worker.log}:\n{tail(worker.log)}")
            if pending and time.monotonic() > deadline:
                logs = "\n".join(f"--- {self.workers[n].log}\n{tail(self.workers[n].log)}"
                                 for n in pending.values())
                raise RuntimeError(f"workers not ready after {timeout_s:g}s: "
                                   f"{', '.join(pending.values())}\n{logs}")

    def ensure_standard_workers(self) -> None:
        """Restart any standard worker a test killed, wait until it answers, and have each
        consume its queues again (a test may have told one to stop)."""
        restarted = []
        for spec in STANDARD_WORKERS:
            worker = self.workers.get(spec.name)
            wanted = self.worker_env.get(spec.name, {})
            if worker is None or not worker.alive() or spec.name in self.tainted \
                    or worker.extra_env != wanted:
                if worker is not None:
                    worker.stop(timeout_s=5)
                self.start_worker(spec, wanted)
                restarted.append(spec.name)
                self.tainted.discard(spec.name)
        if restarted:
            self.wait_ready(restarted)
        for spec in STANDARD_WORKERS:
            for queue in set(spec.queues.split(",")) - self.queues_of(spec.name):
                self.consumer(spec.name, queue, on=True)

    def queues_of(self, worker: str) -> set[str]:
        """The queues a running worker consumes now (one remote-control round trip)."""
        node = nodename(worker)
        replies = self.app.control.inspect(destination=[node], timeout=5, limit=1
                                           ).active_queues() or {}
        assert node in replies, f"worker {worker} did not answer"
        return {q["name"] for q in replies[node]}

    def consumer(self, worker: str, queue: str, *, on: bool) -> None:
        """Make a running worker start or stop consuming a queue (Celery remote control),
        and return once it reports so."""
        dest = [nodename(worker)]
        if on:
            self.app.control.add_consumer(queue, destination=dest, reply=True, timeout=5)
        else:
            self.app.control.cancel_consumer(queue, destination=dest, reply=True, timeout=5)
        wait_until(lambda: (queue in self.queues_of(worker)) == on, 10,
                   f"{worker} to {'start' if on else 'stop'} consuming {queue}", every_s=0.1)
        # ...and until its next heartbeat has told the daemon registry (workers/announce.py),
        # which is what `skillq run` checks.
        wait_until(lambda: (queue in self.announced_queues(worker)) == on, 10,
                   f"{worker}'s announcement to show {queue} {'on' if on else 'off'}",
                   every_s=0.1)

    def announced_queues(self, worker: str) -> set[str]:
        row = self.daemon_worker(nodename(worker))
        return set(row.queues) if row is not None else set()

    def daemon_worker(self, node: str) -> DaemonWorker | None:
        """The daemon registry's row of a Celery node (what its heartbeats announce,
        workers/announce.py), None before its first announcement."""
        with self.db() as session:
            row = session.get(DaemonWorker, node)
            if row is not None:
                session.expunge(row)
            return row

    def is_script(self, pid: int) -> bool:
        """pid runs a skill script of this stack: its cwd is a scratch folder and its
        environment holds the tag of an attempt this stack's database records (so a pid
        read from a file and since reused is never someone else's).

        Sandboxed scratch folders share one root on the machine (/tmp/skillq-scratch as
        root), so the folder alone does not say whose a script is: the other xdist
        worker's stack tore down and SIGKILLed this one's running step (a CI flake)."""
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            tag = next((v.split(b"=", 1)[1].decode() for v in
                        Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                        if v.startswith(b"SKILLQ_STEP_RUN=")), None)
        except OSError:
            return False
        if tag is None or not cwd.startswith(str(scratch_root()) + os.sep) or \
                gone_or_zombie(pid):
            return False
        return self._owns(tag.split("/", 1)[0], cwd)

    def _owns(self, run_id: str, cwd: str) -> bool:
        """Whether run ``run_id`` is this stack's: its database has it; while the database
        is down, whether the scratch slot's pool process is a child of this stack's
        workers (`p<pid>` under the scratch root)."""
        try:
            with self.db() as session:
                return session.get(PipelineRun, run_id) is not None
        except Exception:  # an outage test's stopped server: ask /proc instead
            pass
        slot = Path(cwd).relative_to(scratch_root()).parts[0]
        if not (slot.startswith("p") and slot[1:].isdigit()):
            return True  # no slot: a per-stack TMPDIR's scratch folder, this stack's
        try:
            status = Path(f"/proc/{slot[1:]}/status").read_text()
        except OSError:
            return False
        parent = next((int(x.split()[1]) for x in status.splitlines()
                       if x.startswith("PPid:")), None)
        return parent in {w.pid for w in self.workers.values()}

    def kill_scripts(self, pids: Sequence[int]) -> None:
        kill_pids([pid for pid in pids if self.is_script(pid)])

    def stop_strays(self) -> list[int]:
        """SIGKILL every script this stack's workers left running."""
        found = [int(p.name) for p in Path("/proc").glob("[0-9]*") if self.is_script(int(p.name))]
        kill_pids(found)
        return found

    # -- the CLI ------------------------------------------------------------------------
    def cli(self, *args: str, cwd: Path, timeout_s: float = 120.0,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(skillq_argv(*args), env={**self.cli_env, **(env or {})},
                              cwd=cwd, capture_output=True, text=True, timeout=timeout_s,
                              check=False)

    def cli_popen(self, *args: str, cwd: Path,
                  env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """The CLI in the background (the caller communicate()s with it)."""
        return subprocess.Popen(skillq_argv(*args), env={**self.cli_env, **(env or {})},
                                cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    @property
    def cli_env(self) -> dict[str, str]:
        return {k: v for k, v in self.env.items() if k != "TMPDIR"}

    # -- the records --------------------------------------------------------------------
    @contextlib.contextmanager
    def db(self) -> Iterator[Session]:
        with transaction(self.endpoints.database_url) as session:
            yield session

    def run(self, run_id: str) -> PipelineRun:
        with self.db() as session:
            run = session.get(PipelineRun, run_id)
            assert run is not None, f"no pipeline_runs row {run_id}"
            session.expunge(run)
            return run

    def runs_of(self, skill: str) -> list[PipelineRun]:
        with self.db() as session:
            rows = list(session.scalars(select(PipelineRun).where(PipelineRun.skill == skill)
                                        .order_by(PipelineRun.created_at)).all())
            session.expunge_all()
            return rows

    def created_run(self, skill: str, before: set[str]) -> str | None:
        """The newest top-level run of ``skill`` not in ``before``, if any."""
        new = [r.id for r in self.runs_of(skill)
               if r.id not in before and r.parent_step_run_id is None]
        return new[-1] if new else None

    def new_run(self, skill: str, before: set[str], timeout_s: float = 30.0) -> str:
        """The id of a new top-level run of ``skill`` (waiting for its row)."""
        found: str = wait_until(lambda: self.created_run(skill, before), timeout_s,
                                f"a new run of {skill}")
        return found

    def run_ids(self, skill: str) -> set[str]:
        return {r.id for r in self.runs_of(skill)}

    def steps(self, run_id: str, step_id: str | None = None) -> list[StepRun]:
        """Every attempt of a run's steps, by step, item and attempt."""
        with self.db() as session:
            query = select(StepRun).where(StepRun.run_id == run_id)
            if step_id is not None:
                query = query.where(StepRun.step_id == step_id)
            rows = list(session.scalars(query.order_by(StepRun.step_id, StepRun.item_index,
                                                       StepRun.attempt)).all())
            session.expunge_all()
            return rows

    def wait_run(self, run_id: str, timeout_s: float = RUN_TIMEOUT_S) -> PipelineRun:
        def finished() -> PipelineRun | None:
            run = self.run(run_id)
            return run if run.state in ("succeeded", "failed", "cancelled", "rejected") else None

        return wait_until(finished, timeout_s, f"run {run_id} to finish", every_s=0.1)

    def logs(self) -> dict[str, Path]:
        return {name: w.log for name, w in self.workers.items()}

    def teardown(self) -> None:
        for worker in self.workers.values():
            if worker.proc.returncode is None:  # not reaped: the pid is still this worker
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.pid, signal.SIGTERM)  # at once: warm shutdowns overlap
        for worker in self.workers.values():
            worker.stop()
        self.stop_strays()
        with contextlib.suppress(Exception):
            self.app.close()
        stop_embedded(self.home)


def skillq_argv(*args: str) -> list[str]:
    script = Path(sys.executable).with_name("skillq")
    base = [str(script)] if script.exists() else [
        sys.executable, "-c", "from orchestrator.cli.app import main; main()"]
    return [*base, *args]


_ACTIVE: list[Stack] = []  # the stack of this pytest process, for failure reports


def build_stack(home: Path, *, migrate: bool = True, broker_url: str | None = None,
                redis_results: bool = False) -> Stack:
    """Embedded servers under home (no workers yet); ``migrate=False`` leaves the database
    without tables, as a first start finds it. ``broker_url``: that broker (RabbitMQ,
    test_rabbitmq*.py) instead of the embedded Redis, which then starts only with
    ``redis_results``, as the result backend."""
    settings = Settings(_env_file=None, home=home, broker_url=None if redis_results
                        else broker_url, database_url=None, result_backend=None)
    endpoints = resolve_endpoints(settings)  # starts the embedded Redis and PostgreSQL
    if broker_url is not None and redis_results:
        endpoints = Endpoints(broker_url=broker_url, database_url=endpoints.database_url,
                              result_backend=endpoints.broker_url)
    if migrate:
        upgrade(endpoints.database_url)
    (home / "tmp").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLQ_")}
    env.update(endpoints.env(), SKILLQ_HOME=str(home), SKILLQ_HEARTBEAT_S=str(HEARTBEAT_S),
               SKILLQ_DEAD_AFTER_S=str(DEAD_AFTER_S),
               SKILLQ_INLINE_OUTPUT_BYTES=str(INLINE_OUTPUT_BYTES),
               # No fallback vault: a run whose vault a worker cannot find fails loudly
               # instead of running a same-named skill from somewhere else.
               SKILLQ_VAULT=str(home / "no-default-vault"), TMPDIR=str(home / "tmp"),
               # Steps run sandboxed as another account (workers/sandbox/): the tests'
               # folders, where fixture scripts leave pid files and stamps, are theirs
               # to write (see step_writable_tmp_path); the vaults in them stay hidden.
               SKILLQ_STEP_BINDS=str(home.parent),
               PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    app = create_app(settings, broker_url=endpoints.broker_url,
                     result_backend=endpoints.result_backend)
    return Stack(home=home, endpoints=endpoints, env=env, app=app)


@contextlib.contextmanager
def running_stack(home: Path, **build: Any) -> Iterator[Stack]:
    """A stack of the caller's own with the standard workers ready, as the session
    ``stack`` is, torn down afterwards; ``build``: build_stack's options."""
    built: Stack | None = None
    try:
        built = build_stack(home, **build)
        _ACTIVE.append(built)
        for spec in STANDARD_WORKERS:
            built.start_worker(spec)
        built.wait_ready([s.name for s in STANDARD_WORKERS])
        yield built
    finally:
        if built is not None:
            with contextlib.suppress(ValueError):
                _ACTIVE.remove(built)
            built.teardown()
        else:
            stop_embedded(home)


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("skillq-home")) as built:
        yield built


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    """The scripted model server (tests/support/fake_llm), one a module: its modules point
    an agent worker at it through ``worker_env`` (``llm.env()``)."""
    with FakeLLM() as server:
        yield server


@pytest.fixture
def worker_env() -> dict[str, dict[str, str | None]]:
    """The environment, on top of the stack's, that ``healthy`` starts standard workers
    with for this test, by worker name (a None value unsets a variable): none here. A
    module overrides this fixture to run its tests on, say, an agent worker pointed at a
    fake model server; consecutive tests wanting the same environment share one worker
    (restarting it in each test would cost two restarts a test: there and back)."""
    return {}


@pytest.fixture
def healthy(stack: Stack, worker_env: dict[str, dict[str, str | None]]) -> Iterator[Stack]:
    """The stack with every standard worker alive, started with ``worker_env``'s
    environment and consuming its queues (a recovery test may have killed one or told
    one to stop consuming)."""
    stack.worker_env = {name: dict(extra) for name, extra in worker_env.items()}
    try:
        stack.ensure_standard_workers()
        yield stack
    finally:
        stack.worker_env = {}  # what a later module's ensure_standard_workers wants


def copy_vault(source: Path, dest: Path) -> Path:
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


ORCHESTRATOR = """---
name: {name}
description: "Run {skill} in one step. Use it to test an orchestrator of an agent step."
version: 1
inputs:
  - name: text
    type: string
    required: true
    description: "The text."
outputs:
  - name: summary
    type: string
    description: "From the step."
    from: ${{steps.{step}.outputs.summary}}
steps:
  - id: {step}
    skill: {skill}
    with:
      text: ${{inputs.text}}
---

# {name}

Runs {skill}.
"""


def add_orchestrator(vault: Path, name: str, skill: str, step: str = "one") -> None:
    """Add skill ``name`` to the vault: one step ``step`` running ``skill`` (which takes
    ``text`` and answers ``summary``, as the agents vault's summarize does)."""
    folder = vault / name
    folder.mkdir()
    (folder / "SKILL.md").write_text(ORCHESTRATOR.format(name=name, step=step, skill=skill))
    (folder / "sub-skills.json").write_text(json.dumps(
        {"sub_skills": [{"skill_id": skill, "role": "step"}]}))


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    """A fresh copy of the fixture vault: workers read (and write benchmarks.json in) it."""
    return copy_vault(VAULTS / "pipes", tmp_path / "vault")


@dataclass(repr=False)
class RunResult:
    proc: subprocess.CompletedProcess[str]
    run_id: str | None

    @property
    def code(self) -> int:
        return self.proc.returncode

    @property
    def stdout(self) -> str:
        return self.proc.stdout

    @property
    def stderr(self) -> str:
        return self.proc.stderr

    def json(self) -> Any:
        """The run's outputs (`skillq run --json` prints {"run_id", "state", "outputs"})."""
        printed = json.loads(self.proc.stdout)
        assert printed.get("run_id") == self.run_id, printed
        return printed["outputs"]

    def __repr__(self) -> str:  # what a failed `assert ..., result` shows
        return (f"run {self.run_id}: exit {self.code}\n--- stdout\n{self.stdout}"
                f"\n--- stderr\n{self.stderr}")


@pytest.fixture
def run_skill(healthy: Stack, tmp_path: Path) -> Callable[..., RunResult]:
    """`skillq run NAME --vault V --input k=v ...` as a subprocess; the run id it created.

    The run id is the newest top-level pipeline_runs row of that skill created by this
    call (None when the command created none).
    """

    def call(name: str, vault_path: Path, *args: str, inputs: dict[str, Any] | None = None,
             timeout_s: float = 120.0, env: dict[str, str] | None = None) -> RunResult:
        argv = ["run", name, "--vault", str(vault_path)]
        for key, value in (inputs or {}).items():
            text = value if isinstance(value, str) else json.dumps(value)
            argv += ["--input", f"{key}={text}"]
        before = healthy.run_ids(name)
        proc = healthy.cli(*argv, *args, cwd=tmp_path, timeout_s=timeout_s, env=env)
        new = [r for r in healthy.runs_of(name)
               if r.id not in before and r.parent_step_run_id is None]
        assert len(new) <= 1, f"one command created {len(new)} runs"
        return RunResult(proc, new[0].id if new else None)

    return call


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "agent_env(**settings): the agent worker's settings for this test, on "
        "top of its module's worker_env (test_agent_steps.py; None unsets a variable)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Iterator[None]:
    report = yield
    if report.failed and _ACTIVE and not hasattr(report, "wasxfail"):
        for name, log in _ACTIVE[-1].logs().items():
            report.sections.append((f"worker log {name} ({log})", tail(log, 80)))
    return report


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Real Chromium (Playwright), headless, for the module's pages. (test_dashboard.py
    still has its own browser and page fixtures, which also print where its screenshots
    went and accept confirm dialogs: to fold in here.)"""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A page of a fresh browser context (no cookies, no storage), 15 s timeouts."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    yield opened
    context.close()


@pytest.fixture(scope="session")
def xdisplay(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real X server (Xvfb, on a display number it picks itself) for desktop steps;
    the cmd0 worker is restarted with DISPLAY pointing at it."""
    xvfb = shutil.which("Xvfb")
    if xvfb is None:
        pytest.fail("Xvfb is not installed; the desktop (cmd0) tests need a real X display: "
                    "apt-get install -y xvfb xdotool")
    log = tmp_path_factory.mktemp("xvfb") / "xvfb.log"
    read_fd, write_fd = os.pipe()
    with log.open("wb") as fh:
        proc = subprocess.Popen([xvfb, "-displayfd", str(write_fd), "-screen", "0",
                                 "1280x800x24", "-nolisten", "tcp"], pass_fds=(write_fd,),
                                stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
    os.close(write_fd)
    try:
        with os.fdopen(read_fd) as pipe:  # Xvfb writes the display number once it listens
            number = pipe.readline().strip()
        if not number:
            raise RuntimeError(f"Xvfb did not start:\n{tail(log)}")
        display = f":{number}"
        stack.env["DISPLAY"] = display
        stack.tainted.add("agent-gpu-cmd0")  # `healthy` restarts it, now with DISPLAY
        yield display
    finally:
        stack.env.pop("DISPLAY", None)
        stack.tainted.add("agent-gpu-cmd0")
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(autouse=True)
def step_writable_tmp_path(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fixture scripts write pid files and stamps where the test says, as the sandbox's
    step account: the test's folder (bound into every sandbox, SKILLQ_STEP_BINDS) is
    open to it, and what the test creates there meanwhile too (umask 0)."""
    if "tmp_path" not in request.fixturenames:
        yield
        return
    tmp_path: Path = request.getfixturevalue("tmp_path")
    for folder, mode in ((tmp_path.parent, 0o711), (tmp_path, 0o777)):
        with contextlib.suppress(OSError):
            folder.chmod(mode)
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)
