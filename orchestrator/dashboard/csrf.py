"""Form tokens: a signed double-submit cookie.

Each browser gets a random nonce in a cookie; every form the dashboard renders carries
HMAC(secret, nonce) in a hidden field, and a state-changing request is accepted only when
the two agree. Another site can make a browser send the cookie but can neither read the
page nor compute the HMAC, and a cookie it plants (cookies ignore ports, so any other
page served on 127.0.0.1 can) has no matching token. The secret lives in the dashboard
process only: a restart makes open forms stale, which costs a reload.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Any

from markupsafe import Markup
from starlette.datastructures import FormData
from starlette.requests import Request

# A hyphen is not allowed in an input name (shared/manifest.py IDENT), so the run form
# never mistakes the token for an input of the skill.
FIELD = "skillq-csrf"
HEADER = "x-skillq-csrf"  # for scripts that post without a form
CSRF_SCOPE_KEY = "skillq.csrf"  # in the ASGI scope: the token the pages render
FORM_KEY = "skillq.form"  # in the ASGI scope: the form the guard already parsed
_NONCE = re.compile(r"[A-Za-z0-9_-]{16,128}")


def cookie_name(port: int) -> str:
    # Per port: two dashboards on one machine share cookies, never each other's nonce.
    return f"skillq_csrf_{port}"


class FormTokens:
    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)

    @staticmethod
    def new_nonce() -> str:
        return secrets.token_urlsafe(24)

    @staticmethod
    def usable_nonce(value: str | None) -> str | None:
        return value if value is not None and _NONCE.fullmatch(value) else None

    def token(self, nonce: str) -> str:
        return hmac.new(self._secret, nonce.encode(), hashlib.sha256).hexdigest()

    def valid(self, nonce: str | None, token: str | None) -> bool:
        if not nonce or not token:
            return False
        return hmac.compare_digest(self.token(nonce).encode(), token.encode())


def csrf_input(request: Request) -> Markup:
    """The hidden field every POST form of the templates carries."""
    token = request.scope.get(CSRF_SCOPE_KEY, "")
    return Markup('<input type="hidden" name="{}" value="{}">').format(FIELD, token)


async def submitted_form(request: Request, max_part_size: int) -> FormData:
    """The posted form: the one the guard parsed when it checked the token, else parsed
    here with a field limit that lets an oversized input reach the input check (which
    names it) instead of Starlette's 1 MB field limit."""
    found: Any = request.scope.get(FORM_KEY)
    if isinstance(found, FormData):
        return found
    return await request.form(max_part_size=max_part_size)
