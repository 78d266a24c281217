"""A daemon's worker in a Linux network namespace of its own, for tests that need a
machine other than the host: its loopback has nothing listening, so whatever it reaches
(the broker, the database, a server the test started) it reaches over a veth link, the
way a second machine reaches the host.

``namespaced_daemon(stack, home, name, queues=...)`` starts ``python -m workers.main``
inside the namespace and yields once the worker announced itself in the database. On the
host's end of the link (``NamespacedDaemon.host_ip``) TCP forwarders relay to the ports
the daemon is given: the stack's broker, result backend and database, and any loopback
URL in ``forward_urls`` (the embedded servers and the tests' own listen on 127.0.0.1
only). Every environment value naming one of those loopback ports is rewritten to the
host end; ``NamespacedDaemon.reach(url)`` does the same for a URL handed over later.

Needs root (CAP_NET_ADMIN) and iproute2, which scripts/debian-packages installs; without
them the test fails saying so (``UNAVAILABLE``), never skipped: what it tests (a daemon
on a machine of its own) would otherwise go unchecked. Names and addresses derive from
the pid and a counter, so two such daemons in one process (or two xdist workers) do not
collide: interfaces ``sqh<pid>x<n>`` / ``sqn<pid>x<n>`` (<= 15 characters, the kernel's
limit), a /30 of 10.231.0.0/16 not already on the host (.1 the host end, .2 inside).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

import pytest
from sqlalchemy.orm import Session

from shared.db.daemon_models import DaemonWorker

UNAVAILABLE = ("this machine does not allow network namespaces: the test needs root "
               "(CAP_NET_ADMIN) and iproute2 (`bash scripts/debian-packages` installs it)")
STACK_URLS = ("SKILLQ_BROKER_URL", "SKILLQ_RESULT_BACKEND", "SKILLQ_DATABASE_URL")
LOOPBACK = ("127.0.0.1", "localhost")
ANNOUNCE_TIMEOUT_S = 60.0
SUBNET = "10.231"  # private, and unlike 10.0/8's usual suspects unused by CI networks

_serial = itertools.count()  # this process's namespaces: part of their names


class StackLike(Protocol):
    """What a daemon needs of the tests' stack (tests/integration/conftest.py's Stack)."""

    env: dict[str, str]

    def db(self) -> contextlib.AbstractContextManager[Session]: ...


class Forwarder:
    """TCP forwarding from an address on the host's end of a veth link to the same port on
    an upstream host (the embedded Redis and PostgreSQL listen on 127.0.0.1 only)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.servers: list[asyncio.Server] = []
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def forward(self, host: str, port: int, upstream: str = "127.0.0.1") -> None:
        async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                with contextlib.suppress(OSError):
                    while data := await reader.read(65536):
                        writer.write(data)
                        await writer.drain()
            finally:
                writer.close()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                up_reader, up_writer = await asyncio.open_connection(upstream, port)
            except OSError:  # nothing there (a server the test stopped): as if refused
                writer.close()
                return
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

        future = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(handle, host, port), self.loop)
        self.servers.append(future.result(timeout=10))

    async def _shutdown(self) -> None:
        for server in self.servers:
            server.close()
        # Connections still open (the daemon was killed first, so seldom any).
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        if not self.thread.is_alive():
            self.loop.close()


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=False)


def _free_subnet(start: int) -> tuple[str, str]:
    """The host and namespace addresses of a /30 in SUBNET no interface on the host has
    (another namespace's host end), searched from slot ``start``; slots skip x.0-x.19,
    as the fixture this came from used x = pid % 200 + 20."""
    shown = _ip("-4", "-o", "addr", "show").stdout
    used = {(int(a), int(b) // 4) for a, b in re.findall(
        rf"inet {re.escape(SUBNET)}\.(\d+)\.(\d+)/", shown)}
    slots = 236 * 64
    for i in range(slots):
        third, block = divmod((start + i) % slots, 64)
        if (third + 20, block) not in used:
            base = f"{SUBNET}.{third + 20}"
            return f"{base}.{4 * block + 1}", f"{base}.{4 * block + 2}"
    raise AssertionError(f"no free /30 left in {SUBNET}.0.0/16")


def _rehost(url: str, host: str) -> str:
    """``url`` with ``host`` in place of its host name (user, password and port kept)."""
    parts = urlsplit(url)
    userinfo, at, _ = parts.netloc.rpartition("@")
    assert parts.port is not None, f"{url}: no port to forward"
    return urlunsplit(parts._replace(netloc=f"{userinfo}{at}{host}:{parts.port}"))


def _loopback_port(url: str) -> int:
    parts = urlsplit(url)
    if parts.hostname not in LOOPBACK or parts.port is None:
        raise ValueError(f"{url}: not a loopback URL with a port (127.0.0.1:PORT, "
                         "localhost:PORT)")
    return parts.port


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class NamespacedDaemon:
    name: str
    home: Path  # its SKILLQ_HOME and working directory; its output is in worker.log
    proc: subprocess.Popen[bytes]
    host_ip: str  # the host's end of the link, where the forwarded ports listen
    ns: str
    ns_ip: str
    node: str  # the worker's Celery node name, ``<worker_name>@<name>``
    forwarder: Forwarder = field(repr=False)
    forwarded: set[int] = field(default_factory=set)

    @property
    def log(self) -> Path:
        return self.home / "worker.log"

    def forward(self, port: int, upstream: str = "127.0.0.1") -> None:
        if port not in self.forwarded:
            self.forwarder.forward(self.host_ip, port, upstream)
            self.forwarded.add(port)

    def reach(self, url: str) -> str:
        """``url`` (``http://127.0.0.1:PORT/...`` or ``localhost``) as the daemon reaches
        it: on the host's end of the link, that port forwarded there (now, if it was not
        among ``forward_urls``)."""
        self.forward(_loopback_port(url))
        return _rehost(url, self.host_ip)

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, 9)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)


