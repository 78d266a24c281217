"""HTTP basic authentication and the same-origin check of state-changing requests (the
guard that applies them: orchestrator/dashboard/guard.py).

With credentials configured, every request without them answers 401 (with a
``WWW-Authenticate`` challenge, so a browser asks). A POST whose Origin (or, without one,
Referer) is another site is refused (403): a browser would otherwise send the cached
credentials along with a form another page submits here.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from urllib.parse import urlsplit

from starlette.datastructures import Headers

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


def cross_site(headers: Headers) -> str | None:
    """The other site a request came from (its Origin, else its Referer), or None."""
    host = headers.get("host", "").lower()
    origin = headers.get("origin")
    if origin is not None:
        return None if origin != "null" and urlsplit(origin).netloc.lower() == host else origin
    referer = headers.get("referer")
    if referer:
        parts = urlsplit(referer)
        if parts.netloc.lower() != host:
            return f"{parts.scheme}://{parts.netloc}" if parts.netloc else referer
    return None  # neither: not a browser's cross-site form (the token decides)


def same_origin(headers: Headers) -> bool:
    return cross_site(headers) is None
