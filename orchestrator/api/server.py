"""Serving the local API: bind 127.0.0.1, record the port and a fresh token in
SKILLQ_HOME/api.json, serve until SIGTERM or Ctrl-C, then remove the record.

The socket listens, and uvicorn has taken over SIGTERM and SIGINT, before api.json names
it: a client that finds the file is never refused, and a signal sent to the pid it names
(`skillq down`) meets uvicorn's handler, never a half-started loop. The record goes when
the server stops (if it still holds this server's token),
and a client that finds a stale one falls back to submitting runs itself. uvicorn, once
it has shut down on a signal, raises that signal again under the handler it found:
SIGTERM's default would end the process there, before the record goes, so serve()
installs one that exits through its cleanup (exit status 143, as a SIGTERM'd process).
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
from pathlib import Path
from types import FrameType

from orchestrator.api.apifile import ApiInfo, remove_api, write_api
from orchestrator.connect import Connection

HOST = "127.0.0.1"  # loopback only: the API trusts paths its client names (api/runs.py)
GRACE_S = 1  # open long-polls are cut after this on shutdown; their clients ask again


def bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def serve(conn: Connection, sock: socket.socket, home: Path, endpoints: str) -> None:
    import uvicorn

    from orchestrator.api.app import create_app
    from orchestrator.api.run_ends import RunEnds

    port = int(sock.getsockname()[1])
    token = secrets.token_urlsafe(32)
    ends = RunEnds(conn.endpoints.database_url)
    ends.start()
    config = uvicorn.Config(create_app(conn, ends, token, port), log_level="warning",
                            access_log=False, timeout_graceful_shutdown=GRACE_S)
    home.mkdir(mode=0o700, parents=True, exist_ok=True)

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:  # inside uvicorn's capture_signals: its handlers hold now
                write_api(home, ApiInfo(port=port, token=token, pid=os.getpid(),
                                        endpoints=endpoints))

    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # what uvicorn hands it back to
    try:
        Server(config).run(sockets=[sock])
    finally:
        remove_api(home, token)
        ends.stop()


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)
