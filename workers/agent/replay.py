"""Durable turns: every model request of an agent step is recorded, and replayed.

An agent step may run more than once: a redelivered message, a retry, a worker killed
mid-step. Each model request is paid for once: ``RecordedModel`` wraps the real model,
and before sending request number N of this step item it looks for turn N in the
records. A recorded turn whose request had the same history (``request_digest``) is
returned as it was answered, with no request sent; otherwise the request goes out and
its response is recorded before the agent sees it. So a run that starts again from the
top replays what was paid for and continues where the record ends.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

# What identifies a request's history: the parts' kinds, text, tool names, arguments and
# call ids (a replayed response keeps its call ids). Timestamps, run ids and usage differ
# on every run and say nothing about what was asked.
_PART_KEYS = ("part_kind", "content", "tool_name", "args", "tool_call_id")


@dataclass(frozen=True, slots=True)
class Turn:
    """One recorded model request and its answer."""

    index: int
    digest: str
    response: dict[str, Any]  # a ModelResponse as JSON (ModelMessagesTypeAdapter)
    model_requested: str
    model_served: str | None
    tokens_in: int
    tokens_out: int
    cache_read: int
    cache_write: int
    cost_usd: float
    duration_ms: float
    stop_reason: str | None


class TurnStore(Protocol):
    def recorded(self, index: int) -> Turn | None: ...

    def record(self, turn: Turn) -> None: ...

    def before_request(self, index: int) -> None:
        """Called before a request is paid for: raise to refuse it (a budget spent)."""


def request_digest(messages: Sequence[ModelMessage]) -> str:
    dumped = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
    canonical = [{"kind": m.get("kind"), "parts": [
        {k: p[k] for k in _PART_KEYS if p.get(k) is not None} for p in m.get("parts", [])]}
        for m in dumped]
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def response_json(response: ModelResponse) -> dict[str, Any]:
    dumped: dict[str, Any] = ModelMessagesTypeAdapter.dump_python([response], mode="json")[0]
    return dumped


def response_of(stored: dict[str, Any]) -> ModelResponse:
    message = ModelMessagesTypeAdapter.validate_python([stored])[0]
    assert isinstance(message, ModelResponse)
    return message


def cost_of(response: ModelResponse) -> float:
    """The response's price by genai-prices; 0 for a model it has no price for (a local
    server), which is what such a model costs."""
    try:
        return float(response.cost().total_price)
    except (LookupError, ValueError, AssertionError):
        return 0.0


class RecordedModel(WrapperModel):
    """The step's model: recorded turns replayed, new ones paid for and recorded."""

    def __init__(self, wrapped: Any, store: TurnStore, requested: str, *,
                 on_text: Callable[[str], None] | None = None) -> None:
        super().__init__(wrapped)
        self.store = store
        self.requested = requested
        self.on_text = on_text  # given each piece of answer text as it streams in
        self._texted = False
        self.sent = 0  # requests that reached the provider in this run
        self.replayed = 0
        self._next = 0

    async def request(self, messages: list[ModelMessage], model_settings: ModelSettings | None,
                      model_request_parameters: ModelRequestParameters) -> ModelResponse:
        index, self._next = self._next, self._next + 1
        digest = request_digest(messages)
        hit = self.store.recorded(index)
        if hit is not None and hit.digest == digest:
            self.replayed += 1
            return response_of(hit.response)
        self.store.before_request(index)
        started = time.monotonic()
        if self.on_text is None:
            response = await super().request(messages, model_settings,
                                             model_request_parameters)
        else:
            response = await self._streamed(messages, model_settings,
                                            model_request_parameters, self.on_text)
        usage = response.usage
        self.store.record(Turn(
            index=index, digest=digest, response=response_json(response),
            model_requested=self.requested, model_served=response.model_name,
            tokens_in=usage.input_tokens, tokens_out=usage.output_tokens,
            cache_read=usage.cache_read_tokens, cache_write=usage.cache_write_tokens,
            cost_usd=cost_of(response), duration_ms=(time.monotonic() - started) * 1000,
            stop_reason=response.finish_reason))
        self.sent += 1
        return response

    async def _streamed(self, messages: list[ModelMessage], model_settings: ModelSettings | None,
                        params: ModelRequestParameters, on_text: Callable[[str], None]
                        ) -> ModelResponse:
        """The same request, streamed: its text handed on as it arrives, the whole
        response returned as ``request`` would (and recorded the same way). A replayed
        turn streams nothing: its text is in the run's record."""
        first = True
        async with super().request_stream(messages, model_settings, params) as stream:
            async for event in stream:
                if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
                    piece = event.part.content
                elif isinstance(event, PartDeltaEvent) and \
                        isinstance(event.delta, TextPartDelta):
                    piece = event.delta.content_delta
                else:
                    continue
                if piece:
                    if first and self._texted:  # a later turn's text: a paragraph of its own
                        on_text("\n\n")
                    first, self._texted = False, True
                    on_text(piece)
            return stream.get()
