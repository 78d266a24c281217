"""The local API as a process of the local stack: started detached by `skillq up` (a
pidfile and a log under SKILLQ_HOME, as the workers), stopped by `skillq down`, a row of
`skillq status`."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

from orchestrator.api.apifile import api_file, read_api
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
from shared.errors import ConfigError

MODULE = "orchestrator.api"


class ApiProc(NamedTuple):
    pid: int
    port: int
    reused: bool


def _pidfile(home: Path) -> Path:
    return home / "run/api.pid"


def _is_api(pid: int | None) -> bool:
    """pid is alive and is `python -m orchestrator.api`, not a reused pid."""
    if not pid_alive(pid):
        return False
    assert pid is not None
    argv = cmdline(pid)
    return argv is None or MODULE in argv


def start_api(home: Path, endpoints: Endpoints, clients_key: str,
              timeout_s: float = 30.0) -> ApiProc:
    """The API serving this stack, started unless one already serves clients with
    ``clients_key`` (apifile.endpoints_key of the `skillq up` caller's environment)."""
    home = home.expanduser().resolve()
    with stack_lock(home):
        for sub in ("run", "logs"):
            (home / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
        pidfile, log = _pidfile(home), home / "logs/api.log"
        pid = read_pid(pidfile)
        info = read_api(home)
        if _is_api(pid):
            if info is not None and info.pid == pid and info.endpoints == clients_key:
                return ApiProc(info.pid, info.port, reused=True)
            assert pid is not None
            stop_pids([(pid, signal.SIGTERM)], group=True, timeout_s=10)
        # --local-workers: it starts a worker class a run needs, as `skillq up` started these
        argv = [sys.executable, "-m", MODULE, "--endpoints-key", clients_key, "--local-workers"]
        with open_log(log) as fh:
            proc = subprocess.Popen(argv, env=stack_env(home, endpoints),
                                    stdin=subprocess.DEVNULL, stdout=fh,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        started.append(proc)
        write_text(pidfile, f"{proc.pid}\n")
    deadline = time.monotonic() + timeout_s
    while (info := read_api(home)) is None or info.pid != proc.pid:
        if proc.poll() is not None:
            raise ConfigError(f"the local API exited; last lines of {log}:\n{tail(log)}")
        if time.monotonic() > deadline:
            raise ConfigError(f"the local API did not start within {timeout_s:.0f}s; "
                              f"see {log}")
        time.sleep(0.05)
    return ApiProc(proc.pid, info.port, reused=False)


def stop_api(home: Path, timeout_s: float = 10.0) -> bool:
    """SIGTERM the API (it removes api.json itself), SIGKILL after timeout_s; whether one
    was running."""
    home = home.expanduser().resolve()
    pidfile = _pidfile(home)
    if not pidfile.exists():
        return False
    with stack_lock(home):
        pid = read_pid(pidfile)
        running = _is_api(pid)
        if running:
            assert pid is not None
            stop_pids([(pid, signal.SIGTERM)], group=True, timeout_s=timeout_s)
        info = read_api(home)
        if info is not None and info.pid == pid:  # killed before it could tidy up
            api_file(home).unlink(missing_ok=True)
        pidfile.unlink(missing_ok=True)
    return running


def api_service(home: Path) -> Service | None:
    """`skillq status`'s row for the API, if one was ever started under home."""
    pidfile = _pidfile(home)
    if not pidfile.exists():
        return None
    pid = read_pid(pidfile)
    info = read_api(home)
    where = f"http://127.0.0.1:{info.port}/ (token in {api_file(home)})" \
        if info is not None and info.pid == pid else "not listening"
    return Service("api", pid, _is_api(pid), where)



