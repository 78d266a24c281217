"""Faults under the local API, for real: `skillq run` through the API of a stack that
`skillq up` started in a fresh SKILLQ_HOME rides out what the direct path rides out
(issue 40).

- PostgreSQL stopped under a `skillq run` (and a `skillq wait`) following a run through
  the API's long-poll: the client says once that the database is unreachable, waits,
  says once that it is back and prints the run's outputs; a client with a short
  SKILLQ_DATABASE_OUTAGE_S gives up in one line with exit 3, as the direct path does
  (test_outages.py); the API logs no traceback and its run-end listener reports the
  outage once, not once a second.
- PostgreSQL or Redis down when `skillq run` starts: nothing is recorded by the API, and
  the command does what the direct path does (on the embedded stack: starts the server
  again and runs).
- A skill created or edited a moment ago is run as it is on disk, not as the API's
  vault cache (SKILLQ_DISCOVERY_TTL_S) last read it.
- `skillq api` stopped with SIGTERM removes its api.json.

Every server here is this module's own: stopping them never touches another module's.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import VAULTS, copy_vault, skillq_argv, tail, wait_until

from orchestrator.api.apifile import api_file, read_api
from orchestrator.embedded import embedded_status, resolve_endpoints, stop_embedded
from orchestrator.local_stack import stop_workers
from orchestrator.processes import pid_alive, read_pid
from shared.db.models import PipelineRun
from shared.db.session import transaction
from shared.endpoints import Endpoints
from shared.errors import DatabaseUnreachable
from shared.settings import Settings

pytestmark = pytest.mark.integration

OUTAGE_S = 10.0  # how long PostgreSQL stays stopped under the waiting clients
SHORT_BOUND_S = 3  # SKILLQ_DATABASE_OUTAGE_S of the client meant to give up
HOLD_S = 120  # a held step's cap: a hang guard, the test releases it
SKILLS = ("echo", "stamp", "slow-chain")
PROFILE = {"PYTHONPROFILEIMPORTTIME": "1"}


@dataclass(frozen=True)
class Up:
    """A stack started by `skillq up` (servers, the default worker, the local API)."""

    home: Path
    vault: Path
    env: dict[str, str]

    @property
    def api_log(self) -> Path:
        return self.home / "logs" / "api.log"

    def endpoints(self) -> Endpoints:
        settings = Settings(_env_file=None, home=self.home, broker_url=None,
                            database_url=None, result_backend=None)
        return resolve_endpoints(settings)  # starts a stopped server again, as the CLI does

    def cli(self, *args: str, cwd: Path, env: dict[str, str] | None = None,
            timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(skillq_argv(*args), env={**self.env, **(env or {})}, cwd=cwd,
                              capture_output=True, text=True, timeout=timeout_s, check=False)

    def popen(self, *args: str, cwd: Path, env: dict[str, str] | None = None
              ) -> subprocess.Popen[str]:
        return subprocess.Popen(skillq_argv(*args), env={**self.env, **(env or {})}, cwd=cwd,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def runs_of(self, skill: str) -> list[PipelineRun]:
        with transaction(self.endpoints().database_url) as session:
            rows = list(session.query(PipelineRun).filter(PipelineRun.skill == skill)
                        .order_by(PipelineRun.created_at))
            session.expunge_all()
            return rows

    def logs(self) -> str:
        return "\n".join(f"--- {log}\n{tail(log)}"
                         for log in sorted((self.home / "logs").glob("*.log")))


def stop_server(home: Path, name: str) -> None:
    """PostgreSQL's fast shutdown (SIGINT: every client cut off at once, as in a restart),
    or Redis's SIGTERM, as `skillq down` stops them."""
    pids = [s.pid for s in embedded_status(home) if s.name == name and s.running]
    assert pids and pids[0], f"no embedded {name} runs under {home}"
    os.kill(pids[0], signal.SIGINT if name == "postgres" else signal.SIGTERM)
    wait_until(lambda: not pid_alive(pids[0]), 30, f"{name} to stop")


def running(home: Path, name: str) -> bool:
    return any(s.name == name and s.running for s in embedded_status(home))


def imported(stderr: str) -> set[str]:
    """The heavy top packages a command imported, from its -X importtime lines."""
    heavy = ("sqlalchemy", "celery", "psycopg")
    names = {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines()
             if line.startswith("import time:") and "self [us]" not in line}
    return {n for n in names if any(n == h or n.startswith(h + ".") for h in heavy)}


def said(stderr: str) -> list[str]:
    """What a command wrote to stderr, without its import-time lines."""
    return [line for line in stderr.splitlines() if not line.startswith("import time:")]


