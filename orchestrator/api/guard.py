"""What every request to the local API passes first: the Host header, then the token.

The API listens on 127.0.0.1 only. A web page could still reach it by re-pointing a name
it owns at 127.0.0.1 (DNS rebinding), so only the Host names of loopback on this port
are answered (orchestrator/dashboard/hosts.py); and every request carries the token of
SKILLQ_HOME/api.json as a bearer header, compared in constant time. A refused request
reaches no route, so it starts nothing.
"""

from __future__ import annotations

import hmac
import json

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from orchestrator.dashboard.hosts import HostPolicy

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost"})


def refusal(status_code: int, message: str, exit_code: int = 2) -> Response:
    return Response(json.dumps({"error": message, "exit_code": exit_code}), status_code,
                    media_type="application/json")


class ApiGuard:
    def __init__(self, app: ASGIApp, token: str, port: int, max_body_bytes: int) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()
        self.hosts = HostPolicy(port, LOOPBACK_HOSTS, frozenset())
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if not self.hosts.allows(headers.get("host")):
            found = refusal(421, "the local API answers only to Host 127.0.0.1 or localhost "
                            "on its port (DNS rebinding)")
        elif not hmac.compare_digest(headers.get("authorization", "").encode(),
                                     self.expected):
            found = refusal(401, "the local API refused this request's token (it is the "
                            "one in SKILLQ_HOME/api.json)")
        elif _length(headers) > self.max_body_bytes:
            found = refusal(413, f"a request to the local API may hold at most "
                            f"{self.max_body_bytes:,} bytes")
        else:
            await self.app(scope, receive, send)
            return
        await found(scope, receive, send)


def _length(headers: Headers) -> int:
    raw = headers.get("content-length") or "0"
    return int(raw) if raw.isdigit() else 1 << 62  # unreadable: refused as too large
