"""What the dashboard is started with, and the bind check that runs before it listens.

Bound to a loopback address, the dashboard is as private as the machine. Anywhere else it
must have credentials (HTTP basic, ``SKILLQ_DASHBOARD_AUTH=user:password``): it refuses to
start without them rather than publish run inputs and outputs to a network.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from shared.errors import DashboardError

AUTH_ENV = "SKILLQ_DASHBOARD_AUTH"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
PAGE_SIZE = 25
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
INPUT_MAX_BYTES = 1024 * 1024  # shared/settings.py input_max_bytes
BODY_SLACK_BYTES = 64 * 1024


@dataclass(frozen=True)
class Credentials:
    user: str
    password: str

    def __repr__(self) -> str:  # never the password, even in a traceback
        return f"Credentials(user={self.user!r}, password='***')"


@dataclass(frozen=True)
class DashboardConfig:
    host: str
    port: int
    vault: Path
    database_url: str
    credentials: Credentials | None = None
    page_size: int = PAGE_SIZE
    discovery_ttl_s: float = 5.0
    daemon_offline_after_s: float = 30.0
    hosts: str = ""  # SKILLQ_DASHBOARD_HOSTS
    input_max_bytes: int = INPUT_MAX_BYTES  # SKILLQ_INPUT_MAX_BYTES

    @property
    def max_body_bytes(self) -> int:
        """Room for a few inputs at the cap, percent-encoded (up to 3 bytes a byte), plus
        the other fields: a form with one input over the cap still reaches the input
        check, which names it."""
        return 8 * self.input_max_bytes + BODY_SLACK_BYTES


def parse_credentials(text: str | None) -> Credentials | None:
    """``user:password`` from the environment; None when unset or empty."""
    if text is None or not text.strip():
        return None
    user, sep, password = text.partition(":")
    if not sep or not user.strip() or not password:
        raise DashboardError(f"{AUTH_ENV} must be USER:PASSWORD (both non-empty); fix the "
                             "variable or unset it")
    return Credentials(user.strip(), password)


def credentials_from_env() -> Credentials | None:
    return parse_credentials(os.environ.get(AUTH_ENV))


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost: could resolve anywhere


def check_bind(host: str, credentials: Credentials | None) -> None:
    """DashboardError when ``host`` is not loopback and no credentials are configured."""
    if credentials is None and not is_loopback(host):
        raise DashboardError(
            f"refusing to serve the dashboard on {host} without authentication: anyone "
            f"who can reach that address would see run inputs and outputs and could start "
            f"runs. Set {AUTH_ENV}=USER:PASSWORD (HTTP basic auth; put TLS in front of it), "
            f"or bind to 127.0.0.1 (the default)")
