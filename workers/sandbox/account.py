"""The account steps run as when the worker runs as root: a system account with no
shell, no home and no groups, created on first use (as the embedded PostgreSQL's is)."""

from __future__ import annotations

import contextlib
import os
import pwd
import subprocess

from shared.errors import ConfigError


def step_account(name: str) -> tuple[int, int] | None:
    """(uid, gid) for steps; None when the worker is not root (steps keep its uid)."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        with contextlib.suppress(OSError):
            subprocess.run(["useradd", "--system", "--user-group", "--no-create-home",
                            "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
                            name], capture_output=True, check=False, timeout=30)
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            entry = pwd.getpwnam("nobody")
    if entry.pw_uid == 0:
        raise ConfigError(f"SKILLQ_STEP_ACCOUNT={name} is root: name an unprivileged account")
    return entry.pw_uid, entry.pw_gid
