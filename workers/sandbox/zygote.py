"""The worker's side of a sandbox's launcher (zygote_main.py): start it in bubblewrap,
ask it to start a command with pipes of ours, learn when the command exits, signal or
end what it started. One launcher per worker process and network setting."""

from __future__ import annotations

import array
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, BinaryIO

from shared.errors import SandboxError

SOURCE = (Path(__file__).parent / "zygote_main.py").read_text  # read when first started
START_TIMEOUT_S = 20.0
REPLY_TIMEOUT_S = 10.0


class Zygote:
    def __init__(self, bwrap_argv: list[str], rlimits: dict[str, tuple[int, int]],
                 cgroup: Any | None) -> None:
        """``bwrap_argv``: bubblewrap and its options, up to the command (after ``--``);
        ``rlimits``: the launcher's own, so every command it starts has them."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - bubblewrap's complaints, for the error
        argv = [*bwrap_argv, sys.executable, "-I", "-S", "-c", SOURCE(),
                str(theirs.fileno()), json.dumps(rlimits)]
        with cgroup.joined() if cgroup is not None else contextlib.nullcontext():
            try:
                # Its environment is empty: a step may read its launcher's /proc entry.
                self.proc = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log,
                    pass_fds=(theirs.fileno(),), env={"PATH": os.defpath},
                    start_new_session=True)
            except OSError as exc:
                raise SandboxError(f"cannot start bubblewrap: {exc}") from None
            finally:
                theirs.close()
        reply = self._reply(START_TIMEOUT_S)
        if reply is None or "ready" not in reply:
            complaint = self.complaint()
            self.close()
            raise SandboxError(f"the sandbox did not start: {complaint}")
        self.exit_code: int | None = None
        self.spawn_error: str | None = None
        self.running = False
        self.worn = False  # past half its CPU limit: the next command gets a new launcher

    def complaint(self) -> str:
        if self.log.closed:
            return "the sandbox was closed"
        self.log.seek(0)
        text = self.log.read()[-2000:].decode("utf-8", "replace").strip()
        return text or "bubblewrap said nothing"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def outer_pids(self) -> list[int]:
        """bubblewrap's process and the launcher, as this PID namespace sees them."""
        found = [self.proc.pid]
        with contextlib.suppress(OSError, ValueError):
            text = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
            found += [int(p) for p in text.split()]
        return found

    def _reply(self, timeout_s: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.sock], [], [], min(left, 0.5))
            if ready:
                try:
                    data = self.sock.recv(1 << 16)
                except OSError:
                    return None
                return json.loads(data) if data else None
            if not self.alive():
                return None

    def spawn(self, argv: list[str], cwd: str, env: dict[str, str]
              ) -> tuple[BinaryIO, BinaryIO, BinaryIO]:
        """Ask for argv to start; our ends of its stdin, stdout, stderr. OSError if the
        request cannot be sent. Whether it started is known after: ``wait`` raises
        OSError with the launcher's reason when it did not (a missing program, say)."""
        pipes = [os.pipe() for _ in range(3)]
        theirs = [pipes[0][0], pipes[1][1], pipes[2][1]]
        request = json.dumps({"op": "spawn", "argv": argv, "cwd": cwd, "env": env}).encode()
        try:
            self.sock.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                           array.array("i", theirs).tobytes())])
        except OSError:
            for r, w in pipes:
                os.close(r)
                os.close(w)
            raise
        for fd in theirs:
            os.close(fd)
        self.exit_code, self.spawn_error, self.running = None, None, True
        return (os.fdopen(pipes[0][1], "wb", buffering=0),
                os.fdopen(pipes[1][0], "rb", buffering=0),
                os.fdopen(pipes[2][0], "rb", buffering=0))

    def exited(self) -> bool:
        """Whether the command is over: it exited (the launcher has then ended all it
        started), it never started, or the launcher is gone."""
        while self.running:
            ready, _, _ = select.select([self.sock], [], [], 0)
            if not ready:
                return False
            try:
                data = self.sock.recv(1 << 16)
            except OSError:
                data = b""
            message = json.loads(data) if data else {"exit": -signal.SIGKILL}  # launcher gone
            self.worn = self.worn or bool(message.get("worn"))
            if "spawn_error" in message:
                self.spawn_error, self.running = str(message["spawn_error"]), False
            elif "exit" in message:
                self.exit_code, self.running = int(message["exit"]), False
        return True

    def wait(self) -> int:
        """The command's exit code; OSError when it never started."""
        while not self.exited():
            select.select([self.sock], [], [], 0.5)
        if self.spawn_error is not None:
            raise OSError(self.spawn_error)
        return self.exit_code if self.exit_code is not None else -signal.SIGKILL

    def signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(OSError):
            self.sock.send(json.dumps({"op": "signal", "signal": int(sig)}).encode())

    def sweep(self) -> None:
        """End whatever the last command left (after an abandoned step, say)."""
        if not self.alive():
            return
        with contextlib.suppress(OSError):
            self.sock.send(b'{"op": "sweep"}')
            while (reply := self._reply(REPLY_TIMEOUT_S)) is not None and "swept" not in reply:
                pass  # an exit report of the step being swept
        self.running = False

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self.log.close()
