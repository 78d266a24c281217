"""The launcher inside a sandbox: started once per worker process, it starts each step's
command on request, inside the sandbox's namespaces, so a step pays for a fork and an
exec rather than for building a sandbox (bubblewrap is slow to set one up).

Run as ``python -I -S -c <this file's text>``: the standard library only, nothing of the
worker. argv[1] is the fd of a SOCK_SEQPACKET socket to the worker process; each message is one JSON
object, a spawn request carries the command's stdin, stdout and stderr as SCM_RIGHTS. A
spawn is answered with the pid (or why it could not start), then the exit; the worker
reads both after the command ran, so a step pays for no round trip before it starts.
It is PID 1 of the sandbox's PID namespace, so when a command exits, ``kill(-1)`` ends
everything else that step started, and anything orphaned is re-parented here.
"""

import contextlib
import ctypes
import json
import os
import resource
import select
import shutil
import signal
import socket
import sys
from typing import Any

PR_SET_DUMPABLE = 4
MAX_FDS = 3
CONTROL_FD = int(sys.argv[1])  # the socket to the worker process
LIMITS = json.loads(sys.argv[2])  # {"RLIMIT_NOFILE": [soft, hard], ...}: every step's
# What /tmp and /dev/shm hold at the start is bubblewrap's doing: mount points (the
# scratch folders, binds, the X11 socket) and the folders leading to them. Never
# emptied: what lies beneath a bind is the host's.
TMP_ROOTS = ("/tmp", "/dev/shm")  # noqa: S108 - the sandbox's own tmpfs


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.send(json.dumps(message).encode())


def _receive(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    fds = []
    data, ancdata, _flags, _addr = sock.recvmsg(1 << 20, socket.CMSG_LEN(MAX_FDS * 4),
                                                socket.MSG_CMSG_CLOEXEC)
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += list(memoryview(payload).cast("i"))
    return (json.loads(data) if data else None), fds


def _spawn(request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
    # posix_spawn (a vfork) is cheaper than a fork of this interpreter; the limits are
    # this process's own hard ones, inherited, so a step cannot raise them.
    actions = [(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(fds)]
    try:
        os.chdir(request["cwd"])
        program = request["argv"][0]
        if "/" not in program:  # found on the step's PATH (posix_spawnp would use ours)
            program = shutil.which(program, path=request["env"].get("PATH", "")) or program
        pid = os.posix_spawn(program, request["argv"], request["env"],
                              file_actions=actions, setsid=True,
                              setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD))
    except OSError as exc:
        return {"spawn_error": f"{type(exc).__name__}: {exc}"}
    finally:
        for fd in fds:
            os.close(fd)
        os.chdir("/")
    return {"pid": pid}


def _worn_out() -> bool:
    """Past half its own CPU limit (inherited, so it applies here too): the worker starts
    a new launcher for the next command. Half is left, far more than starting one takes."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_CPU)
    used = resource.getrusage(resource.RUSAGE_SELF)
    return soft != resource.RLIM_INFINITY and used.ru_utime + used.ru_stime > soft / 2


def _end_everything() -> int:
    """Kill every process of the namespace but this one, reap them, empty /tmp."""
    killed = 0
    if os.getpid() == 1:
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
    while True:
        try:
            os.waitpid(-1, 0)
            killed += 1
        except ChildProcessError:
            break
    for root in TMP_ROOTS:
        for entry in _entries(root):
            if entry.path in BUILT_IN:
                continue
            with contextlib.suppress(OSError):
                if entry.stat(follow_symlinks=False).st_dev != os.stat(root).st_dev:  # noqa: PTH116
                    continue  # a mount: not the step's to remove (steps cannot mount)
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)  # noqa: PTH108
    return killed


def _entries(root: str) -> list[os.DirEntry[str]]:
    try:
        return list(os.scandir(root))
    except OSError:
        return []


BUILT_IN = {entry.path for root in TMP_ROOTS for entry in _entries(root)}


def main() -> None:
    # Not dumpable: a step (same uid) can neither read this process's memory, where
    # earlier requests' environments were, nor trace it.
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    sock = socket.socket(fileno=CONTROL_FD)
    os.set_inheritable(CONTROL_FD, False)
    for name, (soft, hard) in LIMITS.items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    child: int | None = None
    _send(sock, {"ready": os.getpid()})
    while True:
        ready, _, _ = select.select([sock.fileno(), wake_r], [], [])
        if wake_r in ready:
            os.read(wake_r, 4096)
            while child is not None:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                if pid == child:
                    child = None
                    code = os.waitstatus_to_exitcode(status)
                    _end_everything()
                    _send(sock, {"exit": code, "worn": _worn_out()})
        if sock.fileno() in ready:
            request, fds = _receive(sock)
            if request is None:  # the worker process is gone
                _end_everything()
                return
            op = request["op"]
            if op == "spawn":
                reply = _spawn(request, fds)
                child = reply.get("pid")
                _send(sock, reply | {"worn": _worn_out()})
            elif op == "signal" and child is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child, request["signal"])
            elif op == "sweep":
                if child is not None:  # still running: the step was abandoned
                    child = None
                _send(sock, {"swept": _end_everything()})


main()
