"""The processes of the local stack, the servers' and the workers' alike: the stack lock,
pidfiles, whether a pid is still the process it was, stopping process groups, logs, and
the environment they start with. local_stack.py (the workers), embedded.py (the
servers) and api/process.py (the local API) all use these, and none of them is used here.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO, NamedTuple

import filelock

from orchestrator.embedded_credentials import private_home
from shared.endpoints import Endpoints
from shared.errors import ConfigError
from shared.settings import Settings, get_settings

LOCK_TIMEOUT_S = 120.0


class Service(NamedTuple):  # a process of the local stack: a row of `skillq status`
    name: str
    pid: int | None
    running: bool
    detail: str


def stack_env(home: Path, endpoints: Endpoints) -> dict[str, str]:
    """This environment, its SKILLQ_* settings made explicit (.env values, relative paths
    resolved here), then the endpoints and home."""
    settings, env = get_settings(), dict(os.environ)
    for field in Settings.model_fields:
        value = getattr(settings, field)
        if value is not None:
            env[f"SKILLQ_{field.upper()}"] = str(
                value.expanduser().resolve() if isinstance(value, Path) else value)
    env.update(endpoints.env(), SKILLQ_HOME=str(home))
    return env


# Handles of what this process started: dropping a running Popen warns; pid_alive reaps.
started: list[subprocess.Popen[bytes]] = []


@contextlib.contextmanager
def stack_lock(home: Path) -> Iterator[None]:
    """One starter or stopper at a time, so two `skillq run` never start two servers."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)  # for the lock file
    try:  # only the acquire can time out: nothing under the lock takes another filelock
        with filelock.FileLock(str(home / "stack.lock"), timeout=LOCK_TIMEOUT_S):
            # under the lock: a start holding it may be changing home's mode for its server
            private_home(home)  # queued payloads, logs, the servers' passwords: owner-only
            yield
    except filelock.Timeout as exc:
        raise ConfigError(f"another skillq has held {home / 'stack.lock'} for "
                          f"{LOCK_TIMEOUT_S:.0f}s; is it stuck starting the stack?") from exc


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def pid_alive(pid: int | None) -> bool:
    """A live process. A zombie counts as dead (and is reaped if ours): where init does not
    reap orphans (some containers), each killed server stays one, and kill(pid, 0) works."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    fields = _stat(Path(f"/proc/{pid}"))
    if fields is None:
        return True  # no /proc (macOS): the signal probe is all there is
    if (state := fields[0]) == "Z":
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    return state != "Z"


def cmdline(pid: int) -> list[str] | None:
    """The process's argv, or None where /proc is missing (callers then trust the pidfile)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return raw.decode(errors="replace").rstrip("\0").split("\0")


def runs(pid: int | None, needle: str) -> bool:
    """pid is alive and its command line mentions needle: a reused pid is not our server."""
    if pid is None or not pid_alive(pid):
        return False
    argv = cmdline(pid)
    return argv is None or any(needle in arg for arg in argv)


def stop_pids(targets: Sequence[tuple[int, signal.Signals]], *, group: bool,
              timeout_s: float) -> None:
    """Send each its graceful signal, wait, then SIGKILL what is left (its group, if group).

    The graceful signal goes to the process only: a Celery worker's pool children reset
    SIGTERM and would die mid-step; the worker itself drains them (warm shutdown).
    """
    for pid, sig in targets:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
    pending = [pid for pid, _ in targets]
    for wait_s, then_kill in ((timeout_s, True), (5.0, False)):
        end = time.monotonic() + wait_s
        while pending and time.monotonic() < end:
            time.sleep(0.05)
            groups = _live_groups() if group else set()
            pending = [pid for pid in pending if pid_alive(pid) or pid in groups]
        for pid in pending if then_kill else ():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                (os.killpg if group else os.kill)(pid, signal.SIGKILL)


def _live_groups() -> set[int]:
    """Process groups with a live member (killpg(pgid, 0) would count zombies too). Without
    /proc, none: only the leaders are watched (a worker's leader outlives its children)."""
    proc = Path("/proc")
    return {int(f[2]) for f in map(_stat, proc.iterdir()) if f and f[0] != "Z"} \
        if proc.is_dir() else set()


def _stat(proc: Path) -> list[str] | None:
    """/proc/<pid>/stat after the command name: state, ppid, pgrp, ..."""
    try:
        return (proc / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def open_log(path: Path) -> BinaryIO:
    """Append, owner-only (an older skillq made them 0644): a log may show queued work,
    a step's output or a failing statement."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    if os.fstat(fd).st_mode & 0o077:
        os.fchmod(fd, 0o600)
    return os.fdopen(fd, "ab")


def tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) or "(empty)"
    except OSError:
        return "(no log)"
