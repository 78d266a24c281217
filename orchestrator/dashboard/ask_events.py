"""The Ask page's answer as server-sent events: the pieces orchestrator/ask.py's
``AnswerStream`` hears, relayed to the browser, then one final event from the run's record.

``GET /ask/runs/RUN/stream`` answers ``text/event-stream``:

- ``piece``: ``{"text"}``, each piece of answer text as the worker NOTIFYs it;
- ``state``: ``{"state"}``, whenever the run's state changes (read every POLL_S);
- ``final``: ``{"run_id", "state", "error", "answer", "rest", "tokens_in", "tokens_out",
  "cost_usd"}`` once the run has ended, where ``rest`` is what of the recorded answer the
  pieces did not show (``AnswerStream.finish``, as `skillq ask` prints it), so a piece
  missed is made good; then the response ends.

One ``AnswerStream`` (a LISTEN connection and its thread) serves one stream request and is
finished when the request ends, however it ends: the run over, the client gone (its
disconnect, or a send that fails), the server stopping. The stream a POST /ask started
before the run existed is held here until the page's stream request takes it (``Held``,
``PendingStreams``), as `skillq ask` listens before it starts the run: the first pieces may
come before the browser has asked for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
from sqlalchemy.exc import SQLAlchemyError
from starlette.types import Receive, Scope, Send

from orchestrator.ask import AnswerStream, usage_of
from orchestrator.dashboard.context import Dashboard
from shared.db.models import PipelineRun
from shared.states import RunState
from shared.store import unpack

POLL_S = 0.5  # how often the run's state is read while pieces are awaited
KEEPALIVE_S = 5.0  # a comment this often when idle: a gone client shows as a failed send
CLAIM_S = 30.0  # how long a started ask's stream waits for the page to take it


class Relay:
    """Pieces from the AnswerStream's thread to the event loop, in the order heard."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.queue: asyncio.Queue[str] = asyncio.Queue()

    def write(self, text: str) -> None:  # called on the AnswerStream's thread
        # RuntimeError: the loop is closed, the server stopping; nobody is left to tell.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self.queue.put_nowait, text)

    def drain(self) -> list[str]:
        found = []
        while not self.queue.empty():
            found.append(self.queue.get_nowait())
        return found


@dataclass
class Held:
    stream: AnswerStream
    relay: Relay


class PendingStreams:
    """Streams started with their ask, by run id, until the page's stream request takes
    one; a stream not taken within CLAIM_S (the page went away after Send) is finished.
    Used on the event loop only, so it needs no lock."""

    def __init__(self) -> None:
        self._held: dict[str, Held] = {}

    def hold(self, run_id: str, held: Held) -> None:
        asyncio.get_running_loop().call_later(CLAIM_S, self._expire, run_id, held)
        self._held[run_id] = held

    def take(self, run_id: str) -> Held | None:
        return self._held.pop(run_id, None)

    def _expire(self, run_id: str, held: Held) -> None:
        if self._held.get(run_id) is held:
            del self._held[run_id]
            # finish() joins the listening thread: not on the loop
            asyncio.get_running_loop().run_in_executor(None, held.stream.finish, None)


def event(name: str, data: dict[str, Any]) -> bytes:
    # json.dumps writes no raw newline, so the data is one `data:` line
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


class AnswerEvents:
    """The ASGI response of one stream request (a class of its own rather than a
    StreamingResponse: the AnswerStream must be finished when the client goes away, and a
    generator abandoned mid-iteration is only closed whenever it is collected)."""

    def __init__(self, dash: Dashboard, run_id: str, held: Held | None) -> None:
        self.dash = dash
        self.run_id = run_id
        self.held = held

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        held = self.held
        try:
            if scope.get("method") == "HEAD":
                await send(self._start())
                await send({"type": "http.response.body", "body": b""})
                return
            if held is None:  # a reload, or another tab: pieces from now on, then the rest
                held = await anyio.to_thread.run_sync(self._listen, asyncio.get_running_loop())
            await _until_gone(receive, lambda: self._relay(held, send))
        finally:
            if held is not None:
                with anyio.CancelScope(shield=True):  # also when cancelled by the disconnect
                    await anyio.to_thread.run_sync(held.stream.finish, None)

    def _listen(self, loop: asyncio.AbstractEventLoop) -> Held:
        relay = Relay(loop)
        stream = AnswerStream(self.dash.config.database_url, relay.write)
        stream.follow(self.run_id)
        return Held(stream, relay)

    @staticmethod
    def _start() -> dict[str, Any]:
        return {"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]}

    async def _relay(self, held: Held, send: Send) -> None:
        async def body(chunk: bytes) -> None:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})

        await send(self._start())
        await body(f": answer of run {self.run_id}\n\n".encode())  # opens the EventSource
        state: str | None = None
        next_look = 0.0
        quiet_since = time.monotonic()
        while True:
            # The state first: a run already over (a reload) ends at once.
            if time.monotonic() >= next_look:
                next_look = time.monotonic() + POLL_S
                try:
                    now = await anyio.to_thread.run_sync(self._state)
                except SQLAlchemyError:
                    pass  # an outage: the run goes on without us, as wait_run waits it out
                else:
                    if now != state:
                        state = now
                        await body(event("state", {"state": now}))
                        quiet_since = time.monotonic()
                    if now is None or RunState(now).terminal:
                        break
            piece = None
            with anyio.move_on_after(POLL_S):
                piece = await held.relay.queue.get()
            if piece is not None:
                await body(event("piece", {"text": piece}))
                quiet_since = time.monotonic()
            if time.monotonic() - quiet_since > KEEPALIVE_S:
                await body(b": keepalive\n\n")
                quiet_since = time.monotonic()
        final = await anyio.to_thread.run_sync(self._final, held.stream)
        # Pieces heard before finish() stopped the stream are what its `rest` counts as
        # shown: they go out first.
        for piece in held.relay.drain():
            await body(event("piece", {"text": piece}))
        await body(event("final", final))
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def _state(self) -> str | None:
        with self.dash.db() as session:
            run = session.get(PipelineRun, self.run_id)
            return None if run is None else str(run.state)

    def _final(self, stream: AnswerStream) -> dict[str, Any]:
        with self.dash.db() as session:
            run = session.get(PipelineRun, self.run_id)
            if run is None:
                return {"run_id": self.run_id, "state": None, "error": "the run's record is "
                        "gone", "answer": None, "rest": stream.finish(None), "tokens_in": 0,
                        "tokens_out": 0, "cost_usd": 0.0}
            outputs = None if run.outputs is None else unpack(session, run.outputs)
            state, error = str(run.state), run.error
        answer = outputs.get("answer") if isinstance(outputs, dict) else None
        answer = answer if isinstance(answer, str) else None
        usage = usage_of(self.dash.conn, self.run_id)
        return {"run_id": self.run_id, "state": state, "error": error, "answer": answer,
                "rest": stream.finish(answer), "tokens_in": usage.tokens_in,
                "tokens_out": usage.tokens_out, "cost_usd": usage.cost_usd}


async def _until_gone(receive: Receive, work: Callable[[], Awaitable[None]]) -> None:
    """Run ``work`` until it returns or the client disconnects, whichever comes first; a
    send to a client already gone (OSError) ends it too."""
    async with anyio.create_task_group() as group:
        async def working() -> None:
            with contextlib.suppress(OSError):  # the client went away mid-send
                await work()
            group.cancel_scope.cancel()

        async def watching() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            group.cancel_scope.cancel()

        group.start_soon(working)
        group.start_soon(watching)
