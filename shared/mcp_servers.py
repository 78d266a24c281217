"""The MCP servers a daemon can reach (SKILLQ_MCP_SERVERS), for agent steps whose skill
says ``requires: {mcp: [NAME, ...]}``.

The setting is one JSON object, a server a key::

    {"rube": {"url": "https://rube.app/mcp",
              "headers": {"Authorization": "Bearer ${secret:rube_token}"}},
     "files": {"command": ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv"],
               "env": {"TOKEN": "${secret:files_token}"}}}

A server is a stdio ``command`` (argv, first the program) or a streamable HTTP ``url``.
Credentials go in ``env`` (stdio) or ``headers`` (HTTP), as ``${secret:NAME}``: the
skillq secret NAME (shared/secrets.py: SKILLQ_SECRET_NAME or the secrets file), read by
the worker when a step opens the server. Each worker announces the servers it declares,
their names only: never a command, URL, headers or secrets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.errors import ConfigError

SETTING = "SKILLQ_MCP_SERVERS"
# A server's name prefixes its tools' names for the model (``rube_SEARCH``), and
# providers take tool names of [A-Za-z0-9_-] only.
NAME = r"[A-Za-z][A-Za-z0-9_-]{0,31}"
SECRET_REF = re.compile(r"\$\{secret:([A-Za-z_][A-Za-z0-9_]*)\}")
SHAPE = ('{"NAME": {"command": ["program", "arg", ...]} or {"url": "https://..."}}, '
         'with optional "env" (command) or "headers" (url) whose values may say '
         '${secret:NAME}')


class _Server(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StdioServer(_Server):
    """A server skillq starts as a process and talks to over its stdin and stdout."""
    command: tuple[Annotated[str, Field(min_length=1)], ...] = Field(min_length=1)
    env: Mapping[str, str] = Field(default_factory=dict)
    cwd: str | None = None


class HttpServer(_Server):
    """A server reached over MCP's streamable HTTP transport."""
    url: Annotated[str, Field(pattern=r"^https?://\S+$")]
    headers: Mapping[str, str] = Field(default_factory=dict)


McpServer = StdioServer | HttpServer


def parse_servers(text: str) -> dict[str, McpServer]:
    """The servers SKILLQ_MCP_SERVERS declares (empty: none); ConfigError in one line
    naming the setting, what is wrong and the shape it takes. The value is never quoted
    back: it may hold a credential written in place of a ${secret:...}."""
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{SETTING} is not valid JSON ({exc}); set it to {SHAPE}, or "
                          "unset it") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{SETTING} must be a JSON object, not {type(data).__name__}; "
                          f"set it to {SHAPE}")
    found: dict[str, McpServer] = {}
    for name, server in data.items():
        if not isinstance(name, str) or not re.fullmatch(NAME, name):
            raise ConfigError(f"{SETTING}: server name '{name}' must be a letter, then up to "
                              "31 letters, digits, '_' or '-'")
        # which of the two shapes is meant, so a message is about that one alone
        if not isinstance(server, dict) or ("command" in server) == ("url" in server):
            raise ConfigError(f"{SETTING}: server '{name}' needs exactly one of \"command\" "
                              f"(stdio) or \"url\" (streamable HTTP); the setting takes {SHAPE}")
        kind: type[McpServer] = StdioServer if "command" in server else HttpServer
        try:
            found[name] = kind.model_validate(server)
        except ValidationError as exc:
            raise ConfigError(f"{SETTING}: server '{name}': {_problems(exc)}; the setting "
                              f"takes {SHAPE}") from None
    return found


def _problems(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors(include_input=False, include_url=False):
        where = ".".join(str(p) for p in error["loc"])
        lines.append(f"{where}: {error['msg']}" if where else str(error["msg"]))
    return "; ".join(lines)


def secret_names(server: McpServer) -> list[str]:
    """The skillq secrets a server's env or headers name, in order, once each."""
    values = server.env.values() if isinstance(server, StdioServer) else \
        server.headers.values()
    return list(dict.fromkeys(m for v in values for m in SECRET_REF.findall(v)))


def with_secrets(values: Mapping[str, str], secrets: Mapping[str, str]) -> dict[str, str]:
    """``values`` with each ``${secret:NAME}`` replaced by that secret's value."""
    return {key: SECRET_REF.sub(lambda m: secrets[m.group(1)], value)
            for key, value in values.items()}
