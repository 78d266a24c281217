"""The tools of the MCP servers an agent step's skill requires (``requires.mcp``): Pydantic
AI's own MCP toolsets (``pydantic_ai.mcp.MCPToolset``, over the fastmcp client), one a
server, opened from this worker's SKILLQ_MCP_SERVERS.

They are given to the ``Agent`` like any other toolset, so their calls are the agent's
tool calls: in the model's responses (recorded turns, replay.py), under ``max_turns``
(each result costs a model request), ``budget_usd`` and the step's timeout (the agent
run, servers' start included, is inside it).

A server's tools are offered as ``SERVER_TOOL`` (``rube_SEARCH_TOOLS``), so two servers,
or a server and skillq's own tools, never clash. Their arguments are checked before the
call (``McpToolArguments``): by skillq's own check when the server's schema uses only
what it reads, else by a full JSON Schema validator, a misfit going back to the model
either way. A tool's error is a failed tool result the model reads; whatever a server
answers is cleared of the secrets it was given before the model or a record sees it. A
server that cannot be reached fails the step (``McpUnavailable``), naming the server and
the setting, never its command line, headers or secrets.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import jsonschema  # type: ignore[import-untyped]
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
from pydantic_ai import RunContext
from pydantic_ai.capabilities import RawToolArgs, ValidatedToolArgs, WrapToolValidateHandler
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.mcp import CallToolFunc, MCPToolset, ToolResult
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from shared.errors import ConfigError, MissingSecret
from shared.mcp_servers import (
    SETTING,
    HttpServer,
    McpServer,
    StdioServer,
    parse_servers,
    secret_names,
    with_secrets,
)
from shared.secrets import redact, redact_value, secrets_for
from workers.agent.tool_args import (
    BadArguments,
    ToolArguments,
    UnreadableSchema,
    check_arguments,
    readable,
)

CONNECT_TIMEOUT_S = 30.0  # a server's start and handshake; the step's timeout bounds the rest
META = "mcp_server"  # ToolDefinition.metadata key: which server a tool is of


class McpUnavailable(Exception):
    """A required MCP server cannot be opened (not declared here, a secret missing, or
    not reachable): the step fails with this line."""


def toolsets_for(required: Sequence[str], setting: str, *, timeout_s: float,
                 retries: int) -> list[ServerTools]:
    """The toolsets of the servers ``required`` (a skill's requires.mcp) from this
    worker's SKILLQ_MCP_SERVERS value; McpUnavailable naming the first it cannot open.
    Secrets are read here, at the step, as a script step reads its ``auth``."""
    if not required:
        return []
    try:
        declared = parse_servers(setting)
    except ConfigError as exc:
        raise McpUnavailable(str(exc)) from None
    found = []
    for name in required:
        server = declared.get(name)
        if server is None:
            raise McpUnavailable(
                f"MCP server '{name}' is not declared on this worker; add it to {SETTING} "
                f"(declared here: {', '.join(sorted(declared)) or 'none'})")
        try:
            secrets = secrets_for(secret_names(server))
        except MissingSecret as exc:
            raise McpUnavailable(f"MCP server '{name}' ({SETTING}): {exc}") from None
        found.append(ServerTools(name, server, secrets, timeout_s=timeout_s, retries=retries))
    return found


def _transport(server: McpServer, secrets: Mapping[str, str]
               ) -> StdioTransport | StreamableHttpTransport:
    if isinstance(server, StdioServer):
        # Its stderr to the worker's own (fd 2, its log): a Celery worker's sys.stderr is a
        # logging proxy with no file descriptor for a child process to write to.
        return StdioTransport(server.command[0], list(server.command[1:]),
                              env=with_secrets(server.env, secrets), cwd=server.cwd,
                              log_file=sys.__stderr__ or sys.stderr)
    assert isinstance(server, HttpServer)
    return StreamableHttpTransport(server.url, headers=with_secrets(server.headers, secrets))


class ServerTools(WrapperToolset[Any]):
    """One MCP server's tools: Pydantic AI's MCPToolset, its tools named ``SERVER_TOOL``
    and marked as the server's (``META``), its answers cleared of the secrets the server
    was given, its failure to open an McpUnavailable."""

    def __init__(self, name: str, server: McpServer, secrets: Mapping[str, str], *,
                 timeout_s: float, retries: int) -> None:
        self.name, self._secrets = name, dict(secrets)

        async def redacted(ctx: RunContext[Any], call: CallToolFunc, tool: str,
                           args: dict[str, Any]) -> ToolResult:
            try:
                return redact_value(await call(tool, args), self._secrets)  # type: ignore[no-any-return]
            except ToolFailed as exc:  # the server's error text, as the model reads it
                raise ToolFailed(redact(str(exc), self._secrets)) from None

        mcp: MCPToolset[Any] = MCPToolset(
            _transport(server, secrets), id=f"mcp-{name}", max_retries=retries,
            tool_error_behavior="failed", process_tool_call=redacted,
            init_timeout=CONNECT_TIMEOUT_S, read_timeout=timeout_s)
        super().__init__(mcp.prefixed(name))

    @property
    def label(self) -> str:
        return f"MCP server '{self.name}'"

    async def __aenter__(self) -> ServerTools:
        try:
            await self.wrapped.__aenter__()
        except Exception as exc:
            raise McpUnavailable(f"MCP server '{self.name}' ({SETTING}) could not be "
                                 f"opened: {_reason(exc, self._secrets)}") from None
        return self

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await self.wrapped.get_tools(ctx)
        return {name: replace(tool, tool_def=replace(
                    tool.tool_def, metadata={**(tool.tool_def.metadata or {}),
                                             META: self.name}))
                for name, tool in tools.items()}


def _reason(exc: BaseException, secrets: Mapping[str, str]) -> str:
    # anyio task groups wrap what failed: the first leaf says it
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = redact(str(exc).splitlines()[0], secrets) if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass
class McpToolArguments(ToolArguments):
    """ToolArguments, and for an MCP server's tool a schema skillq's check does not read
    (``anyOf``, ``$ref``, formats ...) checked in full by a JSON Schema validator: a
    server's schema is its own, so it is read rather than refused."""

    async def wrap_tool_validate(self, ctx: RunContext[Any], *, call: ToolCallPart,
                                 tool_def: ToolDefinition, args: RawToolArgs,
                                 handler: WrapToolValidateHandler) -> ValidatedToolArgs:
        schema = tool_def.parameters_json_schema
        if not (tool_def.metadata or {}).get(META):
            return await super().wrap_tool_validate(ctx, call=call, tool_def=tool_def,
                                                    args=args, handler=handler)
        try:
            readable(schema, tool_def.name)
        except UnreadableSchema:
            return await handler(_check_in_full(tool_def.name, schema, args))
        return await handler(check_arguments(tool_def.name, schema, args))


def _check_in_full(tool: str, schema: Mapping[str, Any], args: RawToolArgs
                   ) -> dict[str, Any]:
    # the skillq check's parsing (JSON text, one object) first, against an open schema
    value = check_arguments(tool, {"type": "object"}, args)
    validator_type = jsonschema.validators.validator_for(schema)
    problems = [f"argument '{'.'.join(str(p) for p in e.absolute_path) or '(all)'}': "
                f"{e.message[:200]}"
                for e in validator_type(schema).iter_errors(value)]
    if problems:
        raise BadArguments(tool, problems, schema)
    return value
