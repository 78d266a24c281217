"""Every tool call's arguments checked against the tool's own JSON schema before it runs.

A model's tool call is input like any other, and small local models often send one that
does not fit: ``{"nam": "x"}``, ``{"name": 123}``, a required field left out, arguments
that are not a JSON object. Pydantic AI validates nothing for a tool built with
``Tool.from_schema`` (the function is called with whatever came, and its TypeError or
AttributeError crashed the step). So the agent carries one capability, ``ToolArguments``,
that checks every call to every function tool against the schema the model was shown
(its ``ToolDefinition``), whoever built the tool. A misfit is answered with
``BadArguments``, a ``ModelRetry``: a tool error the model reads, naming each argument
and what is wrong, counted against that tool's retries like any other retry.

A tool that validates its own arguments with a typed model and answers a misfit as its
result (update_plan: workers/agent/plan_tool.py) says so in its metadata
(``OWN_CHECK``); its arguments are checked only to be one JSON object here.

The check reads the schema keywords skillq's tools use (``type``, ``properties``,
``required``, ``additionalProperties``, ``items``, ``enum``, and the annotations). A
schema with any other keyword is refused (``UnreadableSchema``) rather than half
checked, so a tool added later is either checked in full or fails its first test.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.capabilities import (
    AbstractCapability,
    RawToolArgs,
    ValidatedToolArgs,
    WrapToolValidateHandler,
)
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import ToolDefinition

_ANNOTATIONS = frozenset({"description", "title", "default", "examples"})
_CHECKED = frozenset({"type", "properties", "required", "additionalProperties", "items",
                      "enum"})
_NAMES = {"string": "a string", "integer": "an integer", "number": "a number",
          "boolean": "a boolean", "object": "an object", "array": "an array",
          "null": "null"}
OWN_CHECK = "checks_own_arguments"  # a tool's metadata key: it validates them itself
SHOWN_CHARS = 80  # of a wrong value, quoted back to the model


class UnreadableSchema(ValueError):
    """A tool's schema uses a keyword this check does not read (a bug in the tool)."""


class BadArguments(ModelRetry):
    """A tool call whose arguments do not fit the tool's schema."""

    def __init__(self, tool: str, problems: list[str], schema: Mapping[str, Any]) -> None:
        self.tool = tool
        self.problems = problems
        lines = "\n".join(f"- {p}" for p in problems)
        super().__init__(f"{tool} was not run: its arguments do not fit.\n{lines}\n"
                         f"{tool} takes {signature(schema)}.")


def signature(schema: Mapping[str, Any]) -> str:
    """What a tool takes, e.g. ``one JSON object: {"name": a string (required)}``."""
    properties: Mapping[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    if not properties:
        return "no arguments: {}"
    fields = [f'"{name}": {_type_words(spec)}' + (" (required)" if name in required else "")
              for name, spec in properties.items()]
    return "one JSON object: {" + ", ".join(fields) + "}"


def check_arguments(tool: str, schema: Mapping[str, Any], args: RawToolArgs
                    ) -> dict[str, Any]:
    """``args`` as a dict when they fit ``schema``, else ``BadArguments`` saying why."""
    readable(schema, tool)
    value: Any = args
    if isinstance(args, str):
        # as Pydantic AI reads them: no arguments at all is an empty object
        try:
            value = json.loads(args) if args.strip() else {}
        except ValueError as exc:
            raise BadArguments(tool, [f"the arguments are not valid JSON ({exc})"],
                               schema) from None
    if not isinstance(value, dict):
        raise BadArguments(tool, [f"the arguments must be one JSON object, not "
                                  f"{_shown(value)}"], schema)
    problems = list(_problems(schema, value, ""))
    if problems:
        raise BadArguments(tool, problems, schema)
    return value


def readable(schema: Mapping[str, Any], tool: str, where: str = "") -> None:
    """Refuse a schema this check would only half read (``UnreadableSchema``)."""
    unknown = set(schema) - _CHECKED - _ANNOTATIONS
    if unknown:
        raise UnreadableSchema(
            f"tool {tool}'s schema uses {', '.join(sorted(unknown))}"
            f"{f' at {where}' if where else ''}, which the argument check does not read")
    for name, spec in (schema.get("properties") or {}).items():
        readable(spec, tool, _join(where, name))
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), Mapping):
            readable(schema[key], tool, _join(where, "[]" if key == "items" else "*"))


