"""RabbitMQ for the tests: a vhost of their own on the machine's server, or a server of
their own when none answers. Never a skip: without a server and without rabbitmq-server
to start one, the tests fail naming the package (.ci/run installs it).

- ``rabbitmq(root)``: the server at SKILLQ_TEST_RABBITMQ_URL (default the machine's,
  ``amqp://guest:guest@127.0.0.1:5672//``) when it answers and ``rabbitmqctl`` may add
  vhosts on it (as root or the rabbitmq account on its machine); else ``own_server``.
- ``own_server(root)``: Debian's rabbitmq-server as a subprocess, all of it under
  ``root`` (node name, ports, data, logs, Erlang cookie, an empty plugin list; the
  machine's /etc/rabbitmq is not read), which the tests may kill and start again.

Each module works in a vhost of its own (``Broker.vhost``), deleted afterwards, so two
xdist workers (or two sessions on one machine) never share a queue. A vhost left by a
test process that was killed is deleted by the next one to look (its pid is in the name).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
from kombu import Connection

DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672//"
URL_VAR = "SKILLQ_TEST_RABBITMQ_URL"
DEBIAN_SCRIPTS = Path("/usr/lib/rabbitmq/bin")  # /usr/sbin's wrappers su to `rabbitmq`
START_TIMEOUT_S = 120.0  # a first start on a loaded 2-core machine took 18 s
STOP_TIMEOUT_S = 30.0
CTL_TIMEOUT_S = 60.0
VHOST_PREFIX = "skillq-test-"
INSTALL_HINT = ("apt-get install -y rabbitmq-server (.ci/run installs it), or point "
                f"{URL_VAR} at a RabbitMQ this machine's rabbitmqctl manages")


def script(name: str) -> str | None:
    """A RabbitMQ script that runs as whoever calls it: Debian's own under
    /usr/lib/rabbitmq/bin, else the one on PATH (other installs)."""
    direct = DEBIAN_SCRIPTS / name
    return str(direct) if direct.exists() else shutil.which(name)


def refusal(url: str, timeout_s: float = 3.0) -> str | None:
    """None when an AMQP client gets in at ``url``, else why not."""
    try:
        with Connection(url, connect_timeout=timeout_s) as conn:
            conn.connect()
    except Exception as exc:  # refused, timed out, wrong credentials, no such vhost
        return f"{type(exc).__name__}: {exc}"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class Broker:
    """A RabbitMQ server the tests may add vhosts on."""

    base_url: str  # amqp://user:password@host:port, no vhost
    ctl: list[str]  # the rabbitmqctl command line that manages it
    ctl_env: dict[str, str] | None = None

    def rabbitmqctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.ctl, *args], env=self.ctl_env, capture_output=True,
                              text=True, timeout=CTL_TIMEOUT_S, check=False)

    def url(self, vhost: str) -> str:
        return f"{self.base_url}/{quote(vhost, safe='')}"

    def add_vhost(self, label: str) -> str:
        """A new vhost the URL's user may use fully; its name."""
        name = f"{VHOST_PREFIX}{os.getpid()}-{label}-{secrets.token_hex(3)}"
        user = urlsplit(self.base_url).username or "guest"
        for args in (("add_vhost", name), ("set_permissions", "-p", name, user, ".*", ".*",
                                           ".*")):
            done = self.rabbitmqctl(*args)
            if done.returncode:
                raise RuntimeError(f"rabbitmqctl {' '.join(args)}: exit {done.returncode}: "
                                   f"{done.stderr.strip() or done.stdout.strip()}")
        return name

    def delete_vhost(self, name: str) -> None:
        self.rabbitmqctl("delete_vhost", name)

    @contextlib.contextmanager
    def vhost(self, label: str) -> Iterator[str]:
        """The URL of a vhost of the caller's own, deleted (queues and all) afterwards."""
        name = self.add_vhost(label)
        try:
            yield self.url(name)
        finally:
            self.delete_vhost(name)

    def forget_dead_vhosts(self) -> list[str]:
        """Delete the vhosts of test processes that are gone (killed before cleaning up)."""
        done = self.rabbitmqctl("list_vhosts", "--quiet", "--no-table-headers")
        gone = []
        for name in done.stdout.split():
            found = re.fullmatch(rf"{re.escape(VHOST_PREFIX)}(\d+)-.*", name)
            if found and not Path(f"/proc/{found.group(1)}").exists():
                self.delete_vhost(name)
                gone.append(name)
        return gone


