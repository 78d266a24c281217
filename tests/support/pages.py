"""Web pages a test serves on the loopback: a browser step's target, a planner's docs.

``HtmlPages`` answers GET with ``page`` (a subclass overrides ``do_GET`` or ``page``), and
``send_html`` is its one way to answer; ``serving(Handler)`` runs a threaded server on a
free port for the block and yields its base URL."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class HtmlPages(BaseHTTPRequestHandler):
    page = ""

    def do_GET(self) -> None:
        self.send_html(self.page)

    def send_html(self, body: str) -> None:
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: object) -> None:
        pass  # a test's output is its own


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
