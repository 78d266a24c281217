"""A process's sandbox: its launchers (one per network setting and working directory),
its scratch root, its cgroup, the account steps run as, and the start of a command."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from shared.errors import SandboxError
from shared.settings import Settings
from workers.sandbox import cgroups
from workers.sandbox.account import step_account
from workers.sandbox.limits import Breaches, StepLimits
from workers.sandbox.zygote import Zygote

log = logging.getLogger("skillq.sandbox")
SCRATCH_ROOT = "skillq-scratch"
X11_SOCKETS = "/tmp/.X11-unix"  # noqa: S108 - where X servers put them
KEPT_LAUNCHERS = 3  # per process: network on and off, and a run's working directory
# bubblewrap binds / with every mount under it, then remounts each read-only: a mount
# that comes or goes in between (`ip netns add` or `del`, a container starting) fails
# that remount and the start. Such a start is tried again, a few times.
MOUNT_RACE = "Unable to apply mount flags"
START_TRIES = 5


def scratch_root() -> Path:
    """Where steps' scratch folders live. As root, /tmp itself whatever TMPDIR says: the
    step account must be able to walk down to its folder, and TMPDIR may point into a
    folder of the worker's that it cannot enter (a SKILLQ_HOME, say)."""
    if os.geteuid() == 0:
        return Path("/tmp") / SCRATCH_ROOT  # noqa: S108 - made 0711, its folders 0700
    return Path(tempfile.gettempdir()) / f"{SCRATCH_ROOT}-{os.getuid()}"


def slot_dir() -> Path:
    """This process's scratch folders: the only part of the host's /tmp its steps see."""
    return scratch_root() / f"p{os.getpid()}"


@functools.cache
def _bwrap() -> str | None:
    return shutil.which("bwrap")


