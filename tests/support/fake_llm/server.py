"""The HTTP server: routes provider endpoints to their wire format, and serves the control
endpoints (POST /_script, GET /_requests, GET /_remaining, POST /_reset).

Run in-process with ``FakeLLM`` (see ``client.py``) or standalone with
``python tests/support/fake_llm --port N --script FILE``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import ModuleType
from typing import Any
from urllib.parse import parse_qs, urlsplit

from . import anthropic, openai_chat, openai_responses
from .script import Failure, Script, conversation_key, resolve

APIS: dict[str, ModuleType] = {
    "/v1/messages": anthropic,
    "/v1/chat/completions": openai_chat,
    "/v1/responses": openai_responses,
}
# The same routes without the /v1 prefix, for clients given a base URL ending in /v1.
APIS.update({path.removeprefix("/v1"): api for path, api in list(APIS.items())})
API_BY_NAME: dict[str, ModuleType] = {api.NAME: api for api in APIS.values()}
MODELS = ("claude-haiku-4-5", "gpt-4.1-mini", "llama3")


def _models() -> dict[str, Any]:
    """A model list both SDKs read (OpenAI's list fields and Anthropic's page fields)."""
    data = [
        {
            "id": name,
            "object": "model",
            "type": "model",
            "created": 0,
            "created_at": "2025-01-01T00:00:00Z",
            "owned_by": "fake-llm",
            "display_name": name,
        }
        for name in MODELS
    ]
    return {
        "object": "list",
        "data": data,
        "has_more": False,
        "first_id": data[0]["id"],
        "last_id": data[-1]["id"],
    }


class Handler(BaseHTTPRequestHandler):
    # Small replies on a kept-alive connection: without it Nagle's algorithm meets the
    # client's delayed ACK and most requests stall ~40 ms.
    disable_nagle_algorithm = True

    protocol_version = "HTTP/1.1"
    server_version = "fake-llm/1"
    timeout = 60  # an idle keep-alive connection is dropped after this
    server: FakeLLMServer

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    # -- plumbing ---------------------------------------------------------------------------

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else {}

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, events: Iterator[bytes], headers: dict[str, str]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        for event in events:
            self.wfile.write(b"%X\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    # -- routes -----------------------------------------------------------------------------

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        script = self.server.script
        if url.path in ("/v1/models", "/models"):
            self._send_json(200, _models())
        elif url.path == "/_requests":
            key = parse_qs(url.query).get("key", [None])[0]
            self._send_json(200, {"requests": script.requests(key)})
        elif url.path == "/_remaining":
            self._send_json(200, {"remaining": script.remaining()})
        elif url.path == "/_health":
            self._send_json(200, {"ok": True})
        else:
            self._send_json(404, {"error": {"message": f"fake LLM: no route GET {url.path}"}})

    def do_POST(self) -> None:
        url = urlsplit(self.path)
        try:
            body = self._body()
        except ValueError as exc:
            self._send_json(400, {"error": {"message": f"fake LLM: body is not JSON: {exc}"}})
            return
        if url.path == "/_script":
            self._script(body)
        elif url.path == "/_reset":
            self.server.script.reset()
            self._send_json(200, {"ok": True})
        elif url.path in APIS:
            self._model_request(APIS[url.path], url.path, body)
        else:
            self._send_json(404, {"error": {"message": f"fake LLM: no route POST {url.path}"}})

    def _script(self, body: Any) -> None:
        try:
            if not isinstance(body, dict) or not isinstance(body.get("key"), str):
                raise ValueError('POST /_script takes {"key": "...", "turns": [...]}')
            queued = self.server.script.add(body["key"], body.get("turns", []))
        except (ValueError, AttributeError) as exc:
            self._send_json(400, {"error": {"message": f"fake LLM: {exc}"}})
            return
        self._send_json(200, {"key": body["key"], "queued": queued})

    def _model_request(self, api: ModuleType, path: str, body: dict[str, Any]) -> None:
        script = self.server.script
        key = conversation_key(body)
        seen = script.record(
            {
                "key": key,
                "api": api.NAME,
                "method": "POST",
                "path": self.path,
                "stream": bool(body.get("stream")),
                "body": body,
                "at": time.time(),
            }
        )
        turn = script.take(key)
        request_id = {"request-id": f"req_fake_{seen}", "x-request-id": f"req_fake_{seen}"}
        if turn is None:
            failure = Failure(
                400,
                f"fake LLM: no scripted turn left for key {key!r} "
                f"(request {seen} for this key, {api.NAME} {path}); "
                f'queue turns with POST /_script {{"key": "{key}", "turns": [...]}}',
            )
            self._send_json(400, api.error(failure), request_id)
            return
        if turn.get("delay_s"):  # a model slow to answer: time to kill a worker mid-request
            time.sleep(float(turn["delay_s"]))
        reply = resolve(turn, api.view(body), api.CALL_PREFIX)
        if isinstance(reply, Failure):
            headers = dict(request_id)
            if reply.retry_after is not None:
                headers["retry-after-ms"] = str(int(reply.retry_after * 1000))
                headers["retry-after"] = str(max(1, round(reply.retry_after)))
            self._send_json(reply.status, api.error(reply), headers)
        elif body.get("stream"):
            self._send_stream(api.stream(reply, body), request_id)
        else:
            self._send_json(200, api.render(reply, body), request_id)


class FakeLLMServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str, port: int, script: Script, verbose: bool = False) -> None:
        super().__init__((host, port), Handler)
        self.script = script
        self.verbose = verbose
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def start_in_thread(self) -> None:
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