class LogSince:
    """What a log gained since this was made."""

    def __init__(self, path: Path) -> None:
        self.path, self.start = path, path.stat().st_size if path.exists() else 0

    def text(self) -> str:
        with self.path.open("rb") as fh:
            fh.seek(self.start)
            return fh.read().decode(errors="replace")


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    root = tmp_path_factory.mktemp("api-faults")
    home, vault = root / "home", root / "vault"
    vault.mkdir()
    for name in SKILLS:
        copy_vault(VAULTS / "pipes" / name, vault / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLQ_")}
    env.update(SKILLQ_HOME=str(home),
               # the fixture scripts write pid files under the tests' own folders
               SKILLQ_STEP_BINDS=str(tmp_path_factory.getbasetemp()),
               # a step's missed heartbeats during the outage do not make it lost
               SKILLQ_DEAD_AFTER_S="60",
               # the API's vault cache outlives the test: a stale read cannot hide
               SKILLQ_DISCOVERY_TTL_S="600")
    stack = Up(home, vault, env)
    try:
        started = stack.cli("up", "--vault", str(vault), "--timeout", "120", cwd=root)
        assert started.returncode == 0, f"{started.stderr}\n{stack.logs()}"
        yield stack
    finally:
        stack.cli("down", cwd=root, timeout_s=120)
        stop_workers(home, timeout_s=10)
        stop_embedded(home)


@pytest.fixture
def thin(up: Up) -> Up:
    """The stack with its API recorded, answering, and every server up."""
    for name in ("redis", "postgres"):
        if not running(up.home, name):
            up.endpoints()
    info = read_api(up.home)
    assert info is not None and pid_alive(info.pid), f"no local API\n{tail(up.api_log)}"
    return up


def held_run(stack: Up, cwd: Path, release: Path, env: dict[str, str] | None = None
             ) -> tuple[subprocess.Popen[str], str]:
    """`skillq run slow-chain` in the background, once its first step runs (held until
    ``release`` exists); the process and the run id."""
    before = {r.id for r in stack.runs_of("slow-chain")}
    pid_dir = release.with_suffix(".pids")
    pid_dir.mkdir()
    proc = stack.popen("run", "slow-chain", "--vault", str(stack.vault), "--input",
                       f"hold_s={HOLD_S}", "--input", f"pid_dir={pid_dir}", "--input",
                       f"release={release}", "--json", cwd=cwd, env={**PROFILE, **(env or {})})
    run_id = str(wait_until(lambda: next((r.id for r in stack.runs_of("slow-chain")
                                          if r.id not in before), None), 30,
                            "the run's record"))
    wait_until(lambda: (pid_dir / "slow.pid").exists(), 30, f"run {run_id}'s step to run")
    return proc, run_id


def test_a_run_through_the_api_waits_through_a_database_outage(thin: Up,
                                                               tmp_path: Path) -> None:
    """Before issue 40 the thin client exited 3 within 0.1 s of PostgreSQL stopping
    ("the database is unreachable"), and api.log had the long-poll's OperationalError."""
    stack, log = thin, LogSince(thin.api_log)
    patient_release, impatient_release = tmp_path / "patient", tmp_path / "impatient"
    patient, run_id = held_run(stack, tmp_path, patient_release)
    impatient, other_id = held_run(stack, tmp_path, impatient_release,
                                   env={"SKILLQ_DATABASE_OUTAGE_S": str(SHORT_BOUND_S)})
    waiter = stack.popen("wait", run_id, "--json", cwd=tmp_path, env=PROFILE)
    try:
        time.sleep(1.0)  # the waiter is following (it says the run id first)
        stop_server(stack.home, "postgres")
        stopped = time.monotonic()
        try:
            # the impatient client gives up after its bound: one line, its own exit code
            _, gave_up = impatient.communicate(timeout=SHORT_BOUND_S + 20)
            assert impatient.returncode == DatabaseUnreachable.exit_code, gave_up
            assert not imported(gave_up), imported(gave_up)  # it went through the API
            errors = [line for line in said(gave_up) if line.startswith("error:")]
            assert len(errors) == 1 and other_id in errors[0], gave_up
            assert "SKILLQ_DATABASE_OUTAGE_S" in errors[0], gave_up
            assert "Traceback" not in gave_up, gave_up
            time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - stopped)))
            for proc in (patient, waiter):
                assert proc.poll() is None, proc.communicate()
        finally:
            stack.endpoints()  # PostgreSQL again, on its data directory and port
        # the step finishes after the database is back: the clients' waiting is under test
        patient_release.touch()
        impatient_release.touch()
        stdout, stderr = patient.communicate(timeout=120)
        waited_out, waited_err = waiter.communicate(timeout=60)
    finally:
        patient_release.touch()
        impatient_release.touch()
        for proc in (patient, impatient, waiter):
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    for out, err, code in ((stdout, stderr, patient.returncode),
                           (waited_out, waited_err, waiter.returncode)):
        assert code == 0, f"{err}\n{stack.logs()}"
        assert not imported(err), imported(err)  # through the API all along
        assert json.loads(out) == {"run_id": run_id, "state": "succeeded",
                                   "outputs": {"label": "slow"}}
        lines = said(err)
        assert "Traceback" not in err, err
        # said once when it began, once when it ended, as the direct path says them
        down = [line for line in lines if line.startswith("database unreachable (")]
        assert len(down) == 1, lines
        assert down[0].endswith("; retrying for up to 600 s (SKILLQ_DATABASE_OUTAGE_S); "
                                f"run {run_id} goes on meanwhile"), down
        back = [line for line in lines if line.startswith("database back after ")]
        assert back and back[0].endswith(f"following run {run_id} again"), lines
        assert len(back) == 1, lines
    logged = log.text()
    assert "Traceback" not in logged, logged
    assert logged.count("run-end listener lost its connection") == 1, logged
    with contextlib.suppress(AssertionError):  # not under test: a tidy end for the next
        wait_until(lambda: all(r.state in ("succeeded", "failed", "cancelled")
                               for r in stack.runs_of("slow-chain")), 60, "the runs to end")


