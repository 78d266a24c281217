"""A script's side of the dashboard over HTTP: basic auth, the cookie the dashboard
sets and the form token its pages carry (sent back in the x-skillq-csrf header), and a
stream's server-sent events. Shared by the dashboard tests that post forms as a script
would (tests/integration/test_dashboard_waits.py, test_dashboard_try.py)."""

from __future__ import annotations

import base64
import http.client
import json
import re
import urllib.parse
from dataclasses import dataclass
from email.message import Message
from typing import Any

TOKEN = re.compile(r'name="skillq-csrf" value="([0-9a-f]+)"')


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Message
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


class Client:
    def __init__(self, url: str, user: str, password: str, timeout_s: float = 120.0) -> None:
        self.port = urllib.parse.urlsplit(url).port
        self.basic = base64.b64encode(f"{user}:{password}".encode()).decode()
        self.timeout_s = timeout_s
        self.cookie = ""
        self.token = ""

    def _open(self, method: str, path: str, body: bytes | None,
              headers: dict[str, str] | None) -> tuple[http.client.HTTPConnection,
                                                       http.client.HTTPResponse]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout_s)
        sent = {"Authorization": "Basic " + self.basic, **(headers or {})}
        if self.cookie:
            sent["Cookie"] = self.cookie
        conn.request(method, path, body=body, headers=sent)
        return conn, conn.getresponse()

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> Reply:
        conn, response = self._open(method, path, body, headers)
        try:
            reply = Reply(response.status, response.headers,
                          response.read().decode(errors="replace"))
        finally:
            conn.close()
        cookie = reply.headers.get("set-cookie")
        if cookie:
            self.cookie = cookie.split(";")[0]
        found = TOKEN.search(reply.text)
        if found:
            self.token = found[1]
        return reply

    def get(self, path: str, headers: dict[str, str] | None = None) -> Reply:
        return self.request("GET", path, headers=headers)

    def post(self, path: str, fields: dict[str, str], headers: dict[str, str] | None = None,
             *, token: bool = True) -> Reply:
        """A form's POST; ``token=False`` leaves the form token out (to be refused)."""
        assert self.token, "get a page with a form first: it carries the token"
        return self.request("POST", path, urllib.parse.urlencode(fields).encode(), {
            "Content-Type": "application/x-www-form-urlencoded",
            **({"x-skillq-csrf": self.token} if token else {}), **(headers or {})})

    def events(self, path: str) -> list[tuple[str, dict[str, Any]]]:
        """A stream's server-sent events, read until its end."""
        conn, response = self._open("GET", path, None, None)
        found: list[tuple[str, dict[str, Any]]] = []
        try:
            assert response.status == 200, response.read()[:2000]
            assert response.headers["content-type"].startswith("text/event-stream")
            name = ""
            for raw in response:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    name = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    found.append((name, json.loads(line.removeprefix("data: "))))
        finally:
            conn.close()
        return found
