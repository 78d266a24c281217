"""One network namespace per simulated machine, as tests/integration/test_daemons.py's
``namespaced`` fixture makes them: a veth link to the host (10.232.y.(4i+1) on the host's
end, .(4i+2) inside, a /30 each, y from this process's id) and a TCP forwarder from the
host end's address to the servers' loopback ports (the embedded Redis and PostgreSQL
listen on 127.0.0.1 only). Namespaces and links are named after this process's id, so
nothing collides with the tests' (sq<tag>, 10.231.<tag>.0/30) or another run.

Each namespace's forwarder is a process of its own (this file run as a script:
``python netns.py HOST PORT [PORT ...]``), so forwarding three daemons' traffic is not
one Python thread in the client, and its CPU shows apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

SUBNET = "10.232"  # test_daemons.py uses 10.231


def ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=False)


def available() -> str | None:
    """None when network namespaces can be made here, else why not."""
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    return None


@dataclass
class Namespace:
    name: str
    host_end: str
    ns_end: str
    host_ip: str
    ns_ip: str
    made: list[str] = field(default_factory=list)  # what delete() has to undo
    forwarder: subprocess.Popen[bytes] | None = None

    def create(self) -> None:
        done = ip("netns", "add", self.name)
        if done.returncode != 0:
            raise SystemExit(f"ip netns add {self.name}: {done.stderr.strip()}")
        self.made.append("netns")
        steps = [("link", "add", self.host_end, "type", "veth", "peer", "name", self.ns_end),
                 ("link", "set", self.ns_end, "netns", self.name),
                 ("addr", "add", f"{self.host_ip}/30", "dev", self.host_end),
                 ("link", "set", self.host_end, "up"),
                 *(("netns", "exec", self.name, "ip", *a) for a in (
                     ("addr", "add", f"{self.ns_ip}/30", "dev", self.ns_end),
                     ("link", "set", self.ns_end, "up"), ("link", "set", "lo", "up")))]
        for args in steps:
            done = ip(*args)
            if done.returncode != 0:
                raise SystemExit(f"ip {' '.join(args)}: {done.stderr.strip()}")
            if args[:2] == ("link", "add"):
                self.made.append("link")

    def forward(self, ports: list[int], log: Path) -> None:
        with log.open("ab") as fh:
            self.forwarder = subprocess.Popen(
                [sys.executable, __file__, self.host_ip, *map(str, ports)],
                stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                start_new_session=True)
        deadline = time.monotonic() + 10
        for port in ports:
            while True:
                with contextlib.suppress(OSError), socket.create_connection(
                        (self.host_ip, port), timeout=0.5):
                    break
                if self.forwarder.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the forwarder on {self.host_ip}:{port} did not start "
                                     f"(log: {log})")
                time.sleep(0.05)

    def argv(self, argv: list[str]) -> list[str]:
        """``argv`` run inside this namespace (`ip netns exec` execs it: same pid)."""
        return ["ip", "netns", "exec", self.name, *argv]

    def delete(self) -> list[str]:
        """Undo create() and forward(); the errors, if any (processes inside go first)."""
        problems = []
        if self.forwarder is not None and self.forwarder.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.forwarder.pid, 9)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.forwarder.wait(timeout=5)
        if "link" in self.made:  # deleting one end deletes the pair
            done = ip("link", "del", self.host_end)
            if done.returncode != 0 and "Cannot find" not in done.stderr:
                problems.append(f"ip link del {self.host_end}: {done.stderr.strip()}")
        if "netns" in self.made:
            done = ip("netns", "del", self.name)
            if done.returncode != 0:
                problems.append(f"ip netns del {self.name}: {done.stderr.strip()}")
        self.made.clear()
        return problems


class Namespaces:
    """The namespaces of one run, numbered from 1; delete_all() removes every one."""

    def __init__(self) -> None:
        pid = os.getpid()
        self.tag = pid % 100000
        taken = ip("-o", "-4", "addr", "show").stdout
        self.y = pid % 200 + 20
        while f" {SUBNET}.{self.y}." in taken:  # another run's (or a stale) subnet
            self.y = self.y % 254 + 1
        self.all: list[Namespace] = []

    def add(self) -> Namespace:
        i = len(self.all) + 1
        ns = Namespace(f"sqbench-{self.tag}-{i}", f"sqbh{self.tag}x{i}", f"sqbn{self.tag}x{i}",
                       f"{SUBNET}.{self.y}.{4 * i + 1}", f"{SUBNET}.{self.y}.{4 * i + 2}")
        self.all.append(ns)
        ns.create()
        return ns

    def delete_all(self) -> list[str]:
        problems = [p for ns in reversed(self.all) for p in ns.delete()]
        self.all.clear()
        return problems


# -- the forwarder (this file as a script) ------------------------------------------------

async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.close()


async def _handle(port: int, reader: asyncio.StreamReader,
                  writer: asyncio.StreamWriter) -> None:
    try:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        writer.close()
        return
    await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


async def _serve(host: str, ports: list[int]) -> None:
    servers = [await asyncio.start_server(functools.partial(_handle, port), host, port)
               for port in ports]
    await asyncio.gather(*(s.serve_forever() for s in servers))


if __name__ == "__main__":
    asyncio.run(_serve(sys.argv[1], [int(p) for p in sys.argv[2:]]))
