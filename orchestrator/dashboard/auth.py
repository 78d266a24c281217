"""HTTP basic authentication and a same-origin check for form posts (ASGI middleware).

With credentials configured, every request without them answers 401 (with a
``WWW-Authenticate`` challenge, so a browser asks). A POST whose Origin is another site
is refused (403): a browser would otherwise send the cached credentials along with a
form another page submits here.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from orchestrator.dashboard.config import Credentials

REALM = "skillq dashboard"


def authorized(header: str | None, credentials: Credentials) -> bool:
    """Whether an Authorization header carries exactly these credentials."""
    if not header:
        return False
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return False
    user, sep, password = decoded.partition(":")
    # Both compared, always: no early exit that times which half was wrong.
    same_user = hmac.compare_digest(user.encode(), credentials.user.encode())
    same_password = hmac.compare_digest(password.encode(), credentials.password.encode())
    return bool(sep) and same_user and same_password


def same_origin(headers: Headers) -> bool:
    origin = headers.get("origin")
    if origin is None or origin == "null":
        return origin is None  # no Origin: not a browser's cross-site form
    return urlsplit(origin).netloc == headers.get("host", "")


class DashboardGuard:
    def __init__(self, app: ASGIApp, credentials: Credentials | None) -> None:
        self.app = app
        self.credentials = credentials

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if self.credentials is not None and not authorized(headers.get("authorization"),
                                                           self.credentials):
            response = PlainTextResponse(
                "authentication required\n", status_code=401,
                headers={"WWW-Authenticate": f'Basic realm="{REALM}", charset="UTF-8"'})
            await response(scope, receive, send)
            return
        if scope["method"] == "POST" and not same_origin(headers):
            await PlainTextResponse("cross-site form posts are refused\n",
                                    status_code=403)(scope, receive, send)
            return
        await self.app(scope, receive, send)
