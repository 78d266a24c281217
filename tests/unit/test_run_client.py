"""The thin `skillq run` client (orchestrator/cli/run_client.py) imports nothing heavy.

In a fresh interpreter, `skillq run NAME --json` against a local server speaking the
local API's wire format (orchestrator/api/app.py) must submit, follow and print the run
without importing shared.vault, pydantic, SQLAlchemy, Celery, kombu, psycopg,
cryptography or YAML: that is the whole point of the thin path (issue 14). The real API
on a real stack is tests/integration/test_api_run.py's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from orchestrator.api.apifile import ApiInfo, endpoints_key, write_api

HEAVY = ("shared.vault", "pydantic", "pydantic_settings", "sqlalchemy", "celery", "kombu",
         "psycopg", "cryptography", "yaml", "alembic", "orchestrator.connect",
         "orchestrator.launch",
         # stdlib, but a third of the thin command's start-up (loopback_http.py instead)
         "urllib.request", "http.client")
TOKEN = "unit-token"
RESULT = {"run_id": "run-unit", "state": "succeeded", "outputs": {"text": "hi"}}

PROBE = """
import json, sys
sys.argv = ["skillq", *json.loads(sys.argv[1])]
from orchestrator.cli.app import main
try:
    main()
except SystemExit as exc:
    print("exit", exc.code, file=sys.stderr)
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


class WireApi(BaseHTTPRequestHandler):
    """POST /v1/runs and GET /v1/runs/{id} as the local API answers them."""

    seen: ClassVar[list[tuple[str, str, Any]]] = []

    def _answer(self, status: int, data: Any) -> None:
        body = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append(("POST", self.path, body))
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._answer(401, {"error": "refused", "exit_code": 2})
        else:
            self._answer(201, {"run_id": "run-unit"})

    def do_GET(self) -> None:
        self.seen.append(("GET", self.path, None))
        self._answer(200, {"run_id": "run-unit", "state": "succeeded", "total": 1,
                           "done": 1, "counts": {}, "token": "x", "ended": True,
                           "result": RESULT, "success": "✓ echo succeeded (run run-unit)",
                           "failure": None})

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def wire_api(tmp_path: Path) -> Iterator[dict[str, str]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), WireApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLQ_")}
    env["SKILLQ_HOME"] = str(tmp_path / "home")
    (tmp_path / "home").mkdir(mode=0o700)
    write_api(tmp_path / "home", ApiInfo(port=server.server_address[1], token=TOKEN,
                                         pid=os.getpid(), endpoints=endpoints_key(env)))
    WireApi.seen = []
    try:
        yield env
    finally:
        server.shutdown()
        server.server_close()


def test_the_thin_path_imports_no_vault_pydantic_sqlalchemy_or_celery(
        wire_api: dict[str, str], tmp_path: Path) -> None:
    args = ["run", "echo", "--input", "text=hi", "--json", "--vault", "v"]
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args)], env=wire_api,
                          cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          check=False)
    *lines, modules = done.stderr.strip().splitlines()
    assert "exit 0" in lines or "exit None" in lines or not any(
        line.startswith("exit") for line in lines), done.stderr[-2000:]
    assert json.loads(done.stdout) == RESULT
    assert "run run-unit" in lines
    loaded = sorted(m for m in json.loads(modules)
                    if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert not loaded, f"the thin `skillq run` imported {loaded}"
    method, path, body = WireApi.seen[0]
    assert (method, path) == ("POST", "/v1/runs")
    assert body == {"skill": "echo", "vault": str(tmp_path / "v"), "pairs": ["text=hi"],
                    "inputs_file": None, "workdir": str(tmp_path), "triggered_by": "cli"}
