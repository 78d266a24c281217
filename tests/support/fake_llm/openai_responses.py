"""OpenAI Responses API (POST /v1/responses): a Response with message and function_call
output items, or its event stream (response.created, response.in_progress, per item
response.output_item.added, content_part.added, output_text.delta / .done,
function_call_arguments.delta / .done, output_item.done, then response.completed)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

from .openai_common import error, sse, text_of
from .script import Reply, RequestView, next_id, pieces

NAME = "openai-responses"
CALL_PREFIX = "call_fake"
__all__ = ["error", "render", "stream", "view"]


def view(body: dict[str, Any]) -> RequestView:
    items = body.get("input")
    results: list[str] = []
    if isinstance(items, list):
        for item in reversed(items):
            if not isinstance(item, dict) or item.get("type") != "function_call_output":
                break
            results.insert(0, text_of(item.get("output", "")))
    text_format = (body.get("text") or {}).get("format") or {}
    return RequestView(
        model=body.get("model", "gpt-fake"),
        # Responses tools are flat ({"type": "function", "name": ...}).
        tool_names=[tool.get("name", "") for tool in body.get("tools") or []],
        native_output=text_format.get("type") in ("json_schema", "json_object"),
        tool_results=results,
    )


def _usage(reply: Reply) -> dict[str, Any]:
    usage = reply.usage
    return {
        "input_tokens": usage.input,
        "input_tokens_details": {
            "cached_tokens": usage.cache_read,
            "cache_write_tokens": usage.cache_write,
        },
        "output_tokens": usage.output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.input + usage.output,
    }


def _items(reply: Reply) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.text is not None:
        items.append(
            {
                "type": "message",
                "id": next_id("msg_fake"),
                "status": "completed",
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}
                ],
            }
        )
    items.extend(
        {
            "type": "function_call",
            "id": next_id("fc_fake"),
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments_json,
            "status": "completed",
        }
        for call in reply.tool_calls
    )
    return items


def _response(
    reply: Reply, body: dict[str, Any], response_id: str, **fields: Any
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": fields.get("status", "completed"),
        "model": reply.model,
        "output": fields.get("output", []),
        "usage": fields.get("usage"),
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "metadata": body.get("metadata") or {},
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None},
        "service_tier": "default",
        "store": body.get("store", True),
        "temperature": body.get("temperature", 1.0),
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p", 1.0),
        "truncation": body.get("truncation", "disabled"),
        "max_output_tokens": body.get("max_output_tokens"),
        "user": None,
    }


def render(reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    return _response(reply, body, next_id("resp_fake"), output=_items(reply), usage=_usage(reply))


def stream(reply: Reply, body: dict[str, Any]) -> Iterator[bytes]:
    response_id = next_id("resp_fake")
    numbers = itertools.count()

    def event(kind: str, /, **data: Any) -> bytes:
        return sse({"type": kind, "sequence_number": next(numbers), **data}, event=kind)

    started = _response(reply, body, response_id, status="in_progress")
    yield event("response.created", response=started)
    yield event("response.in_progress", response=started)
    items = _items(reply)
    for index, item in enumerate(items):
        where = {"output_index": index, "item_id": item["id"]}
        if item["type"] == "message":
            part = item["content"][0]
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            empty = {**part, "text": ""}
            yield event("response.content_part.added", **where, content_index=0, part=empty)
            for piece in pieces(part["text"]):
                yield event(
                    "response.output_text.delta", **where, content_index=0, delta=piece, logprobs=[]
                )
            yield event(
                "response.output_text.done",
                **where,
                content_index=0,
                text=part["text"],
                logprobs=[],
            )
            yield event("response.content_part.done", **where, content_index=0, part=part)
        else:
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            for piece in pieces(item["arguments"]):
                yield event("response.function_call_arguments.delta", **where, delta=piece)
            yield event(
                "response.function_call_arguments.done",
                **where,
                name=item["name"],
                arguments=item["arguments"],
            )
        yield event("response.output_item.done", output_index=index, item=item)
    done = _response(reply, body, response_id, output=items, usage=_usage(reply))
    yield event("response.completed", response=done)
