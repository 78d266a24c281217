"""`skillq mcp`: the vault's library and pipelines for MCP clients (Claude Code, Claude
Desktop, Cursor, Codex), through the official `mcp` SDK. docs/mcp.md shows the clients'
configuration."""
