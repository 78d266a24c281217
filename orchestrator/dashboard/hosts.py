"""Which Host headers the dashboard answers to.

DNS rebinding: a page on evil.example re-points its own name at 127.0.0.1. To the
browser, the dashboard is then evil.example, the same origin as the page, which may read
its pages and post its forms. Only the Host header gives that away, so the dashboard
answers to the address it listens on (and, on loopback, the names of loopback) and to
the names SKILLQ_DASHBOARD_HOSTS adds, nothing else.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

from orchestrator.dashboard.config import LOOPBACK_NAMES, is_loopback
from shared.errors import DashboardError

HOSTS_ENV = "SKILLQ_DASHBOARD_HOSTS"
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})  # noqa: S104 (recognised, not bound)
LOOPBACK_IPS = frozenset({"127.0.0.1", "::1"})


def _name(text: str) -> str:
    """A host name compared as DNS compares it; an IP literal in one spelling."""
    name = text.strip().strip("[]").lower().rstrip(".")
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name


def split_host(text: str) -> tuple[str, int | None] | None:
    """``name``, ``name:port``, ``[v6]`` or ``[v6]:port`` as (name, port); None when it is
    none of those."""
    text = text.strip()
    if not text or any(c in text for c in "/?#@ \t"):
        return None
    port: str | None
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        host, rest = text[1:end], text[end + 1:]
        if rest and not rest.startswith(":"):
            return None
        port = rest[1:] if rest else None
        if ":" not in host:
            return None  # brackets hold IPv6 addresses only
    elif text.count(":") > 1:  # a bare IPv6 address (in configuration only)
        host, port = text, None
    else:
        host, _, after = text.partition(":")
        port = after if ":" in text else None
    if not host or (port is not None and not (port.isdigit() and 0 < int(port) < 65536)):
        return None
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return None
    return _name(host), int(port) if port is not None else None


@dataclass(frozen=True)
class HostPolicy:
    port: int
    names: frozenset[str]  # answered to on the serving port
    extra: frozenset[tuple[str, int | None]]  # configured; a None port matches any port
    any_ip: bool = False  # a wildcard bind: an IP literal is no name a page could own
    anything: bool = False  # "*": a proxy in front checks Host itself

    def allows(self, header: str | None) -> bool:
        if self.anything:
            return True
        found = split_host(header or "")
        if found is None:
            return False
        name, port = found
        if (name, port) in self.extra or (name, None) in self.extra:
            return True
        if (port or 80) != self.port:
            return False
        if name in self.names:
            return True
        return self.any_ip and _is_ip(name)

    def shown(self) -> list[str]:
        """What a refusal lists as accepted, as a browser's address bar would show it."""
        def show(name: str, port: int | None) -> str:
            host = f"[{name}]" if ":" in name else name
            return host if port is None else f"{host}:{port}"
        found = [show(n, self.port) for n in sorted(self.names)]
        if self.any_ip:
            found.append(f"any IP address of this machine:{self.port}")
        return found + [show(n, p) for n, p in sorted(self.extra, key=str)]


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def parse_hosts(text: str) -> tuple[frozenset[tuple[str, int | None]], bool]:
    """The entries of SKILLQ_DASHBOARD_HOSTS, and whether it holds ``*``; DashboardError
    naming the entry that is neither a host name nor host:port."""
    entries: set[tuple[str, int | None]] = set()
    anything = False
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        if entry == "*":
            anything = True
            continue
        found = split_host(entry)
        if found is None:
            raise DashboardError(
                f"{HOSTS_ENV}: {entry!r} is not a host name or host:port (write e.g. "
                f"dashboard.example.internal or dashboard.example.internal:8443, no "
                f"scheme or path; separate several with commas)")
        entries.add(found)
    return frozenset(entries), anything


def _machine_names() -> set[str]:
    names = set()
    for name in (socket.gethostname(), socket.getfqdn()):
        if name:
            names.add(_name(name))
    return names


def host_policy(bind: str, port: int, configured: str = "") -> HostPolicy:
    extra, anything = parse_hosts(configured)
    bind_name = _name(bind)
    if bind_name in WILDCARD_BINDS:
        # Every address of the machine, loopback included, reaches a wildcard listener.
        names = {*LOOPBACK_NAMES, *LOOPBACK_IPS, *_machine_names()}
        return HostPolicy(port, frozenset(names), extra, any_ip=True, anything=anything)
    names = {bind_name}
    if is_loopback(bind_name):
        names |= {*LOOPBACK_NAMES, *LOOPBACK_IPS}
    return HostPolicy(port, frozenset(names), extra, anything=anything)


def refusal_text(header: str | None, policy: HostPolicy) -> str:
    """Why a request was refused and the setting that would let it in."""
    given = f"the host {header!r}" if header else "a request without a Host header"
    return (f"This skillq dashboard does not answer to {given}. A web page can point a "
            f"name it owns at this machine (DNS rebinding); the Host header is how the "
            f"dashboard tells, so it answers only to: {', '.join(policy.shown())}. If you "
            f"reach it by another name (a DNS name, a reverse proxy), add that name to "
            f"{HOSTS_ENV} (comma-separated, name or name:port) and restart "
            f"`skillq dashboard`.")
