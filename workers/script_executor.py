"""The script executor: runs a leaf skill's ``run.command`` per the script protocol, in a
scratch copy of the skill folder, its own session and a scrubbed environment; outputs
are validated against the manifest; stdout/stderr are kept as bounded tails. File inputs
and outputs go through workers/file_inputs.py. docs/script-protocol.md is the contract."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import selectors
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from shared.atomic import TEMP_PATTERN
from shared.manifest import Manifest
from shared.valuetypes import machine_path, path_type, type_error
from workers import interpreters
from workers.file_inputs import FileProblem, FileStore, materialize, store_outputs, uses_files
from workers.folder_inputs import FolderProblem, as_paths, folders, git_trust
from workers.sandbox import Sandbox
from workers.sandbox.limits import Breaches, StepLimits, limit_reached
from workers.sandbox.runner import Started

TAIL_BYTES = 8 * 1024  # stdout/stderr kept with the run record
TERM_GRACE_S = 2.0  # on timeout: SIGTERM to the group, this long, then SIGKILL
DRAIN_S = 0.5  # reading on after the child exited and its group was killed
POLL_S = 0.05  # how often the pump checks whether the direct child has exited
EX_TEMPFAIL = 75
ERROR_LINES = 3  # last non-empty stderr lines quoted in a failure's error
PROTOCOL_VARS = ("SKILL_INPUTS", "SKILL_OUTPUT", "SKILLQ_WORKDIR")
# Not bytecode (it would run instead of the sources), nor a file another process is
# rewriting beside the skill's (a run's end rewrites benchmarks.json): renamed away
# mid-copy, it failed the copy.
_NOT_COPIED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", TEMP_PATTERN)


class ScriptStatus(StrEnum):
    SUCCESS = "success"
    TRANSIENT = "transient"  # exit 75 (EX_TEMPFAIL): retried with backoff
    FAILED = "failed"  # any other non-zero exit, or the command could not start
    TIMEOUT = "timeout"
    BAD_OUTPUT = "bad_output"  # exit 0, but the outputs break the contract


@dataclass(frozen=True, slots=True)
class ScriptResult:
    status: ScriptStatus
    exit_code: int | None  # None: never started; negative: killed by that signal
    outputs: dict[str, Any] | None  # set on success only
    error: str | None
    stdout_tail: str
    stderr_tail: str
    duration_ms: int
    output_bytes: int


class _Tail:  # the last ``keep`` bytes of a stream, in bounded memory
    def __init__(self, keep: int) -> None:
        self.keep, self.total, self.buf = keep, 0, bytearray()

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.buf += chunk
        if len(self.buf) > 2 * self.keep:
            del self.buf[: -self.keep]

    def text(self) -> str:
        # Recorded as text, which PostgreSQL holds without a NUL: a NUL byte a script
        # printed is shown as U+FFFD, as its bytes that are not UTF-8 are.
        return bytes(self.buf[-TAIL_BYTES:]).decode("utf-8", "replace").replace("\x00", "\ufffd")


class _BadOutput(Exception):
    def __init__(self, message: str, size: int = 0) -> None:
        super().__init__(message)
        self.size = size  # bytes of the outputs, for the record


def run_script(folder: Path, manifest: Manifest, inputs: dict[str, Any], *,
               secrets: Mapping[str, str], timeout_s: float, max_output_bytes: int,
               workdir: Path | None = None,
               extra_env: Mapping[str, str] | None = None,
               scratch: Path | None = None,
               sandbox: Sandbox | None = None,
               files: FileStore | None = None) -> ScriptResult:
    """Run ``manifest.run.command`` in a scratch copy of ``folder``; classify the outcome.
    Only secrets declared in ``auth`` are passed (as NAME upper-cased). ValueError on
    caller errors (no ``run``, an env name clash, inputs not JSON); the rest is a result.
    ``scratch``: the folder to work in (created, then removed), named by the caller so
    that whoever ends the attempt can find it (workers/attempt_end.py); else a new one.
    ``sandbox``: where the command runs (workers/sandbox/), under the manifest's limits;
    None: as this process's user, with its rights (SKILLQ_SANDBOX=off, and unit tests).
    ``files``: where the bytes of ``file`` inputs and outputs live (the shared store);
    required when the manifest declares any."""
    if manifest.run is None:
        raise ValueError(f"skill '{manifest.name}' has no run command")
    with_files = uses_files(manifest)
    if with_files and files is None:
        raise ValueError(f"skill '{manifest.name}' has file inputs or outputs: pass files=")
    payload = json.dumps(inputs, ensure_ascii=False, allow_nan=False).encode()
    if scratch is None:
        scratch = Path(tempfile.mkdtemp(prefix=f"skillq-{manifest.name}-",
                                        dir=sandbox.slot if sandbox else None))
    else:
        shutil.rmtree(scratch, ignore_errors=True)  # a dead process's leftover
        scratch.mkdir(mode=0o700, parents=True)
    try:
        cwd, in_path, out_path = scratch / "skill", scratch / "inputs.json", scratch / "out.json"
        protocol = {"SKILL_INPUTS": str(in_path), "SKILL_OUTPUT": str(out_path)}
        if workdir is not None:
            protocol["SKILLQ_WORKDIR"] = str(workdir.absolute())
        given_folders = folders(manifest, inputs)
        env = _environment(manifest, secrets, extra_env, scratch) | protocol \
            | git_trust(given_folders)
        env["PATH"] = interpreters.first_on_path(scratch, env["PATH"])
        # Symlinks are copied as their targets: nothing in the copy leads back to the vault.
        shutil.copytree(folder, cwd, ignore_dangling_symlinks=True, ignore=_NOT_COPIED)
        _make_writable(cwd)  # the copy is the script's to change, even from a 0444 vault
        try:  # the script reads local paths; the record keeps the stored files
            seen = as_paths(manifest, inputs)
            if with_files:
                assert files is not None
                seen = materialize(manifest, seen, scratch, files)
        except (FileProblem, FolderProblem) as exc:
            return ScriptResult(ScriptStatus.FAILED, None, None, str(exc), "", "", 0, 0)
        payload = json.dumps(seen, ensure_ascii=False, allow_nan=False).encode()
        in_path.write_bytes(payload)
        if sandbox is None:
            done = _execute(manifest, cwd, env, payload, out_path, timeout_s, max_output_bytes)
        else:
            sandbox.prepare(scratch)
            where = _Where(sandbox, StepLimits.resolve(manifest.limits, sandbox.settings),
                           protocol.get("SKILLQ_WORKDIR"), str(folder.absolute().parent),
                           tuple(given_folders))
            with sandbox.lock:
                try:
                    done = _execute(manifest, cwd, env, payload, out_path, timeout_s,
                                    max_output_bytes, where)
                finally:
                    sandbox.end_attempt()
        if with_files and done.status == ScriptStatus.SUCCESS and done.outputs:
            assert files is not None
            try:  # after the attempt ended: nothing of the step's can change them now
                stored = store_outputs(manifest, done.outputs, cwd, scratch, files)
            except FileProblem as exc:
                return dataclasses.replace(done, status=ScriptStatus.BAD_OUTPUT, outputs=None,
                                           error=str(exc))
            return dataclasses.replace(done, outputs=stored)
        return done
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if scratch.exists():  # a step took its own folders' write bit: give it back, again
            _make_writable(scratch)
            shutil.rmtree(scratch, ignore_errors=True)


def _environment(manifest: Manifest, secrets: Mapping[str, str],
                 extra_env: Mapping[str, str] | None, scratch: Path) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH") or os.defpath, "HOME": str(scratch),
           "LANG": os.environ.get("LANG") or "C.UTF-8", **(extra_env or {}),
           # Bytecode is never trusted from a skill folder: the scratch copy leaves every
           # .pyc out (a forged one would run instead of the .py the hash check read) and
           # none is written, while the interpreter's own caches (stdlib, site-packages)
           # are still read: a per-scratch PYTHONPYCACHEPREFIX would recompile all of them
           # on every step, which would cost a small script more than its own run.
           "PYTHONDONTWRITEBYTECODE": "1"}
    if clash := sorted(set(env) & set(PROTOCOL_VARS)):
        raise ValueError(f"extra_env may not set the protocol variables {', '.join(clash)}")
    for name in manifest.auth:
        if name in secrets:
            key = name.upper()
            if key in env or key in PROTOCOL_VARS:
                raise ValueError(f"secret '{name}' would shadow the environment variable {key}")
            env[key] = secrets[name]
    return env


@dataclass(frozen=True, slots=True)
class _Where:
    sandbox: Sandbox
    limits: StepLimits
    workdir: str | None
    vault: str  # the skill folder's parent: its peers are hidden from it
    folders: tuple[str, ...]  # given as directory inputs: shown to it read-only


def _make_writable(root: Path) -> None:
    for top, dirs, files in os.walk(root):  # os.walk and os.chmod: quicker than pathlib
        for path in (top, *(os.path.join(top, name) for name in (*dirs, *files))):  # noqa: PTH118
            with contextlib.suppress(OSError):
                mode = os.lstat(path).st_mode
                want = mode | (0o700 if stat.S_ISDIR(mode) else 0o600)
                if not stat.S_ISLNK(mode) and want != mode:
                    os.chmod(path, want)  # noqa: PTH101 - a str from os.walk


def _execute(manifest: Manifest, cwd: Path, env: dict[str, str], payload: bytes,
             out_path: Path, timeout_s: float, cap: int,
             where: _Where | None = None) -> ScriptResult:
    assert manifest.run is not None
    out, err = _Tail(TAIL_BYTES + cap + 2), _Tail(TAIL_BYTES)  # stdout: room for the last line
    start = time.monotonic()

    def result(status: ScriptStatus, code: int | None, error: str | None,
               outputs: dict[str, Any] | None = None, size: int = 0) -> ScriptResult:
        ms = int((time.monotonic() - start) * 1000)
        return ScriptResult(status, code, outputs, error, out.text(), err.text(), ms, size)

    try:
        argv = shlex.split(manifest.run.command)
        proc: subprocess.Popen[bytes] | Started
        if where is None:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True, close_fds=True)
        else:
            proc = where.sandbox.start(argv, cwd, env, where.limits, where.workdir, where.vault,
                                       where.folders)
    except (OSError, ValueError) as exc:
        return result(ScriptStatus.FAILED, None, f"cannot start {manifest.run.command!r}: {exc}")
    timed_out = _pump(proc, payload, timeout_s, out, err)
    try:
        code = proc.wait()
    except OSError as exc:  # the sandbox's launcher could not start it
        return result(ScriptStatus.FAILED, None, f"cannot start {manifest.run.command!r}: {exc}")
    breaches = where.sandbox.breaches(proc) if where else Breaches()
    if timed_out:
        return result(ScriptStatus.TIMEOUT, code,
                      f"timed out after {timeout_s:g} s (process group killed)")
    if code != 0:
        status = ScriptStatus.TRANSIENT if code == EX_TEMPFAIL else ScriptStatus.FAILED
        message = _failure_message(code, err.text())
        if where and (reached := limit_reached(where.limits, code, err.text(), breaches)):
            message, status = f"{reached}; {message}", ScriptStatus.FAILED
        return result(status, code, message)
    try:
        outputs, size = _read_outputs(manifest, out_path, out, cap)
    except _BadOutput as exc:
        return result(ScriptStatus.BAD_OUTPUT, code, str(exc), size=exc.size)
    return result(ScriptStatus.SUCCESS, code, None, outputs, size)


def _pump(proc: subprocess.Popen[bytes] | Started, payload: bytes, timeout_s: float,
          out: _Tail, err: _Tail) -> bool:
    """Feed stdin, read stdout/stderr until the child is gone; True when it timed out.
    The group is killed as soon as the direct child exits, then pipes drain for at most
    DRAIN_S: a grandchild that escaped the group and holds the pipes cannot hang this."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)
    os.set_blocking(proc.stdin.fileno(), False)
    sel.register(proc.stdin, selectors.EVENT_WRITE, None)
    if isinstance(proc, Started):
        exited, signal_group = proc.exited, proc.signal_group
    else:
        pid = proc.pid
        def exited() -> bool:
            return _exited(pid)
        def signal_group(sig: signal.Signals) -> None:
            _signal_group(pid, sig)
    # The pipes close a moment before the exit can be seen (the launcher's report comes
    # after it has ended the step's processes): waiting on the exit itself, rather than
    # sleeping and checking again, is what keeps a short step short.
    exit_fd = _exit_fd(proc)
    if exit_fd is not None:
        sel.register(exit_fd, selectors.EVENT_READ, _EXIT)
    deadline = time.monotonic() + timeout_s
    kill_at: float | None = None  # set when SIGTERM went out on timeout
    stop_at: float | None = None  # set when the direct child has exited: drain until then
    sent, idle = 0, 0.0005
    try:
        while True:
            now = time.monotonic()
            if stop_at is None:
                if exited():
                    signal_group(signal.SIGKILL)
                    stop_at = now + DRAIN_S
                    if exit_fd is not None:
                        sel.unregister(exit_fd)
                elif kill_at is None and now >= deadline:
                    signal_group(signal.SIGTERM)
                    kill_at = now + TERM_GRACE_S
                elif kill_at is not None and now >= kill_at:
                    signal_group(signal.SIGKILL)
            if stop_at is not None and (now >= stop_at or not sel.get_map()):
                break
            # With the pipes closed the child is exiting: poll fast, then back off.
            wait, idle = (POLL_S, idle) if sel.get_map() else (idle, min(idle * 2, POLL_S))
            for key, _ in sel.select(wait):
                if key.data is _EXIT:
                    continue  # seen at the top of the loop
                if key.data is None:  # stdin
                    try:
                        sent += os.write(key.fd, payload[sent:sent + 65536])
                    except BlockingIOError:
                        continue
                    except OSError:  # the script closed stdin without reading it all
                        sent = len(payload)
                    if sent >= len(payload):
                        sel.unregister(key.fileobj)
                        proc.stdin.close()
                    continue
                if chunk := os.read(key.fd, 65536):
                    key.data.feed(chunk)
                else:  # EOF
                    sel.unregister(key.fileobj)
    finally:
        sel.close()
        if exit_fd is not None and not isinstance(proc, Started):
            os.close(exit_fd)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                stream.close()
    return kill_at is not None


