"""The script a fake LLM answers from: ordered turns per conversation key, and the log of
every request received.

A turn is one model reply, a dict with exactly one of:

- ``{"text": "..."}``: a plain assistant answer (``end_turn`` / ``stop``). The text may
  hold ``{{tool_results}}``, replaced by the tool results the client sent back in this
  request (joined by a newline).
- ``{"tool_calls": [{"name": "...", "arguments": {...}, "id": "optional"}]}``: the model
  calls tools (``tool_use`` / ``tool_calls``). A ``"text"`` may go with it (said first).
- ``{"output": {...}}``: the final structured answer. Answered by calling the output tool
  the client offered (Pydantic AI's ``final_result``, or a tool named by ``"tool"``), or as
  JSON text when the request asked for native structured output (a JSON schema response
  format) or offered no output tool.
- ``{"error": {"status": 429, "message": "...", "type": "...", "retry_after": 0.01}}``: the
  request fails with that HTTP status and the provider's error body.

plus, on any turn, ``"usage": {"input": n, "output": m, "cache_read": k, "cache_write": w}``
(default 10 / 5 / 0 / 0). ``input`` is the request's total input tokens, cache reads and
writes included, as Pydantic AI reports ``RunUsage.input_tokens`` on every provider; each
provider's wire format splits it its own way (Anthropic's ``input_tokens`` excludes the
cached parts, OpenAI's ``prompt_tokens`` includes them). ``"expect_tool_result": "abc"``
makes the turn fail with a 400 unless a tool result sent back in this request contains
``abc``. ``"delay_s": 5`` answers only after that long (a slow model: a test can kill the
worker waiting on it).

The conversation key is the first ``[[fake:KEY]]`` marker in the request's system prompt
or instructions, then its messages or input; a request with none uses the key
``default``.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

MARKER = re.compile(r"\[\[fake:([A-Za-z0-9_.:/-]+)\]\]")
DEFAULT_KEY = "default"
KEY_FIELDS = ("system", "instructions", "messages", "input")
DEFAULT_USAGE = {"input": 10, "output": 5, "cache_read": 0, "cache_write": 0}
TURN_KINDS = ("text", "tool_calls", "output", "error")
TURN_FIELDS = {*TURN_KINDS, "usage", "tool", "expect_tool_result", "delay_s"}


def marker(key: str) -> str:
    """The text to put in a system prompt or message to select conversation ``key``."""
    return f"[[fake:{key}]]"


def conversation_key(body: Mapping[str, Any]) -> str:
    """The first ``[[fake:KEY]]`` marker in the prompt parts of a request body."""
    for name in KEY_FIELDS:
        if name in body:
            found = MARKER.search(json.dumps(body[name], ensure_ascii=False))
            if found:
                return found.group(1)
    return DEFAULT_KEY


def check_turn(turn: Any) -> dict[str, Any]:
    """``turn`` if it is a well-formed turn, else ``ValueError`` saying what is wrong."""
    if not isinstance(turn, dict):
        raise ValueError(f"a turn is a JSON object, got {turn!r}")
    unknown = set(turn) - TURN_FIELDS
    if unknown:
        raise ValueError(f"unknown turn fields {sorted(unknown)} in {turn!r}")
    kinds = [kind for kind in TURN_KINDS if kind in turn]
    if kinds not in (["text"], ["tool_calls"], ["text", "tool_calls"], ["output"], ["error"]):
        raise ValueError(
            f"a turn has one of text, tool_calls (optionally with text), output, error: {turn!r}"
        )
    for call in turn.get("tool_calls", []):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise ValueError(f"a tool call is {{'name': ..., 'arguments': {{...}}}}: {call!r}")
    if "error" in turn and not isinstance(turn["error"].get("status"), int):
        raise ValueError(f"an error turn needs an integer status: {turn!r}")
    unknown_usage = set(turn.get("usage", {})) - set(DEFAULT_USAGE)
    if unknown_usage:
        raise ValueError(f"unknown usage fields {sorted(unknown_usage)}: {turn!r}")
    return turn


@dataclass
class Usage:
    input: int
    output: int
    cache_read: int
    cache_write: int

    @property
    def uncached_input(self) -> int:
        return max(self.input - self.cache_read - self.cache_write, 0)


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.arguments, ensure_ascii=False)


@dataclass
class Reply:
    """A turn resolved against one request, in provider-neutral terms."""

    model: str
    text: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=lambda: Usage(**DEFAULT_USAGE))

    @property
    def stops_for_tools(self) -> bool:
        return bool(self.tool_calls)


@dataclass
class Failure:
    """An HTTP error to answer with (a scripted error turn, or a script problem)."""

    status: int
    message: str
    type: str | None = None
    retry_after: float | None = None


@dataclass
class RequestView:
    """What a provider module reads from a request for the turn to be resolved."""

    model: str
    tool_names: list[str]
    native_output: bool
    tool_results: list[str]


_ids = itertools.count(1)


def next_id(prefix: str) -> str:
    return f"{prefix}{next(_ids):06d}"


def resolve(turn: dict[str, Any], view: RequestView, call_prefix: str) -> Reply | Failure:
    """The reply ``turn`` makes to a request seen as ``view``."""
    if "error" in turn:
        error = turn["error"]
        return Failure(
            status=error["status"],
            message=error.get("message", f"scripted error {error['status']}"),
            type=error.get("type"),
            retry_after=error.get("retry_after"),
        )
    expected = turn.get("expect_tool_result")
    if expected is not None and not any(expected in result for result in view.tool_results):
        return Failure(
            400,
            f"fake LLM: expected a tool result containing {expected!r}, "
            f"the request sent back {view.tool_results!r}",
        )
    usage = Usage(**{**DEFAULT_USAGE, **turn.get("usage", {})})
    reply = Reply(model=view.model, usage=usage)
    if "output" in turn:
        tool = turn.get("tool") or next(
            (name for name in view.tool_names if name.startswith("final_result")), None
        )
        if view.native_output or tool is None:
            reply.text = json.dumps(turn["output"], ensure_ascii=False)
        else:
            reply.tool_calls = [ToolCall(next_id(call_prefix), tool, turn["output"])]
        return reply
    if "text" in turn:
        reply.text = turn["text"].replace("{{tool_results}}", "\n".join(view.tool_results))
    reply.tool_calls = [
        ToolCall(call.get("id") or next_id(call_prefix), call["name"], call.get("arguments", {}))
        for call in turn.get("tool_calls", [])
    ]
    return reply


def pieces(text: str, parts: int = 3) -> list[str]:
    """``text`` cut into up to ``parts`` consecutive pieces (for streamed deltas)."""
    if not text:
        return []
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


class Script:
    """Turns still to be answered and requests received, per conversation key (thread-safe)."""

    def __init__(self, turns: Mapping[str, Iterable[dict[str, Any]]] | None = None) -> None:
        self._lock = threading.Lock()
        self._turns: dict[str, deque[dict[str, Any]]] = {}
        self._requests: list[dict[str, Any]] = []
        for key, key_turns in (turns or {}).items():
            self.add(key, key_turns)

    def add(self, key: str, turns: Iterable[dict[str, Any]]) -> int:
        """Queue ``turns`` after those already scripted for ``key``; the number queued now."""
        checked = [check_turn(turn) for turn in turns]
        with self._lock:
            queue = self._turns.setdefault(key, deque())
            queue.extend(checked)
            return len(queue)

    def take(self, key: str) -> dict[str, Any] | None:
        """The next turn for ``key``, or None when none is left."""
        with self._lock:
            queue = self._turns.get(key)
            return queue.popleft() if queue else None

    def record(self, entry: dict[str, Any]) -> int:
        """Log a request; the number of requests now logged for its key."""
        with self._lock:
            self._requests.append(entry)
            return sum(1 for seen in self._requests if seen.get("key") == entry.get("key"))

    def requests(self, key: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(entry) for entry in self._requests if key is None or entry["key"] == key]

    def remaining(self) -> dict[str, int]:
        with self._lock:
            return {key: len(queue) for key, queue in self._turns.items() if queue}

    def reset(self) -> None:
        with self._lock:
            self._turns.clear()
            self._requests.clear()
