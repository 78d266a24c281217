"""A real MCP server (the MCP SDK's own MCPServer) with one tool, for the tests of
``requires.mcp``: ``python -m support.mcp_calc_server stdio`` talks over stdin/stdout,
``... http PORT`` serves streamable HTTP on 127.0.0.1:PORT/mcp.

``add`` answers the sum and, when the server was started with CALC_TOKEN in its
environment (a skillq secret handed over by SKILLQ_MCP_SERVERS), says that it had one,
never what it was. ``whoami`` answers the Authorization header's scheme over HTTP.
"""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("calc")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    token = "with a token" if os.environ.get("CALC_TOKEN") == "s3cret-calc" else "no token"
    return f"sum={a + b} ({token})"


def main() -> None:
    if sys.argv[1:2] == ["http"]:
        server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()


if __name__ == "__main__":
    main()