def probe(settings: Settings) -> str | None:
    """Why bubblewrap cannot sandbox a step here, or None when it can."""
    exe = _bwrap()
    if exe is None:
        return "bwrap is not installed"
    account = step_account(settings.step_account)
    options, command = ["--unshare-user"], ["true"]
    if account:
        options, command = [], ["setpriv", f"--reuid={account[0]}", f"--regid={account[1]}",
                                "--clear-groups", "--", "true"]
    for _ in range(START_TRIES):
        try:
            done = subprocess.run([exe, "--ro-bind", "/", "/", "--proc", "/proc", "--dev",
                                   "/dev", "--unshare-pid", "--as-pid-1", *options, "--",
                                   *command], capture_output=True, timeout=20, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bwrap failed: {exc}"
        if not done.returncode:
            return None
        said = done.stderr.decode(errors="replace").strip()
        if MOUNT_RACE not in said:
            break
    return f"bwrap failed: {said[:300]}"


def _way_down(path: Path) -> list[str]:
    """Mount points made where a tmpfs hid them: bubblewrap would make them 0700."""
    return [a for parent in reversed(path.parents[:-1]) for a in
            ("--perms", "0755", "--dir", str(parent))]


def _contains(outer: Path, inner: Path) -> bool:
    return inner == outer or outer in inner.parents


@dataclass
class Started:
    """A command started in the sandbox: our ends of its pipes, and its launcher."""
    stdin: BinaryIO
    stdout: BinaryIO
    stderr: BinaryIO
    launcher: Zygote
    before: tuple[int, int]

    def exited(self) -> bool:
        return self.launcher.exited()

    def wait(self) -> int:
        return self.launcher.wait()

    def signal_group(self, sig: signal.Signals) -> None:
        self.launcher.signal_group(sig)


class Sandbox:
    def __init__(self, settings: Settings, *, namespaces: bool) -> None:
        self.settings, self.namespaces = settings, namespaces
        self.account = step_account(settings.step_account)
        self.cgroup: cgroups.Cgroup | None = None
        if cgroups.available():
            cgroups.remove_stale()
            with contextlib.suppress(OSError):
                self.cgroup = cgroups.Cgroup(f"p{os.getpid()}")
        self.lock = threading.Lock()  # a launcher runs one command at a time
        self.launchers: dict[tuple[bool, str | None, str | None, tuple[str, ...], str],
                             Zygote] = {}
        self.slot = slot_dir()
        self.slot.parent.mkdir(mode=0o711, exist_ok=True)
        self.slot.parent.chmod(0o711)  # the account may pass through, never list
        self.slot.mkdir(mode=0o711, exist_ok=True)

    def describe(self) -> str:
        who = "the worker's user" if self.account is None else f"uid {self.account[0]}"
        how = "bubblewrap" if self.namespaces else "no namespaces (install bubblewrap)"
        limits = "cgroup" if self.cgroup else "rlimits only"
        return f"{how}, {who}, {limits}"

    # -- the filesystem a step sees ----------------------------------------------------

    def _kept(self) -> list[Path]:
        """What a step needs of the worker's installation: its Python (dom0/cmd0 hosts run
        it; `python3` on PATH may be it) and skillq's own code."""
        found = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(),
                 Path(sys.executable).resolve().parent, Path(__file__).resolve().parents[2]}
        return sorted(found)

    def _binds(self) -> list[Path]:
        found = []
        for item in self.settings.step_binds.split(","):
            if item.strip():
                path = Path(item.strip()).expanduser()
                if not path.is_absolute() or not path.is_dir():
                    raise SandboxError(f"SKILLQ_STEP_BINDS: {item.strip()!r} is not an "
                                       "absolute path to a folder; fix or remove it")
                found.append(path.resolve())
        return found

    def _layout(self, workdir: str | None, vault: str | None,
                folders: tuple[str, ...] = ()) -> list[str]:
        """Mounts over the read-only root, in order (a later one wins inside an earlier):
        the worker's home under an empty tmpfs with the installation put back; the run's
        working directory and the folders the step was given read-only; SKILLQ_STEP_BINDS
        read-write; then SKILLQ_HOME and the vaults under empty tmpfs, wherever they lie."""
        kept, argv = self._kept(), []
        homes = {Path.home().resolve()} if Path.home().resolve() != Path("/") else set()
        for home in homes:
            argv += ["--tmpfs", str(home)]
            for k in kept:
                if _contains(home, k) and k != home:
                    # The way down: bubblewrap would make these folders 0700 (root's).
                    for step in reversed(k.relative_to(home).parents[:-1]):
                        argv += ["--perms", "0755", "--dir", str(home / step)]
                    argv += ["--ro-bind", str(k), str(k)]
        for k in kept:  # a checkout under /tmp (a CI clone): the sandbox's /tmp is its own
            if _contains(Path("/tmp"), k) and not any(_contains(h, k) for h in homes):  # noqa: S108
                argv += [*_way_down(k), "--ro-bind", str(k), str(k)]
        for shown in (workdir, *folders) if workdir else folders:
            argv += [*_way_down(Path(shown)), "--ro-bind", shown, shown]
        for path in self._binds():
            argv += [*_way_down(path), "--bind", str(path), str(path)]
        hidden = [self.settings.home.expanduser(), self.settings.vault]
        hidden += [Path(vault)] if vault else []
        for path in hidden:
            with contextlib.suppress(OSError):
                path = path.resolve()
                if not path.is_dir() or path == Path("/"):
                    continue
                if any(_contains(path, k) for k in kept):
                    log.warning("cannot hide %s from steps: skillq's installation is inside "
                                "it; move the vault or SKILLQ_HOME out of it", path)
                    continue
                argv += ["--tmpfs", str(path)]
        return argv

    def _bwrap_argv(self, network: bool, workdir: str | None, vault: str | None,
                    folders: tuple[str, ...] = ()) -> list[str]:
        exe = _bwrap()
        assert exe is not None
        # As root, bubblewrap mounts with root's rights and setpriv then drops to the
        # account with no capabilities left; otherwise a user namespace does the mounting.
        userns = ["--unshare-user"] if self.account is None else []
        argv = [exe, "--die-with-parent", "--unshare-pid", "--as-pid-1", *userns,
                "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                "--ro-bind", "/", "/", "--dev", "/dev",
                "--perms", "1777", "--tmpfs", "/dev/shm",  # noqa: S108 - the sandbox's own
                "--proc", "/proc", "--perms", "1777", "--tmpfs", "/tmp"]  # noqa: S108
        if not network:
            argv.append("--unshare-net")
        argv += self._layout(workdir, vault, folders)
        argv += [*_way_down(self.slot.parent), "--perms", "0711", "--dir", str(self.slot.parent),
                 "--bind", str(self.slot), str(self.slot),
                 "--ro-bind-try", X11_SOCKETS, X11_SOCKETS, "--"]
        if self.account is not None:
            uid, gid = self.account
            argv += ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
                     "--inh-caps=-all", "--bounding-set=-all", "--"]
        return argv

    def _launcher(self, network: bool, workdir: str | None, vault: str | None,
                  folders: tuple[str, ...], rlimits: dict[str, tuple[int, int]]) -> Zygote:
        key = (network, workdir, vault, folders, json.dumps(rlimits, sort_keys=True))
        found = self.launchers.get(key)
        if found is not None and found.alive() and not found.worn:
            return found
        if found is not None:
            found.close()
        while len(self.launchers) >= KEPT_LAUNCHERS:
            self.launchers.pop(next(iter(self.launchers))).close()
        if self.cgroup is not None:  # room for this process while it starts bubblewrap
            self.cgroup.lift_limits()
        launcher = self._started(self._bwrap_argv(network, workdir, vault, folders), rlimits)
        if self.cgroup is not None:  # a step's memory flood kills the step, not this
            for pid in launcher.outer_pids():
                with contextlib.suppress(OSError):
                    Path(f"/proc/{pid}/oom_score_adj").write_text("-1000")
        self.launchers[key] = launcher
        return launcher

    def _started(self, argv: list[str], rlimits: dict[str, tuple[int, int]]) -> Zygote:
        for _ in range(START_TRIES - 1):
            try:
                return Zygote(argv, rlimits, self.cgroup)
            except SandboxError as exc:
                if MOUNT_RACE not in str(exc):
                    raise
                log.info("the host's mounts changed while bubblewrap started; again: %s", exc)
        return Zygote(argv, rlimits, self.cgroup)

    # -- starting a command ------------------------------------------------------------

    def prepare(self, scratch: Path) -> None:
        """Give the step's scratch folder to the account it runs as."""
        if self.account is None:
            return
        uid, gid = self.account
        for top, dirs, files in os.walk(scratch):  # os.walk: quicker than rglob
            for name in (*dirs, *files):
                with contextlib.suppress(OSError):
                    os.lchown(os.path.join(top, name), uid, gid)  # noqa: PTH118 - hot path
        with contextlib.suppress(OSError):
            os.lchown(scratch, uid, gid)

    def start(self, argv: list[str], cwd: Path, env: dict[str, str], limits: StepLimits,
              workdir: str | None, vault: str | None, folders: tuple[str, ...] = ()
              ) -> Started | subprocess.Popen[bytes]:
        """Start argv as a step; OSError (and ValueError) when it cannot start (from
        ``wait`` when the launcher could not start it: a missing program, say).
        ``vault``: the folder of skills the step's own skill came from (hidden from it);
        ``folders``: those it was given (directory inputs), shown read-only."""
        if not self.namespaces:
            return self._start_plain(argv, cwd, env, limits)
        # RLIMIT_NPROC would count the worker's own processes too: cgroups or nothing.
        rlimits = limits.rlimits(memory=self.cgroup is None, processes=False)
        launcher = self._launcher(limits.network, workdir, vault, folders, rlimits)
        if self.cgroup is not None:
            self.cgroup.set_limits(limits.memory_mb, limits.processes)
        before = self.cgroup.counters() if self.cgroup else (0, 0)
        stdin, stdout, stderr = launcher.spawn(argv, str(cwd), env)
        return Started(stdin, stdout, stderr, launcher, before)

    def _start_plain(self, argv: list[str], cwd: Path, env: dict[str, str],
                     limits: StepLimits) -> subprocess.Popen[bytes]:
        if not limits.network:
            raise ValueError("limits.network: false needs bubblewrap on this daemon "
                             "(apt-get install bubblewrap)")
        prefix = ["prlimit"] + [f"--{flag}={soft}:{hard}" for flag, (soft, hard) in (
            (_PRLIMIT_FLAGS[name], value) for name, value in
            limits.rlimits(memory=True, processes=True).items())] + ["--"]
        uid, gid = self.account or (None, None)
        return subprocess.Popen(prefix + argv, cwd=cwd, env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, close_fds=True, user=uid, group=gid,
                                extra_groups=[] if self.account else None)

    def breaches(self, started: object) -> Breaches:
        if isinstance(started, Started) and self.cgroup is not None:
            return cgroups.Cgroup.breaches(started.before, self.cgroup.counters())
        return Breaches()

    def end_attempt(self) -> None:
        """Whatever an attempt left in any launcher is ended."""
        for launcher in self.launchers.values():
            if launcher.running:
                launcher.sweep()

    def close(self) -> None:
        for launcher in self.launchers.values():
            launcher.close()
        self.launchers.clear()
        if self.cgroup is not None:
            self.cgroup.kill_all()
            self.cgroup.remove()


_PRLIMIT_FLAGS = {"RLIMIT_CPU": "cpu", "RLIMIT_FSIZE": "fsize", "RLIMIT_NOFILE": "nofile",
                  "RLIMIT_CORE": "core", "RLIMIT_AS": "as", "RLIMIT_NPROC": "nproc"}
