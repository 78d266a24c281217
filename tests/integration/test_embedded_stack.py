"""The embedded stack for real: Redis and PostgreSQL servers, worker processes, the CLI.

No mocks: every server and worker here is a real process, stopped in the fixtures'
teardown even when a test fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
import redis
from conftest import VAULTS

from orchestrator.embedded import embedded_status, resolve_endpoints, stop_embedded
from orchestrator.local_stack import WORKER_CLASSES, stop_workers
from orchestrator.processes import pid_alive, read_pid
from shared.celery_app import create_app
from shared.errors import ConfigError
from shared.settings import Settings, get_settings

pytestmark = pytest.mark.integration

URL_VARS = ("SKILLQ_BROKER_URL", "SKILLQ_DATABASE_URL", "SKILLQ_RESULT_BACKEND")


def wait_for(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(0.02)


def settings_for(home: Path, **urls: str) -> Settings:
    """Settings pointing at home, with only the URLs given (whatever the environment says)."""
    return Settings(_env_file=None, home=home, broker_url=urls.get("broker_url"),
                    database_url=urls.get("database_url"), result_backend=None)


def server_pids(home: Path) -> dict[str, int | None]:
    return {s.name: s.pid for s in embedded_status(home) if s.running}


def teardown_stack(home: Path) -> None:
    stop_workers(home, timeout_s=10)
    stop_embedded(home)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("skillq-home")
    try:
        yield home
    finally:
        teardown_stack(home)


@pytest.fixture
def other_home(tmp_path: Path) -> Iterator[Path]:
    try:
        yield tmp_path / "other-home"
    finally:
        teardown_stack(tmp_path / "other-home")


def test_starts_real_redis_and_postgres(home: Path) -> None:
    started = time.monotonic()
    endpoints = resolve_endpoints(settings_for(home))
    print(f"embedded Redis + PostgreSQL ready in {time.monotonic() - started:.2f}s")
    assert re.fullmatch(r"redis://:[\w-]+@127\.0\.0\.1:\d+/0", endpoints.broker_url)
    assert endpoints.result_backend == endpoints.broker_url
    assert re.fullmatch(r"postgresql\+psycopg://\w+:[\w-]+@127\.0\.0\.1:\d+/skillq",
                        endpoints.database_url)
    client = redis.Redis.from_url(endpoints.broker_url)
    client.set("greeting", "hello")
    assert client.get("greeting") == b"hello"
    with psycopg.connect(endpoints.database_url.replace("+psycopg", "")) as conn:
        conn.execute("create table if not exists probe (n int)")
        conn.execute("insert into probe values (1), (2)")
        assert conn.execute("select count(*) from probe").fetchone() == (2,)


def test_second_resolve_reuses_the_running_servers(home: Path) -> None:
    first, pids = resolve_endpoints(settings_for(home)), server_pids(home)
    again = resolve_endpoints(settings_for(home))
    assert again == first
    assert server_pids(home) == pids and set(pids) == {"redis", "postgres"}


def test_a_killed_redis_is_restarted_on_its_port_with_its_data(home: Path) -> None:
    endpoints = resolve_endpoints(settings_for(home))
    redis.Redis.from_url(endpoints.broker_url).set("survivor", "queued")
    old = server_pids(home)["redis"]
    assert old
    os.kill(old, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while pid_alive(old) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not pid_alive(old)
    assert resolve_endpoints(settings_for(home)) == endpoints  # same port, kept in state
    assert server_pids(home)["redis"] not in (None, old)
    assert redis.Redis.from_url(endpoints.broker_url).get("survivor") == b"queued"  # AOF


def test_a_killed_redis_whose_port_is_still_held_a_moment_comes_back_on_it(
        home: Path) -> None:
    # A SIGKILLed server is gone from /proc's command line before the kernel has closed
    # its listening socket; a restart in that moment found the kept port busy and took
    # another, and every worker holding the old URL lost its broker (seen under load).
    endpoints = resolve_endpoints(settings_for(home))
    old = server_pids(home)["redis"]
    assert old
    port = int(endpoints.broker_url.rsplit(":", 1)[1].split("/")[0])
    os.kill(old, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while pid_alive(old) and time.monotonic() < deadline:
        time.sleep(0.02)
    held = socket.socket()  # the dying server's socket, as the restart sees it
    held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

    def taken() -> bool:  # once the real one is closed (it may still be, this very race)
        try:
            held.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True

    wait_for(taken, 5, "the killed Redis's port to be free")
    held.listen()
    release = threading.Timer(0.5, held.close)
    release.start()
    try:
        assert resolve_endpoints(settings_for(home)) == endpoints  # waited, same port
    finally:
        release.cancel()
        held.close()
    assert redis.Redis.from_url(endpoints.broker_url).ping()


def test_start_false_names_what_is_not_running(tmp_path: Path) -> None:
    expected = r"Redis and PostgreSQL not running .* SKILLQ_BROKER_URL and SKILLQ_DATABASE_URL"
    with pytest.raises(ConfigError, match=expected):
        resolve_endpoints(settings_for(tmp_path / "empty"), start=False)


def test_a_configured_broker_is_used_as_is(home: Path, other_home: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # The configured broker: another home's Redis (real, and there on any machine).
    configured = resolve_endpoints(settings_for(home)).broker_url
    for var in URL_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SKILLQ_BROKER_URL", configured)
    monkeypatch.setenv("SKILLQ_HOME", str(other_home))
    endpoints = resolve_endpoints(get_settings())
    assert endpoints.broker_url == endpoints.result_backend == configured
    assert set(server_pids(other_home)) == {"postgres"}  # the database is still embedded
    assert not (other_home / "redis").exists() and not (other_home / "run/redis.pid").exists()


def test_concurrent_callers_share_one_set_of_servers(other_home: Path) -> None:
    code = ("from orchestrator.embedded import resolve_endpoints; "
            "from shared.settings import get_settings; print(resolve_endpoints(get_settings()))")
    env = clean_env(other_home)
    callers = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [c.communicate(timeout=60) for c in callers]
    assert [c.returncode for c in callers] == [0, 0], results
    assert results[0][0] == results[1][0]
    redis_dir = str(other_home / "redis")
    twins = [p for p in Path("/proc").glob("[0-9]*") if _cwd(p) == redis_dir and pid_alive(
        int(p.name))]
    assert len(twins) == 1  # redis-server runs in its --dir


def test_up_status_down_through_the_cli(home: Path, tmp_path: Path) -> None:
    """`skillq up` starts the workers the vault's skills use; a run needing another class
    starts that one (a concurrency-1 class on a thread pool: no pool process); `--all`
    starts the rest; `status` lists them all; `down` stops everything."""
    env = clean_env(home)
    scripts, screen = tmp_path / "scripts", tmp_path / "screen"
    copy_vault_skills(scripts, "echo")
    copy_vault_skills(screen, "echo", "dom0-stamp")
    started = time.monotonic()
    up = skillq(["up", "--timeout", "60", "--vault", str(scripts)], env, tmp_path)
    print(f"`skillq up` in {time.monotonic() - started:.2f}s")
    assert up.returncode == 0, up.stderr
    assert pid_alive(read_pid(home / "run/worker-default.pid"))
    assert [w.name for w in WORKER_CLASSES if (home / f"run/worker-{w.name}.pid").exists()] \
        == ["default"], up.stdout  # a vault of script skills: one worker
    servers = server_pids(home)
    api_pid = read_pid(home / "run/api.pid")  # the local API, recorded in api.json
    recorded = json.loads((home / "api.json").read_text())
    assert pid_alive(api_pid) and recorded["pid"] == api_pid
    assert (home / "api.json").stat().st_mode & 0o777 == 0o600
    assert f"http://127.0.0.1:{recorded['port']}/" in up.stdout

    run = skillq(["run", "dom0-stamp", "--vault", str(screen), "--input", "label=first",
                  "--json"], env, tmp_path)
    assert run.returncode == 0, run.stderr  # its dom0 worker started on this first need
    assert json.loads(run.stdout)["outputs"]["label"] == "first"
    assert pid_alive(read_pid(home / "run/worker-dom0.pid"))
    assert "concurrency: 1 (thread)" in (home / "logs/worker-dom0.log").read_text()
    assert not (home / "run/worker-cmd0.pid").exists()

    everything = skillq(["up", "--all"], env, tmp_path)
    assert everything.returncode == 0, everything.stderr
    assert everything.stdout.count("already running") == 3  # default, dom0 and the API
    workers = {w.name: read_pid(home / f"run/worker-{w.name}.pid") for w in WORKER_CLASSES}
    assert all(pid_alive(pid) for pid in workers.values())

    endpoints = resolve_endpoints(settings_for(home), start=False)
    app = create_app(settings_for(home), broker_url=endpoints.broker_url,
                     result_backend=endpoints.result_backend)
    try:
        assert app.send_task("skillq.ping", queue="default").get(timeout=20) == "pong"
        host = socket.gethostname()
        dom0 = {app.send_task("skillq.whoami", queue="dom0").get(timeout=20) for _ in range(4)}
        assert dom0 == {f"dom0@{host}"}  # the dom0 worker only: no general worker lists it
        assert app.send_task("skillq.whoami", queue="control").get(timeout=20) == \
            f"default@{host}"
    finally:
        app.close()

    again = skillq(["up", "--all"], env, tmp_path)
    assert again.returncode == 0 and again.stdout.count("already running") == len(workers) + 1
    assert json.loads((home / "api.json").read_text()) == recorded  # the same API, reused

    status = skillq(["status"], env, tmp_path)
    assert status.returncode == 0
    for name, pid in {**{f"worker {k}": v for k, v in workers.items()}, **servers,
                      "api": api_pid}.items():
        assert re.search(rf"{name}\s+│\s+running\s+│\s+{pid}\b", status.stdout), status.stdout

    started = time.monotonic()
    down = skillq(["down"], env, tmp_path)
    print(f"`skillq down` in {time.monotonic() - started:.2f}s")
    assert down.returncode == 0, down.stderr
    assert not [pid for pid in [*workers.values(), *servers.values(), api_pid]
                if pid_alive(pid)]
    assert not list((home / "run").glob("*.pid"))
    assert not (home / "api.json").exists()  # a later `skillq run` takes the direct path


def test_a_run_on_a_stopped_stack_starts_the_workers_it_needs(other_home: Path,
                                                             tmp_path: Path) -> None:
    """`skillq run` with nothing running starts the servers and its own steps' worker
    class, not the vault's others (those start on first need), and waits for that worker
    itself to announce: again after `skillq down`, when the stopped one's row is fresh."""
    env = clean_env(other_home)
    vault = tmp_path / "vault"
    copy_vault_skills(vault, "echo", "dom0-stamp")
    for label in ("from nothing", "after down"):
        run = skillq(["run", "echo", "--vault", str(vault), "--input", f"text={label}",
                      "--json"], env, tmp_path)
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["outputs"]["text"] == label
        assert pid_alive(read_pid(other_home / "run/worker-default.pid"))
        assert not (other_home / "run/worker-dom0.pid").exists()  # the vault's, not the run's
        assert set(server_pids(other_home)) == {"redis", "postgres"}
        down = skillq(["down"], env, tmp_path)
        assert down.returncode == 0, down.stderr


def copy_vault_skills(vault: Path, *names: str) -> None:
    for name in names:
        shutil.copytree(VAULTS / "pipes" / name, vault / name)


def clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in URL_VARS}
    return {**env, "SKILLQ_HOME": str(home)}


def skillq(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("skillq")
    argv = [str(script)] if script.exists() else [
        sys.executable, "-c", "from orchestrator.cli.app import main; main()"]
    return subprocess.run([*argv, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)


def _cwd(proc: Path) -> str | None:
    try:
        return os.readlink(proc / "cwd")
    except OSError:
        return None
