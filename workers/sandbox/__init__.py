"""Where a step runs: in a bubblewrap sandbox as an unprivileged account, under limits
(docs/security.md). ``current(settings)`` is this process's sandbox, None when steps
run as the worker (SKILLQ_SANDBOX=off, or nothing to isolate them with)."""

from __future__ import annotations

import logging
import os

from shared.errors import SandboxError
from shared.settings import Settings
from workers.sandbox import cgroups
from workers.sandbox.account import step_account
from workers.sandbox.runner import Sandbox, probe

log = logging.getLogger("skillq.sandbox")
_current: tuple[int, Sandbox | None] | None = None

__all__ = ["Sandbox", "check", "current", "launcher_pids", "log_mode", "reset"]


def current(settings: Settings) -> Sandbox | None:
    """This process's sandbox, made on first use (per process: a pool child makes its own)."""
    global _current
    if _current is None or _current[0] != os.getpid():
        _current = (os.getpid(), _make(settings))
    return _current[1]


def launcher_pids() -> list[int]:
    """This process's sandbox launchers (bubblewrap's processes), none if it has none."""
    if _current is None or _current[0] != os.getpid() or _current[1] is None:
        return []
    return [pid for z in _current[1].launchers.values() for pid in z.outer_pids()]


def reset() -> None:
    global _current
    if _current is not None and _current[0] == os.getpid() and _current[1] is not None:
        _current[1].close()
    _current = None


def _make(settings: Settings) -> Sandbox | None:
    if settings.sandbox == "off":
        return None
    problem = probe(settings)
    if problem is None:
        return Sandbox(settings, namespaces=True)
    if settings.sandbox == "bwrap":
        raise SandboxError(f"SKILLQ_SANDBOX=bwrap, but bubblewrap cannot run here: {problem}"
                           "; install it (apt-get install bubblewrap) or set "
                           "SKILLQ_SANDBOX=auto")
    if os.geteuid() == 0:
        log.warning("steps run as %s without namespaces (%s): install bubblewrap to hide "
                    "the filesystem and other processes from them", settings.step_account,
                    problem)
        return Sandbox(settings, namespaces=False)
    log.warning("steps run unisolated, as this worker's user (%s): install bubblewrap",
                problem)
    return None


def log_mode(isolation: str) -> None:
    """The worker's log line naming its mode (``check``'s): a warning unless bubblewrap
    isolates the steps."""
    level = logging.INFO if isolation.startswith("bubblewrap") else logging.WARNING
    log.log(level, "steps run in: %s", isolation)


def check(settings: Settings) -> str:
    """How this daemon's steps will be isolated, in one line (the worker's log, `skillq
    daemons`), found without starting a sandbox. SandboxError when SKILLQ_SANDBOX=bwrap
    and bubblewrap cannot run here."""
    if settings.sandbox == "off":
        return "off (SKILLQ_SANDBOX=off: steps run as the worker)"
    problem = probe(settings)
    account = step_account(settings.step_account)
    who = f"as {settings.step_account}" if account else "as the worker's user"
    limits = "cgroup limits" if cgroups.available() else "rlimits only"
    if problem is None:
        return f"bubblewrap, {who}, {limits}"
    if settings.sandbox == "bwrap":
        raise SandboxError(f"SKILLQ_SANDBOX=bwrap, but bubblewrap cannot run here: {problem}"
                           "; install it (apt-get install bubblewrap) or set "
                           "SKILLQ_SANDBOX=auto")
    if account:
        return f"account only, {who}, rlimits only ({problem}: install bubblewrap)"
    return f"none ({problem}, not root: install bubblewrap)"
