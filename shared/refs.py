"""Reference expressions: the only expression language of a skill.

    ${inputs.NAME}            an input of the running skill (the seed's bare ${NAME} too)
    ${steps.ID.outputs}       every output of step ID (for a fan-out step: one object per item)
    ${steps.ID.outputs.NAME}  one output of step ID (for a fan-out step: a list of it)
    ${item} / ${item.FIELD}   the current element of the step's for_each list
    $${                       a literal "${"

Anything after the first name may go deeper into objects with more dotted names
(``${item.owner.login}``). Nothing is evaluated: a reference is a path, not code.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

_TOKEN = re.compile(r"\$\$\{|\$\{([^{}]*)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
_HELP = "write ${inputs.NAME}, ${steps.ID.outputs.NAME}, ${item} or ${item.FIELD}"


class RefSyntaxError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Ref:
    kind: Literal["input", "step", "item"]
    name: str = ""  # the input name or step id; empty for item
    path: tuple[str, ...] = ()  # for a step: the output name first, then deeper fields
    text: str = ""

    def __str__(self) -> str:
        return self.text


def parse_ref(expr: str) -> Ref:
    text = "${" + expr + "}"
    parts = expr.strip().split(".")
    if not all(_NAME.match(p) for p in parts):
        raise RefSyntaxError(f"'{text}' is not a reference; {_HELP}")
    head, rest = parts[0], tuple(parts[1:])
    if head == "item":
        return Ref("item", "", rest, text)
    if head == "inputs":
        if not rest:
            raise RefSyntaxError(f"'{text}' names no input; write ${{inputs.NAME}}")
        return Ref("input", rest[0], rest[1:], text)
    if head == "steps":
        if len(rest) < 2 or rest[1] != "outputs":
            raise RefSyntaxError(f"'{text}' must read ${{steps.ID.outputs}} or "
                                 "${steps.ID.outputs.NAME}")
        return Ref("step", rest[0], rest[2:], text)
    if rest:
        raise RefSyntaxError(f"'{text}' starts with unknown '{head}'; {_HELP}")
    return Ref("input", head, (), text)  # the seed design's bare ${NAME}


@dataclass(frozen=True, slots=True)
class Template:
    """A string value split into literal text and references."""

    parts: tuple[str | Ref, ...]

    @property
    def single(self) -> Ref | None:
        """The reference when the whole value is exactly one (it keeps its type)."""
        if len(self.parts) == 1 and isinstance(self.parts[0], Ref):
            return self.parts[0]
        return None

    @property
    def refs(self) -> tuple[Ref, ...]:
        return tuple(p for p in self.parts if isinstance(p, Ref))


def parse_template(value: str) -> Template:
    parts: list[str | Ref] = []
    pos = 0
    literal = ""
    for match in _TOKEN.finditer(value):
        literal += value[pos:match.start()]
        pos = match.end()
        if match.group(0) == "$${":
            literal += "${"
            continue
        if literal:
            parts.append(literal)
            literal = ""
        parts.append(parse_ref(match.group(1)))
    literal += value[pos:]
    if "${" in value[pos:]:
        raise RefSyntaxError(f"'{value}' has an unclosed '${{'; close it with '}}'")
    if literal:
        parts.append(literal)
    return Template(tuple(parts))


def walk_strings(value: Any, loc: tuple[str | int, ...] = ()
                 ) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Every string inside a value made of dicts and lists, with where it sits."""
    if isinstance(value, str):
        yield loc, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from walk_strings(item, (*loc, key))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from walk_strings(item, (*loc, i))
