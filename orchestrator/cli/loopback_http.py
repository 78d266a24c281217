"""The few lines of HTTP/1.1 the thin `skillq run` speaks to the local API on 127.0.0.1.

Not urllib.request: importing it (http.client, email, ssl) is a large part of
the thin command's own start-up. The API is ours and on loopback, so this asks one
request per connection (``Connection: close``), reads to the end, and understands a
Content-Length or chunked body: all uvicorn sends.
"""

from __future__ import annotations

import socket


class NotConnected(OSError):
    """No connection was made: nothing was sent."""


class BrokeOff(OSError):
    """The request went out (or may have); its answer did not come back whole."""


def request(port: int, method: str, path: str, headers: dict[str, str],
            body: bytes | None, timeout_s: float) -> tuple[int, bytes]:
    """(status, body) of one request to 127.0.0.1:port."""
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
    except OSError as exc:
        raise NotConnected(str(exc)) from None
    payload = body or b""
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}",
             f"Content-Length: {len(payload)}", "Connection: close",
             *(f"{k}: {v}" for k, v in headers.items())]
    try:
        with sock:
            sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload)
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
    except OSError as exc:  # reset, timeout: the server may have acted on it
        raise BrokeOff(str(exc) or type(exc).__name__) from None
    return _parse(b"".join(chunks))


def _parse(raw: bytes) -> tuple[int, bytes]:
    head, sep, rest = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    parts = status_line.split(" ", 2)
    if not sep or len(parts) < 2 or not parts[0].startswith("HTTP/") \
            or not parts[1].isdigit():
        raise BrokeOff("not an HTTP response")
    fields = {k.strip().lower(): v.strip() for k, _, v in
              (line.partition(":") for line in header_lines)}
    if fields.get("transfer-encoding", "").lower() == "chunked":
        return int(parts[1]), _unchunk(rest)
    length = fields.get("content-length")
    if length is not None:
        if not length.isdigit() or len(rest) < int(length):
            raise BrokeOff("the answer was cut short")
        rest = rest[:int(length)]
    return int(parts[1]), rest


def _unchunk(data: bytes) -> bytes:
    out: list[bytes] = []
    while True:
        size_line, sep, data = data.partition(b"\r\n")
        try:
            size = int(size_line.split(b";")[0], 16)
        except ValueError:
            raise BrokeOff("a malformed chunked answer") from None
        if not sep or size == 0:
            return b"".join(out)
        if len(data) < size + 2:
            raise BrokeOff("the answer was cut short")
        out.append(data[:size])
        data = data[size + 2:]