@pytest.mark.parametrize("server", ["postgres", "redis"])
def test_a_run_started_through_the_api_while_a_server_is_down_runs(
        thin: Up, tmp_path: Path, server: str) -> None:
    """Before issue 40: PostgreSQL down, exit 3 at once; Redis down, "the local API
    failed" (exit 1), a traceback in api.log and a run recorded that the command never
    followed. The direct path starts the embedded server again and runs; so now does
    the command whose API cannot reach it (nothing recorded by the API)."""
    stack, log = thin, LogSince(thin.api_log)
    before = {r.id for r in stack.runs_of("echo")}
    stop_server(stack.home, server)
    if server == "redis":
        # A worker holding a message (a run's watchdog) when Redis stops dies of a
        # Celery/kombu bug ("Unrecoverable error: AttributeError(... 'hostname')"), not
        # under test here: its end is awaited, so the command finds it gone (and starts
        # another, as the direct path does), not dying.
        worker = read_pid(stack.home / "run" / "worker-default.pid")
        with contextlib.suppress(AssertionError):
            wait_until(lambda: not pid_alive(worker), 5, "the worker's fate")
    done = stack.cli("run", "echo", "--vault", str(stack.vault), "--input", f"text={server}",
                     "--json", cwd=tmp_path)
    assert done.returncode == 0, f"{done.stderr}\n{stack.logs()}"
    assert json.loads(done.stdout)["outputs"] == {"text": server}
    assert "Traceback" not in done.stderr, done.stderr
    assert running(stack.home, server)
    new = [r for r in stack.runs_of("echo") if r.id not in before]
    assert [r.state for r in new] == ["succeeded"], [(r.id, r.state) for r in new]
    assert "Traceback" not in log.text(), log.text()


def test_a_skill_created_or_edited_a_moment_ago_runs_through_the_api(
        thin: Up, tmp_path: Path) -> None:
    """Before issue 40, `skillq new X` then `skillq run X` said "no skill named 'X'": the
    API's vault, cached for SKILLQ_DISCOVERY_TTL_S, did not have it yet."""
    stack = thin
    warm = stack.cli("run", "echo", "--vault", str(stack.vault), "--input", "text=warm",
                     cwd=tmp_path, env=PROFILE)  # the API reads (and caches) the vault
    assert warm.returncode == 0, warm.stderr
    assert not imported(warm.stderr), imported(warm.stderr)
    created = stack.cli("new", "fresh-skill", "--vault", str(stack.vault), cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    first = stack.cli("run", "fresh-skill", "--vault", str(stack.vault), "--input",
                      "text=hi", "--json", cwd=tmp_path, env=PROFILE)
    assert first.returncode == 0, f"{first.stderr}\n{stack.logs()}"
    assert not imported(first.stderr), imported(first.stderr)
    assert json.loads(first.stdout)["outputs"] == {"result": "HI"}

    # Edited: `text` gets a default, so a run that gives none is good input now.
    manifest = stack.vault / "fresh-skill" / "SKILL.md"
    text = manifest.read_text()
    edited = text.replace("required: true", "required: false\n  default: edited", 1)
    assert edited != text
    manifest.write_text(edited)
    second = stack.cli("run", "fresh-skill", "--vault", str(stack.vault), "--json",
                       cwd=tmp_path, env=PROFILE)
    assert second.returncode == 0, f"{second.stderr}\n{stack.logs()}"
    assert not imported(second.stderr), imported(second.stderr)
    assert json.loads(second.stdout)["outputs"] == {"result": "EDITED"}


def test_sigterm_stops_the_api_and_removes_its_api_json(thin: Up, tmp_path: Path) -> None:
    """Before issue 40 a `skillq api` stopped with SIGTERM died on uvicorn's re-raised
    signal before its `finally`, leaving api.json behind. This one has a SKILLQ_HOME of its
    own (the module's servers, named by URL), so the stack's own API stays recorded."""
    home = tmp_path / "home"
    env = {**thin.env, **thin.endpoints().env(), "SKILLQ_HOME": str(home)}
    proc = subprocess.Popen(skillq_argv("api"), env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until(lambda: read_api(home) is not None or proc.poll() is not None, 60,
                   "the API to record itself")
        info = read_api(home)
        assert info is not None and info.pid == proc.pid, proc.communicate()
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert not api_file(home).exists(), output
    assert "Traceback" not in output, output
    assert proc.returncode in (0, 128 + signal.SIGTERM), (proc.returncode, output)