def _rewrite(value: str, ports: set[int], host_ip: str) -> str:
    """Every ``127.0.0.1:PORT`` / ``localhost:PORT`` in ``value`` for a forwarded PORT,
    at the host's end of the link instead (a URL, or a bare host:port)."""
    if not ports:
        return value
    pattern = (r"(?<![\w.-])(?:127\.0\.0\.1|localhost):("
               + "|".join(str(p) for p in sorted(ports)) + r")(?!\d)")
    return re.sub(pattern, lambda m: f"{host_ip}:{m.group(1)}", value)


def _announced(stack: StackLike, node: str) -> bool:
    with stack.db() as session:
        return session.get(DaemonWorker, node) is not None


def _wait_announced(stack: StackLike, daemon: NamespacedDaemon) -> None:
    deadline = time.monotonic() + ANNOUNCE_TIMEOUT_S
    while not _announced(stack, daemon.node):
        if daemon.proc.poll() is not None:  # no use waiting out the timeout
            raise AssertionError(
                f"daemon {daemon.name} exited ({daemon.proc.returncode}) before announcing "
                f"itself; {daemon.log}:\n{_tail(daemon.log)}")
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {ANNOUNCE_TIMEOUT_S:g}s waiting for daemon {daemon.name} "
                f"to announce itself through the veth link (log: {daemon.log})")
        time.sleep(0.05)


@contextlib.contextmanager
def namespaced_daemon(stack: StackLike, home: Path, name: str, *, queues: str,
                      concurrency: int = 1, env: Mapping[str, str] | None = None,
                      forward_urls: Sequence[str] = (),
                      worker_name: str = "d") -> Iterator[NamespacedDaemon]:
    """Daemon ``name``'s worker (``--queues queues --concurrency concurrency --name
    worker_name``) in a network namespace of its own, with ``home`` as its SKILLQ_HOME
    (made if missing) and ``stack.env`` plus ``env`` as its environment. The stack's
    broker, result backend and database and the ports of ``forward_urls`` (loopback URLs)
    are forwarded to it; env values naming those loopback ports are rewritten to reach
    them. Yields once the worker announced itself; stops it and removes the link, the
    namespace and the forwarders afterwards."""
    ports = {_loopback_port(url) for url in forward_urls}  # ValueError before any setup
    pid, serial = os.getpid(), next(_serial)
    ns, host_end, ns_end = f"sq{pid}x{serial}", f"sqh{pid}x{serial}", f"sqn{pid}x{serial}"
    if shutil.which("ip") is None:
        pytest.fail(UNAVAILABLE)
    # Same names: left by a killed process that had this pid (it is not running now).
    _ip("link", "del", host_end)
    _ip("netns", "del", ns)
    if _ip("netns", "add", ns).returncode != 0:
        pytest.fail(UNAVAILABLE)
    forwarder = Forwarder()
    daemon = None
    try:
        host_ip, ns_ip = _free_subnet((pid % 200) * 64 + serial)
        for args in (("link", "add", host_end, "type", "veth", "peer", "name", ns_end),
                     ("link", "set", ns_end, "netns", ns),
                     ("addr", "add", f"{host_ip}/30", "dev", host_end),
                     ("link", "set", host_end, "up"),
                     ("netns", "exec", ns, "ip", "addr", "add", f"{ns_ip}/30", "dev", ns_end),
                     ("netns", "exec", ns, "ip", "link", "set", ns_end, "up"),
                     ("netns", "exec", ns, "ip", "link", "set", "lo", "up")):
            done = _ip(*args)
            assert done.returncode == 0, (args, done.stderr)
        full = {**stack.env, **(env or {})}
        upstreams = dict.fromkeys(ports, "127.0.0.1")
        for key in STACK_URLS:  # wherever they are (a RabbitMQ may not be on loopback)
            if key in full:
                url = urlsplit(full[key])
                assert url.port is not None and url.hostname is not None, (key, full[key])
                upstreams[url.port] = url.hostname
                full[key] = _rehost(full[key], host_ip)
        for port, upstream in sorted(upstreams.items()):  # listening before it connects
            forwarder.forward(host_ip, port, upstream)
        home.mkdir(parents=True, exist_ok=True)
        full = {k: _rewrite(v, set(upstreams), host_ip) for k, v in full.items()}
        full["SKILLQ_HOME"] = str(home)
        with (home / "worker.log").open("ab") as log:
            proc = subprocess.Popen(
                ["ip", "netns", "exec", ns, sys.executable, "-m", "workers.main",
                 "--queues", queues, "--concurrency", str(concurrency), "--name", worker_name,
                 "--daemon", name],
                env=full, cwd=home, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True)
        daemon = NamespacedDaemon(name=name, home=home, proc=proc, host_ip=host_ip, ns=ns,
                                  ns_ip=ns_ip, node=f"{worker_name}@{name}",
                                  forwarder=forwarder, forwarded=set(upstreams))
        _wait_announced(stack, daemon)
        yield daemon
    finally:
        if daemon is not None:
            daemon.stop()
        forwarder.close()
        _ip("link", "del", host_end)
        _ip("netns", "del", ns)
