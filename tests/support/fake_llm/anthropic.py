"""Anthropic Messages API (POST /v1/messages): a reply as a Message, or as its SSE stream
(message_start, content_block_start / _delta / _stop per block, message_delta with the
stop reason and cumulative usage, message_stop)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from .script import Failure, Reply, RequestView, next_id, pieces

NAME = "anthropic"
CALL_PREFIX = "toolu_fake"

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            block.get("text", "") if isinstance(block, dict) else str(block) for block in content
        )
    return json.dumps(content)


def view(body: dict[str, Any]) -> RequestView:
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    results = []
    if last.get("role") == "user" and isinstance(last.get("content"), list):
        results = [
            _text_of(block.get("content", ""))
            for block in last["content"]
            if isinstance(block, dict) and block.get("type") == "tool_result"
        ]
    output_format = body.get("output_format") or (body.get("output_config") or {}).get("format")
    return RequestView(
        model=body.get("model", "claude-fake"),
        tool_names=[tool.get("name", "") for tool in body.get("tools") or []],
        native_output=bool(output_format and output_format.get("type") == "json_schema"),
        tool_results=results,
    )


def _usage(reply: Reply, output_tokens: int | None = None) -> dict[str, Any]:
    usage = reply.usage
    return {
        "input_tokens": usage.uncached_input,
        "output_tokens": usage.output if output_tokens is None else output_tokens,
        "cache_read_input_tokens": usage.cache_read,
        "cache_creation_input_tokens": usage.cache_write,
        "cache_creation": {
            "ephemeral_5m_input_tokens": usage.cache_write,
            "ephemeral_1h_input_tokens": 0,
        },
        "server_tool_use": None,
        "service_tier": "standard",
    }


def _blocks(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.text is not None:
        blocks.append({"type": "text", "text": reply.text, "citations": None})
    blocks.extend(
        {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        for call in reply.tool_calls
    )
    return blocks


def _message(
    reply: Reply, msg_id: str, content: list[dict[str, Any]], **fields: Any
) -> dict[str, Any]:
    return {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": content,
        "stop_reason": fields.get("stop_reason"),
        "stop_sequence": None,
        "usage": fields.get("usage") or _usage(reply),
        "container": None,
    }


def _stop_reason(reply: Reply) -> str:
    return "tool_use" if reply.stops_for_tools else "end_turn"


def render(reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    return _message(reply, next_id("msg_fake"), _blocks(reply), stop_reason=_stop_reason(reply))


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()


def stream(reply: Reply, body: dict[str, Any]) -> Iterator[bytes]:
    message = _message(reply, next_id("msg_fake"), [], usage=_usage(reply, output_tokens=1))
    yield _event("message_start", {"message": message})
    yield _event("ping", {})
    for index, block in enumerate(_blocks(reply)):
        if block["type"] == "text":
            yield _event(
                "content_block_start",
                {"index": index, "content_block": {"type": "text", "text": "", "citations": None}},
            )
            for piece in pieces(block["text"]):
                yield _event(
                    "content_block_delta",
                    {"index": index, "delta": {"type": "text_delta", "text": piece}},
                )
        else:
            start = {**block, "input": {}}
            yield _event("content_block_start", {"index": index, "content_block": start})
            for piece in pieces(json.dumps(block["input"], ensure_ascii=False)):
                yield _event(
                    "content_block_delta",
                    {"index": index, "delta": {"type": "input_json_delta", "partial_json": piece}},
                )
        yield _event("content_block_stop", {"index": index})
    yield _event(
        "message_delta",
        {
            "delta": {"stop_reason": _stop_reason(reply), "stop_sequence": None},
            "usage": _usage(reply),
        },
    )
    yield _event("message_stop", {})


def error(failure: Failure) -> dict[str, Any]:
    kind = failure.type or ERROR_TYPES.get(failure.status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": failure.message}}
