"""The checks every request passes before any page code runs (ASGI middleware).

In order: the Host header (orchestrator/dashboard/hosts.py), basic auth
(orchestrator/dashboard/auth.py), and for a state-changing request the body limit, the
same-origin check and the form token (orchestrator/dashboard/csrf.py). A refusal is a
short page that says why and what to change; the route that would start a run or write a
record is never called, so a refused request changes nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from markupsafe import escape
from starlette.datastructures import FormData, Headers, MutableHeaders
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import ClientDisconnect, HTTPConnection, Request
from starlette.responses import HTMLResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from orchestrator.dashboard.auth import REALM, authorized, cross_site
from orchestrator.dashboard.config import Credentials
from orchestrator.dashboard.csrf import CSRF_SCOPE_KEY, FIELD, FORM_KEY, HEADER, FormTokens
from orchestrator.dashboard.hosts import HostPolicy, refusal_text

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


def refusal(status_code: int, title: str, text: str,
            headers: dict[str, str] | None = None) -> HTMLResponse:
    body = (f"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>"
            f"{escape(title)} · skillq dashboard</title></head>\n<body><h1>{escape(title)}"
            f"</h1>\n<p id=\"refusal\">{escape(text)}</p></body></html>\n")
    return HTMLResponse(body, status_code=status_code, headers=headers)


class TooLarge(Exception):
    pass


async def read_body(receive: Receive, limit: int) -> bytes:
    """The whole request body; TooLarge past ``limit`` bytes (a chunked body has no
    Content-Length to refuse it by up front)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise TooLarge()
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """A receive that hands the body already read over again, then what follows it."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # the disconnect, when it comes

    return again


class DashboardGuard:
    def __init__(self, app: ASGIApp, credentials: Credentials | None, hosts: HostPolicy,
                 tokens: FormTokens, cookie: str, max_body_bytes: int) -> None:
        self.app = app
        self.credentials = credentials
        self.hosts = hosts
        self.tokens = tokens
        self.cookie = cookie
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host")
        if not self.hosts.allows(host):
            await refusal(400, "Unknown host", refusal_text(host, self.hosts)
                          )(scope, receive, send)
            return
        if self.credentials is not None and not authorized(headers.get("authorization"),
                                                           self.credentials):
            challenge = {"WWW-Authenticate": f'Basic realm="{REALM}", charset="UTF-8"'}
            await refusal(401, "Authentication required", "This dashboard asks for the "
                          "user name and password of SKILLQ_DASHBOARD_AUTH.", challenge
                          )(scope, receive, send)
            return
        known = self.tokens.usable_nonce(HTTPConnection(scope).cookies.get(self.cookie))
        nonce = known or self.tokens.new_nonce()
        scope[CSRF_SCOPE_KEY] = self.tokens.token(nonce)  # what the pages put in their forms
        if known is None:
            send = self._setting_cookie(send, nonce)
        if scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        try:
            checked = await self._check_change(scope, receive, headers, known)
        except ClientDisconnect:
            return  # gone before its body arrived: nobody to answer, nothing to do
        if isinstance(checked, HTMLResponse):
            await checked(scope, receive, send)
            return
        form, body = checked
        try:
            await self.app({**scope, FORM_KEY: form}, replay(body, receive), send)
        finally:
            await form.close()

    def _setting_cookie(self, send: Send, nonce: str) -> Callable[[Message], Awaitable[None]]:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                # HttpOnly: no script needs it; the token travels in the page instead.
                MutableHeaders(scope=message).append(
                    "set-cookie", f"{self.cookie}={nonce}; Path=/; HttpOnly; SameSite=Lax")
            await send(message)

        return sending

    async def _check_change(self, scope: Scope, receive: Receive, headers: Headers,
                            nonce: str | None) -> HTMLResponse | tuple[FormData, bytes]:
        """The refusal of a state-changing request, or its parsed form and body."""
        limit = self.max_body_bytes
        length = headers.get("content-length", "")
        try:
            if length.isdigit() and int(length) > limit:
                raise TooLarge()
            body = await read_body(receive, limit)
        except TooLarge:
            size = f"{int(length):,} bytes" if length.isdigit() else f"over {limit:,} bytes"
            return refusal(413, "Request too large", (
                f"This request's body is {size}; the dashboard accepts at most {limit:,} "
                f"bytes (8 x SKILLQ_INPUT_MAX_BYTES + 64 KiB). Nothing was changed. "
                f"Shorten the inputs, or raise SKILLQ_INPUT_MAX_BYTES and restart "
                f"`skillq dashboard`."))
        other = cross_site(headers)
        if other is not None:
            return refusal(403, "Cross-site request refused", (
                f"This request came from {other}, not from a page of this dashboard: "
                f"another site's page cannot start runs or change records here. Nothing "
                f"was changed. Open the dashboard and use its own form."))
        try:
            form = await Request(scope, replay(body, receive)).form(max_part_size=limit)
        except (HTTPException, MultiPartException) as exc:  # Starlette wraps parse errors
            detail = exc.detail if isinstance(exc, HTTPException) else exc.message
            return refusal(400, "Unreadable form", f"{detail} Nothing was changed.")
        given = headers.get(HEADER) or form.get(FIELD)
        if not self.tokens.valid(nonce, given if isinstance(given, str) else None):
            await form.close()
            return refusal(403, "Form token missing or stale", (
                "This request carries no valid form token, so it is refused and nothing "
                "was changed. A form another page submits has none, and one the dashboard "
                "rendered before it restarted has a stale one: reload the dashboard's "
                "page and submit its form again."))
        return form, body
