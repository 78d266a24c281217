"""The tools of the MCP servers an agent step's skill requires (``requires.mcp``), as
Pydantic AI toolsets, one a server, opened from this daemon's SKILLQ_MCP_SERVERS.

Why not Pydantic AI's own ``MCPToolset``: it is built on the fastmcp client, which is not
one of skillq's dependencies; the MCP SDK (``mcp``, v2), which skillq's own MCP server
already uses, speaks both transports. A toolset here is an ``AbstractToolset`` given to
the ``Agent`` like any other, so its calls are the agent's tool calls: in the model's
responses (recorded turns, replay.py), under ``max_turns`` (each result costs a model
request), ``budget_usd`` and the step's timeout (the agent run, servers' start included,
is inside it).

A server's tools are offered as ``SERVER_TOOL`` (``rube_SEARCH_TOOLS``), so two servers,
or a server and skillq's own tools, never clash. Their arguments are checked before the
call (``McpToolArguments``): by skillq's own check when the server's schema uses only
what it reads, else by a full JSON Schema validator, a misfit going back to the model
either way. A tool's error result is returned to the model as text, as skillq's own tools
do; a server that cannot be reached fails the step (``McpUnavailable``), naming the
server and the setting, never its command line, headers or secrets.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, Self

import httpx2
import jsonschema  # type: ignore[import-untyped]
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from pydantic_ai import RunContext
from pydantic_ai.capabilities import RawToolArgs, ValidatedToolArgs, WrapToolValidateHandler
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets.abstract import AbstractToolset, ToolsetTool
from pydantic_core import SchemaValidator, core_schema

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
from shared.secrets import redact_value, secrets_for
from workers.agent.tool_args import (
    BadArguments,
    ToolArguments,
    UnreadableSchema,
    check_arguments,
    readable,
)

CONNECT_TIMEOUT_S = 30.0  # an HTTP server's connect; the step's timeout bounds the rest
# McpToolArguments has checked them against the server's schema already
_ANY_ARGS = SchemaValidator(core_schema.dict_schema(core_schema.str_schema(),
                                                   core_schema.any_schema()))
META = "mcp_server"  # ToolDefinition.metadata key: which server a tool is of


class McpUnavailable(Exception):
    """A required MCP server cannot be opened (not declared here, a secret missing, or
    not reachable): the step fails with this line."""


def toolsets_for(required: Sequence[str], setting: str, *, timeout_s: float,
                 retries: int) -> list[McpToolset]:
    """The toolsets of the servers ``required`` (a skill's requires.mcp) from this
    daemon's SKILLQ_MCP_SERVERS value; McpUnavailable naming the first it cannot open.
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
        found.append(McpToolset(name, server, secrets, timeout_s=timeout_s, retries=retries))
    return found


class McpToolset(AbstractToolset[Any]):
    """One MCP server's tools, its session open while the agent runs."""

    def __init__(self, name: str, server: McpServer, secrets: Mapping[str, str], *,
                 timeout_s: float, retries: int) -> None:
        self.name, self.server, self._secrets = name, server, dict(secrets)
        self.timeout_s, self.retries = timeout_s, retries
        self._stack: AsyncExitStack | None = None
        self._client: Client | None = None
        self._entered = 0
        self._tools: dict[str, ToolsetTool[Any]] = {}

    @property
    def id(self) -> str:
        return f"mcp:{self.name}"

    @property
    def label(self) -> str:
        return f"MCP server '{self.name}'"

    def _target(self, stack: AsyncExitStack) -> Any:
        if isinstance(self.server, StdioServer):
            # Its stderr to the worker's own (fd 2, its log): a Celery worker's sys.stderr
            # is a logging proxy with no file descriptor for a child process to write to.
            return stdio_client(StdioServerParameters(
                command=self.server.command[0], args=list(self.server.command[1:]),
                env=with_secrets(self.server.env, self._secrets), cwd=self.server.cwd),
                errlog=sys.__stderr__ or sys.stderr)
        assert isinstance(self.server, HttpServer)
        http = httpx2.AsyncClient(
            headers=with_secrets(self.server.headers, self._secrets),
            timeout=httpx2.Timeout(CONNECT_TIMEOUT_S, read=self.timeout_s))
        stack.push_async_callback(http.aclose)
        return streamable_http_client(self.server.url, http_client=http)

    async def __aenter__(self) -> Self:
        self._entered += 1
        if self._entered > 1:
            return self
        stack = AsyncExitStack()
        try:
            client = Client(self._target(stack), read_timeout_seconds=self.timeout_s)
            await stack.enter_async_context(client)
            tools, cursor = [], None
            while True:
                listed = await client.list_tools(cursor=cursor)
                tools.extend(listed.tools)
                cursor = listed.next_cursor
                if not cursor:
                    break
        except Exception as exc:
            self._entered = 0
            await stack.aclose()
            raise McpUnavailable(f"MCP server '{self.name}' ({SETTING}) could not be "
                                 f"opened: {_reason(exc)}") from None
        self._stack, self._client = stack, client
        self._tools = {
            f"{self.name}_{t.name}": ToolsetTool(
                toolset=self, max_retries=self.retries, args_validator=_ANY_ARGS,
                tool_def=ToolDefinition(
                    name=f"{self.name}_{t.name}",
                    description=t.description or f"{t.name} (MCP server {self.name})",
                    parameters_json_schema=dict(t.input_schema or {"type": "object"}),
                    metadata={META: self.name, "mcp_tool": t.name}))
            for t in tools}
        return self

    async def __aexit__(self, *args: Any) -> bool | None:
        self._entered = max(0, self._entered - 1)
        if self._entered == 0 and self._stack is not None:
            stack, self._stack, self._client = self._stack, None, None
            await stack.aclose()
        return None

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        return dict(self._tools)

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any],
                        tool: ToolsetTool[Any]) -> Any:
        assert self._client is not None, "the agent calls tools only while it runs"
        meta = tool.tool_def.metadata or {}
        result = await self._client.call_tool(str(meta["mcp_tool"]), tool_args)
        # a server may answer with the credentials it was given: never to the model
        return redact_value(_answer(result), self._secrets)


def _answer(result: CallToolResult) -> Any:
    texts = [getattr(b, "text", None) for b in result.content]
    if result.is_error:
        # as skillq's own tools answer a failure: text the model reads and acts on
        return f"error: {' '.join(t for t in texts if t) or 'the tool failed'}"
    if result.structured_content is not None:
        return result.structured_content
    if all(t is not None for t in texts):
        return "\n".join(t for t in texts if t is not None)
    return [b.model_dump(mode="json", by_alias=True, exclude_none=True)
            for b in result.content]


def _reason(exc: BaseException) -> str:
    # anyio task groups wrap what failed: the first leaf says it
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).splitlines()[0] if str(exc) else ""
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
