"""What the two OpenAI APIs share: the error body and how tool results read back."""

from __future__ import annotations

import json
from typing import Any

from .script import Failure

ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", None),
}


def text_of(content: Any) -> str:
    """The text of a message content: a string, or a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part.get("text", "") if isinstance(part, dict) else str(part) for part in content
        )
    return json.dumps(content)


def error(failure: Failure) -> dict[str, Any]:
    kind, code = ERROR_TYPES.get(failure.status, ("server_error", None))
    return {
        "error": {
            "message": failure.message,
            "type": failure.type or kind,
            "param": None,
            "code": code,
        }
    }


def sse(data: dict[str, Any] | str, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()
