"""OpenAI Chat Completions (POST /v1/chat/completions), also what OpenAI-compatible local
servers (Ollama, llama.cpp, vLLM) speak: a ChatCompletion, or chat.completion.chunk events
ending with ``data: [DONE]`` (a usage chunk first when ``stream_options.include_usage``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from .openai_common import error, sse, text_of
from .script import Reply, RequestView, next_id, pieces

NAME = "openai-chat"
CALL_PREFIX = "call_fake"
__all__ = ["error", "render", "stream", "view"]


def view(body: dict[str, Any]) -> RequestView:
    messages = body.get("messages") or []
    results: list[str] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        results.insert(0, text_of(message.get("content", "")))
    response_format = body.get("response_format") or {}
    return RequestView(
        model=body.get("model", "gpt-fake"),
        tool_names=[
            (tool.get("function") or {}).get("name", "") for tool in body.get("tools") or []
        ],
        native_output=response_format.get("type") in ("json_schema", "json_object"),
        tool_results=results,
    )


def _usage(reply: Reply) -> dict[str, Any]:
    usage = reply.usage
    return {
        "prompt_tokens": usage.input,
        "completion_tokens": usage.output,
        "total_tokens": usage.input + usage.output,
        "prompt_tokens_details": {
            "cached_tokens": usage.cache_read,
            "cache_write_tokens": usage.cache_write,
            "audio_tokens": 0,
        },
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _finish_reason(reply: Reply) -> str:
    return "tool_calls" if reply.stops_for_tools else "stop"


def _tool_calls(reply: Reply) -> list[dict[str, Any]]:
    return [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments_json},
        }
        for call in reply.tool_calls
    ]


def _envelope(
    reply: Reply, completion_id: str, obj: str, choices: list[dict[str, Any]], **extra: Any
) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": obj,
        "created": int(time.time()),
        "model": reply.model,
        "system_fingerprint": "fp_fake",
        "service_tier": "default",
        "choices": choices,
        **extra,
    }


def render(reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = _tool_calls(reply)
    choice = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": _finish_reason(reply),
    }
    return _envelope(
        reply, next_id("chatcmpl-fake"), "chat.completion", [choice], usage=_usage(reply)
    )


def stream(reply: Reply, body: dict[str, Any]) -> Iterator[bytes]:
    completion_id = next_id("chatcmpl-fake")
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        extra = {"usage": None} if include_usage else {}
        return sse(_envelope(reply, completion_id, "chat.completion.chunk", [choice], **extra))

    yield chunk({"role": "assistant", "content": "", "refusal": None})
    for piece in pieces(reply.text or ""):
        yield chunk({"content": piece})
    for index, call in enumerate(_tool_calls(reply)):
        head = {**call, "function": {"name": call["function"]["name"], "arguments": ""}}
        yield chunk({"tool_calls": [{"index": index, **head}]})
        for piece in pieces(call["function"]["arguments"]):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, _finish_reason(reply))
    if include_usage:
        yield sse(_envelope(reply, completion_id, "chat.completion.chunk", [], usage=_usage(reply)))
    yield sse("[DONE]")
