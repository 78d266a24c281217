"""Handles on a fake LLM server: ``FakeLLMClient`` talks to one already running (over its
control endpoints), ``FakeLLM`` starts one in this process, ``FakeLLMProcess`` starts one
as a subprocess (for tests whose model requests come from other processes, e.g. Celery
workers: give those processes ``env()``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Self

from .script import Script, marker

PACKAGE_DIR = Path(__file__).resolve().parent


class FakeLLMClient:
    """Script a running fake LLM and read what it received, over HTTP."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    # Base URLs the way each SDK wants them: the Anthropic SDK appends /v1/messages, the
    # OpenAI SDK appends /chat/completions or /responses to a base ending in /v1.
    @property
    def anthropic_base_url(self) -> str:
        return self.url

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    def env(self) -> dict[str, str]:
        """Environment variables pointing the SDKs (and Pydantic AI) here, with dummy keys."""
        return {
            "ANTHROPIC_BASE_URL": self.anthropic_base_url,
            "ANTHROPIC_API_KEY": "sk-ant-fake",
            "OPENAI_BASE_URL": self.openai_base_url,
            "OPENAI_API_KEY": "sk-fake",
        }

    @staticmethod
    def marker(key: str) -> str:
        return marker(key)

    def _call(self, method: str, path: str, payload: Any = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return json.load(response)
        except urllib.error.HTTPError as exc:
            raise ValueError(f"{method} {path}: {exc.code} {exc.read().decode()}") from exc

    def script(self, key: str, *turns: dict[str, Any]) -> int:
        """Queue ``turns`` for conversation ``key``; the number now queued for it."""
        return int(self._call("POST", "/_script", {"key": key, "turns": list(turns)})["queued"])

    def load(self, script: dict[str, Iterable[dict[str, Any]]]) -> None:
        """Queue a whole script: ``{key: [turn, ...]}``."""
        for key, turns in script.items():
            self.script(key, *turns)

    def requests(self, key: str | None = None) -> list[dict[str, Any]]:
        """Every model request received (for ``key``, or all), oldest first."""
        query = "" if key is None else "?" + urllib.parse.urlencode({"key": key})
        return list(self._call("GET", "/_requests" + query)["requests"])

    def bodies(self, key: str | None = None) -> list[dict[str, Any]]:
        return [entry["body"] for entry in self.requests(key)]

    def tool_results(self, key: str) -> list[list[str]]:
        """Per request for ``key``, the tool results the client sent back in it."""
        from .server import API_BY_NAME

        return [
            API_BY_NAME[entry["api"]].view(entry["body"]).tool_results
            for entry in self.requests(key)
        ]

    def remaining(self) -> dict[str, int]:
        """Turns scripted but not yet answered, per key."""
        return dict(self._call("GET", "/_remaining")["remaining"])

    def reset(self) -> None:
        self._call("POST", "/_reset", {})


class FakeLLM(FakeLLMClient):
    """A fake LLM server on 127.0.0.1:<free port> in a thread of this process.

    >>> with FakeLLM({"greet": [{"text": "hello"}]}) as llm:
    ...     client = anthropic.Anthropic(base_url=llm.anthropic_base_url, api_key="x")
    """

    def __init__(
        self,
        script: dict[str, Iterable[dict[str, Any]]] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        verbose: bool = False,
    ) -> None:
        from .server import FakeLLMServer

        self._script = Script(script)
        self._server = FakeLLMServer(host, port, self._script, verbose=verbose)
        super().__init__(self._server.url)

    def __enter__(self) -> Self:
        self._server.start_in_thread()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.stop()


class FakeLLMProcess(FakeLLMClient):
    """A fake LLM server as a subprocess (``python tests/support/fake_llm``)."""

    def __init__(
        self,
        script_file: str | os.PathLike[str] | None = None,
        port: int = 0,
        verbose: bool = False,
    ) -> None:
        self._argv = [sys.executable, str(PACKAGE_DIR), "--port", str(port)]
        if script_file is not None:
            self._argv += ["--script", str(script_file)]
        if verbose:
            self._argv.append("--verbose")
        self.process: subprocess.Popen[str] | None = None
        super().__init__("http://127.0.0.1:0")

    def __enter__(self) -> Self:
        self.process = subprocess.Popen(
            self._argv, stdout=subprocess.PIPE, text=True, start_new_session=True
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # "fake-llm listening on http://127.0.0.1:N"
        if "listening on " not in line:
            self.process.kill()
            raise RuntimeError(f"fake LLM process did not start: {line!r}")
        self.url = line.rsplit(" ", 1)[1].strip()
        deadline = time.monotonic() + 10
        while True:
            try:
                self._call("GET", "/_health")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