def _problems(schema: Mapping[str, Any], value: Any, where: str) -> Iterator[str]:
    wanted = _types(schema)
    if wanted and not any(_is(value, t) for t in wanted):
        about = _description(schema)
        yield (f"{_argument(where)} must be {_type_words(schema)}"
               f"{f' ({about})' if about else ''}, not {_shown(value)}")
        return
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(json.dumps(c) for c in schema["enum"])
        yield f"{_argument(where)} must be one of {choices}, not {_shown(value)}"
    if isinstance(value, dict):
        yield from _object_problems(schema, value, where)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            yield from _problems(schema["items"], item, f"{where}[{i}]")


def _object_problems(schema: Mapping[str, Any], value: dict[str, Any], where: str
                     ) -> Iterator[str]:
    properties: Mapping[str, Any] = schema.get("properties") or {}
    extra = schema.get("additionalProperties", True)
    for name in value:
        if name in properties:
            continue
        if extra is False:
            close = difflib.get_close_matches(name, list(properties), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            takes = ", ".join(f"'{p}'" for p in properties) or "none"
            yield (f"{_argument(_join(where, name))} is not one it takes{hint}; it takes "
                   f"{takes}")
        elif isinstance(extra, Mapping):
            yield from _problems(extra, value[name], _join(where, name))
    for name in schema.get("required") or ():
        if name not in value:
            spec = properties.get(name, {})
            about = _description(spec)
            yield (f"{_argument(_join(where, name))} is required ({_type_words(spec)}"
                   f"{f': {about}' if about else ''})")
    for name, spec in properties.items():
        if name in value:
            yield from _problems(spec, value[name], _join(where, name))


def _types(schema: Mapping[str, Any]) -> list[str]:
    found = schema.get("type")
    if found is None:
        return []
    return [found] if isinstance(found, str) else list(found)


def _is(value: Any, json_type: str) -> bool:
    # bool is an int to Python, never a number to JSON; 2.0 is an integer to JSON Schema
    if json_type == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or \
            (isinstance(value, float) and value.is_integer())
    if json_type == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    python = {"string": str, "boolean": bool, "object": dict, "array": list,
              "null": type(None)}.get(json_type)
    return python is not None and isinstance(value, python)


def _type_words(schema: Mapping[str, Any]) -> str:
    wanted = _types(schema)
    if not wanted:
        return "any JSON value"
    return " or ".join(_NAMES.get(t, t) for t in wanted)


def _description(schema: Mapping[str, Any]) -> str:
    return str(schema.get("description") or "").strip()


def _shown(value: Any) -> str:
    kind = next((_NAMES[t] for t in ("null", "boolean", "integer", "number", "string",
                                      "array", "object") if _is(value, t)), "a value")
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > SHOWN_CHARS:
        text = text[:SHOWN_CHARS] + "..."
    return kind if kind == "null" else f"{kind}: {text}"


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _argument(where: str) -> str:
    return f"argument '{where}'"


@dataclass
class ToolArguments(AbstractCapability[Any]):
    """The agent's check of every function tool call (output tools have their own, and
    a call to an unknown tool is refused before it gets here)."""

    async def wrap_tool_validate(self, ctx: RunContext[Any], *, call: ToolCallPart,
                                 tool_def: ToolDefinition, args: RawToolArgs,
                                 handler: WrapToolValidateHandler) -> ValidatedToolArgs:
        if (tool_def.metadata or {}).get(OWN_CHECK):
            return await handler(check_arguments(tool_def.name, _ANY_OBJECT, args))
        return await handler(check_arguments(tool_def.name, tool_def.parameters_json_schema,
                                             args))


_ANY_OBJECT: Mapping[str, Any] = {"type": "object"}
