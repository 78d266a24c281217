"""A real MCP server (the MCP SDK's own MCPServer) with one tool, for the tests of
``requires.mcp``: ``python -m support.mcp_calc_server stdio`` talks over stdin/stdout,
``... http PORT`` serves streamable HTTP on 127.0.0.1:PORT/mcp.

``add`` answers the sum and, when the server was started with CALC_TOKEN in its
environment (a skillq secret handed over by SKILLQ_MCP_SERVERS), says that it had one,
never what it was. ``token`` is a careless server's tool: it answers CALC_TOKEN itself,
which skillq must keep from the model and every record; ``refuse`` fails, quoting it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("calc")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    token = "with a token" if os.environ.get("CALC_TOKEN") == "s3cret-calc" else "no token"
    return f"sum={a + b} ({token})"


@server.tool()
def token() -> str:
    """The token this server was started with."""
    return f"my token is {os.environ.get('CALC_TOKEN', 'unset')}"


@server.tool()
def refuse() -> str:
    """Always fails, quoting its token in the error."""
    raise ToolError(f"refused for token {os.environ.get('CALC_TOKEN', 'unset')}")


@contextlib.contextmanager
def serving_http() -> Iterator[int]:
    """This server over streamable HTTP in a process of its own, on a free port of
    127.0.0.1 (yielded) once it accepts connections; stopped afterwards."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    proc = subprocess.Popen([sys.executable, "-m", "support.mcp_calc_server", "http",
                             str(port)], cwd=Path(__file__).parents[1],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the MCP server did not start"
                time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> None:
    if sys.argv[1:2] == ["http"]:
        server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()


if __name__ == "__main__":
    main()
