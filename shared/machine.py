"""Which machine this is: the identity a daemon announces and a ``directory`` value
carries, so a step given a folder runs where that folder is (lifecycle/routing.py)."""

from __future__ import annotations

import socket
from pathlib import Path

from shared.settings import Settings

MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")


def device_id(settings: Settings) -> str:
    """SKILLQ_DEVICE_ID when set (containers that share a machine-id file, a test), else
    the machine-id systemd writes, else the host name."""
    if settings.device_id:
        return settings.device_id
    for path in MACHINE_ID_FILES:
        try:
            found = Path(path).read_text().strip()
        except OSError:
            continue
        if found:
            return found
    return socket.gethostname()


def host_name() -> str:
    return socket.gethostname()