_EXIT = _Tail(0)  # the selector's mark for the exit fd


def _exit_fd(proc: subprocess.Popen[bytes] | Started) -> int | None:
    """An fd that turns readable when the command exits: the launcher's socket in the
    sandbox, else a pidfd (None where the kernel has none: the pump polls instead)."""
    if isinstance(proc, Started):
        return proc.launcher.sock.fileno()
    try:
        return os.pidfd_open(proc.pid)
    except (OSError, AttributeError):
        return None


def _exited(pid: int) -> bool:
    try:  # WNOWAIT: the exited child stays a zombie, holding its group id, until reaped
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _failure_message(code: int, stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    tail = "\n".join(lines[-ERROR_LINES:])[-1000:]
    if code >= 0:
        return tail or f"exited with code {code} and nothing on stderr"
    head = f"killed by signal {-code} ({signal.strsignal(-code) or 'unknown'})"
    return f"{head}: {tail}" if tail else head


def _too_big(size: int, cap: int, *, at_least: bool = False) -> _BadOutput:
    amount = f"more than {cap}" if at_least else str(size)
    return _BadOutput(f"outputs are {amount} bytes, over the {cap}-byte cap; write large "
                      "data to a file/store and return a reference", size)


def _read_outputs(manifest: Manifest, out_path: Path, out: _Tail,
                  cap: int) -> tuple[dict[str, Any], int]:
    if out_path.exists() or out_path.is_symlink():
        where = "SKILL_OUTPUT"
        try:  # O_NOFOLLOW, then fstat: the step cannot swap in a link to a worker's file
            fd = os.open(out_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            raise _BadOutput("SKILL_OUTPUT is not a regular file") from None
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fd)
            # no FIFO, no /dev/zero, no hard link to a file of someone else's
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
                raise _BadOutput("SKILL_OUTPUT is not a regular file")
            if st.st_size > cap:
                raise _too_big(st.st_size, cap)
            raw = fh.read(cap + 1)
        if len(raw) > cap:
            raise _too_big(len(raw), cap, at_least=True)
    else:
        if not manifest.outputs:  # no outputs declared nor written: stdout is only a log
            return {}, 0
        where, kept = "the last stdout line", bytes(out.buf[-out.keep:]).rstrip()
        newline = kept.rfind(b"\n")
        if newline < 0 and out.total > out.keep:  # the last line began before the kept tail
            raise _too_big(out.keep, cap, at_least=True)
        raw = kept[newline + 1:].strip()
        if not raw:
            names = ", ".join(o.name for o in manifest.outputs)
            raise _BadOutput(f"no outputs: no SKILL_OUTPUT file and stdout empty; expected {names}")
        if len(raw) > cap:
            raise _too_big(len(raw), cap)
    try:
        value = json.loads(raw, parse_constant=_no_constant)
    except ValueError as exc:
        excerpt = raw[:60].decode("utf-8", "replace")
        raise _BadOutput(f"{where} is not valid JSON ({exc}): {excerpt!r}", len(raw)) from None
    if not isinstance(value, dict):
        raise _BadOutput(f"{where} must be a JSON object, got {json.dumps(value)[:40]}", len(raw))
    if problems := _check_outputs(manifest, value):
        raise _BadOutput("; ".join(problems), len(raw))
    return value, len(raw)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN and Infinity: Python-only extensions


def _check_outputs(manifest: Manifest, value: dict[str, Any]) -> list[str]:
    declared = [o.name for o in manifest.outputs]
    problems = []
    if extra := sorted(set(value) - set(declared)):
        problems.append(f"undeclared output(s) {', '.join(map(repr, extra))} "
                        f"(declared: {', '.join(declared) or 'none'})")
    for spec in manifest.outputs:
        if spec.name not in value:
            problems.append(f"missing declared output '{spec.name}' ({spec.type})")
        elif spec.value_type.base == "file":  # a path here; stored once the step is over
            if problem := type_error(value[spec.name], path_type(spec.value_type)):
                problems.append(f"output '{spec.name}' names the file(s) the step wrote, as "
                                f"a path: {problem}")
        elif problem := type_error(value[spec.name], spec.value_type):
            problems.append(f"output '{spec.name}': {problem}")
        elif (found := machine_path(value[spec.name])) is not None:
            problems.append(f"output '{spec.name}' holds {found} as a machine's file or "
                            "folder ($dir, $local), which only a person's command may give; "
                            "return the path as text")
    return problems
