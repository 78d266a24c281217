"""`skillq mcp`: the library and its pipelines for MCP clients (docs/mcp.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from orchestrator.cli.common import VaultOption, err, vault_path


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp)


def mcp(
    http: Annotated[bool, typer.Option(
        "--http", help="Serve streamable HTTP on --host/--port instead of stdio.")] = False,
    host: Annotated[str, typer.Option(help="With --http: the address to listen on. Anything "
                                      "but loopback needs SKILLQ_DASHBOARD_AUTH=USER:PASSWORD."
                                      )] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="With --http: the port.")] = 8767,
    vault_opt: VaultOption = None,
) -> None:
    """Serve the vault's skills to MCP clients: list, load and run skills, file notes."""
    from orchestrator.dashboard.config import check_bind, credentials_from_env
    from orchestrator.dashboard.hosts import host_policy
    from orchestrator.mcp.server import build
    from shared.settings import get_settings

    settings = get_settings()
    root = vault_path(vault_opt).expanduser().resolve()
    if not root.is_dir():
        from shared.errors import VaultError

        raise VaultError(f"no vault at {root}: pass --vault DIR (a folder of skill folders)")
    if not http:
        # stdout is the protocol's: everything said goes to stderr.
        build(root, settings.discovery_ttl_s).run("stdio")
        return
    credentials = credentials_from_env()
    check_bind(host, credentials)
    policy = host_policy(host, port, settings.dashboard_hosts)
    import uvicorn

    from orchestrator.mcp.http import PATH, Guard

    server = build(root, settings.discovery_ttl_s)
    app = Guard(server.streamable_http_app(streamable_http_path=PATH, host=host),
                credentials, policy)
    shown = f"[{host}]" if ":" in host else host
    err.print(f"skillq mcp on http://{shown}:{port}{PATH} (vault {root}"
              f"{'; basic auth on' if credentials else ''}); Ctrl-C stops it", markup=False)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