@dataclass
class OwnServer(Broker):
    """rabbitmq-server as our subprocess, everything under ``root``."""

    root: Path = Path()
    port: int = 0
    node: str = ""
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def start(self) -> None:
        """Start it (again: same node, port and data) and return once it lets a client in."""
        exe = script("rabbitmq-server")
        if exe is None:
            pytest.fail(f"no RabbitMQ answers and rabbitmq-server is not installed: "
                        f"{INSTALL_HINT}")
        with self.log.open("ab") as fh:
            self.proc = subprocess.Popen([exe], env=self.env, cwd=self.root,
                                         stdin=subprocess.DEVNULL, stdout=fh,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while (why := refusal(self.url("/"), timeout_s=2.0)) is not None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                state = (f"exited ({self.proc.returncode})" if self.proc.poll() is not None
                         else f"did not answer within {START_TIMEOUT_S:g}s ({why})")
                self.kill()
                raise RuntimeError(f"rabbitmq-server {state}; {self.log}:\n{tail(self.log)}")
            time.sleep(0.2)

    def kill(self) -> None:
        """SIGKILL the server's whole process group (a crash)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=STOP_TIMEOUT_S)
        self.proc = None

    def stop(self) -> None:
        """A clean shutdown (its script passes SIGTERM on), else a kill."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        self.kill()  # and whatever is left of its group


def _own_env(root: Path, node: str, port: int, dist_port: int) -> dict[str, str]:
    (root / "rabbitmq.conf").write_text(f"listeners.tcp.1 = 127.0.0.1:{port}\n")
    (root / "enabled_plugins").write_text("[].\n")
    (root / "rabbitmq-env.conf").write_text("")  # not /etc/rabbitmq/rabbitmq-env.conf
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
    env.update(
        HOME=str(root),  # its Erlang cookie, which rabbitmqctl reads too
        RABBITMQ_CONF_ENV_FILE=str(root / "rabbitmq-env.conf"),
        RABBITMQ_CONFIG_FILE=str(root / "rabbitmq.conf"),
        RABBITMQ_ADVANCED_CONFIG_FILE=str(root / "advanced.config"),  # none
        RABBITMQ_ENABLED_PLUGINS_FILE=str(root / "enabled_plugins"),
        RABBITMQ_NODENAME=node, RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
        RABBITMQ_NODE_PORT=str(port), RABBITMQ_DIST_PORT=str(dist_port),
        RABBITMQ_MNESIA_BASE=str(root / "mnesia"), RABBITMQ_LOG_BASE=str(root / "logs"),
        RABBITMQ_PID_FILE=str(root / "rabbitmq.pid"), ERL_EPMD_ADDRESS="127.0.0.1")
    return env


@contextlib.contextmanager
def own_server(root: Path) -> Iterator[OwnServer]:
    """A RabbitMQ of the caller's own under ``root`` (started; stopped afterwards)."""
    root.mkdir(parents=True, exist_ok=True)
    node = f"skillq-test-{os.getpid()}-{secrets.token_hex(3)}@localhost"
    port = free_port()
    env = _own_env(root, node, port, free_port())
    ctl = script("rabbitmqctl")
    server = OwnServer(base_url=f"amqp://guest:guest@127.0.0.1:{port}",
                       ctl=[ctl or "rabbitmqctl", "-n", node], ctl_env=env, root=root,
                       port=port, node=node, env=env)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def rabbitmq(root: Path, label: str) -> Iterator[tuple[Broker, str]]:
    """A server and the URL of a vhost of the caller's own on it: the machine's server
    when it answers and this machine's rabbitmqctl adds the vhost there, else a server
    of our own under ``root`` (its default vhost: nobody else uses it)."""
    url = os.environ.get(URL_VAR, DEFAULT_URL)
    why, ctl = refusal(url), shutil.which("rabbitmqctl")
    if why is None and ctl is not None:
        parts = urlsplit(url)
        machine = Broker(base_url=f"{parts.scheme}://{parts.netloc}", ctl=[ctl])
        try:
            machine.forget_dead_vhosts()
            name = machine.add_vhost(label)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            why = f"rabbitmqctl cannot add a vhost there ({exc})"
        else:
            try:
                why = refusal(machine.url(name))  # the server rabbitmqctl reached is url's
                if why is None:
                    yield machine, machine.url(name)
                    return
                why = f"rabbitmqctl manages another server ({why})"
            finally:
                machine.delete_vhost(name)
    elif why is None:
        why = "rabbitmqctl is not installed"
    else:
        why = f"nothing lets a client in at {url} ({why})"
    print(f"starting a RabbitMQ of the tests' own: {why}")
    with own_server(root) as own:
        yield own, own.url("/")
