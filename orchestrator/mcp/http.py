"""`skillq mcp --http`: the MCP server over streamable HTTP, bound as the dashboard is.

The dashboard's rules, and its code: loopback unless SKILLQ_DASHBOARD_AUTH gives basic
auth credentials (check_bind), the Host header checked against the bind address and
SKILLQ_DASHBOARD_HOSTS (a DNS-rebinding page cannot reach a loopback server), and every
request authenticated when credentials are set. A refused request never reaches the MCP
session, so it runs nothing.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

from orchestrator.dashboard.auth import authorized
from orchestrator.dashboard.config import Credentials
from orchestrator.dashboard.hosts import HostPolicy, refusal_text

PATH = "/mcp"


class Guard:
    def __init__(self, app: ASGIApp, credentials: Credentials | None,
                 hosts: HostPolicy) -> None:
        self.app, self.credentials, self.hosts = app, credentials, hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        host = headers.get("host")
        if not self.hosts.allows(host):
            await _refuse(send, 421, refusal_text(host, self.hosts))
            return
        if self.credentials is not None and \
                not authorized(headers.get("authorization"), self.credentials):
            await _refuse(send, 401, "credentials required (SKILLQ_DASHBOARD_AUTH's)",
                          [(b"www-authenticate", b'Basic realm="skillq mcp"')])
            return
        await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, text: str,
                  extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"error": text}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *(extra or [])]})
    await send({"type": "http.response.body", "body": body})
