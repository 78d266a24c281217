"""Evaluating references against a run's values (no code is evaluated, only paths)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.refs import Ref, parse_template


class ResolveError(ValueError):
    """A reference that has no value at run time (a missing field of an item, say)."""


@dataclass(frozen=True)
class Scope:
    """What references can see: the run's inputs, finished steps' values, the item."""

    inputs: Mapping[str, Any]
    steps: Mapping[str, Any] = field(default_factory=dict)  # step id -> outputs (or list)
    fan_out: frozenset[str] = frozenset()  # steps whose value is one entry per item
    array_outputs: Mapping[str, frozenset[str]] = field(default_factory=dict)
    item: Any = None
    has_item: bool = False


def _dig(value: Any, path: tuple[str, ...], ref: Ref) -> Any:
    for name in path:
        if not isinstance(value, Mapping) or name not in value:
            raise ResolveError(f"{ref}: no field '{name}' in {json.dumps(value)[:80]}")
        value = value[name]
    return value


def ref_value(ref: Ref, scope: Scope) -> Any:
    if ref.kind == "input":
        if ref.name not in scope.inputs:
            raise ResolveError(f"{ref}: input '{ref.name}' was not given")
        return _dig(scope.inputs[ref.name], ref.path, ref)
    if ref.kind == "item":
        if not scope.has_item:
            raise ResolveError(f"{ref} used outside a for_each step")
        return _dig(scope.item, ref.path, ref)
    if ref.name not in scope.steps:
        raise ResolveError(f"{ref}: step '{ref.name}' has no outputs yet")
    value = scope.steps[ref.name]
    if ref.name not in scope.fan_out:
        # A step that failed under on_failure: continue has no outputs: its fields are null.
        return None if value is None else _dig(value, ref.path, ref)
    if not ref.path:
        return list(value)
    head, rest = ref.path[0], ref.path[1:]
    # A failed item kept by on_failure: continue stays null, so the list lines up with
    # the items; skipped items were dropped before.
    picked = [None if item is None else _dig(item, (head, *rest), ref) for item in value]
    if not rest and head in scope.array_outputs.get(ref.name, frozenset()):
        # Fan-in of an array output: one list, items' lists concatenated in item order.
        return [x for chunk in picked if chunk is not None for x in chunk]
    return picked


def resolve(value: Any, scope: Scope) -> Any:
    """``value`` with every reference replaced: a lone reference keeps its type,
    references inside longer text are interpolated (JSON for non-text values)."""
    if isinstance(value, str):
        if "${" not in value and "$${" not in value:
            return value
        template = parse_template(value)
        if template.single is not None:
            return ref_value(template.single, scope)
        out = []
        for part in template.parts:
            if isinstance(part, str):
                out.append(part)
            else:
                got = ref_value(part, scope)
                out.append(got if isinstance(got, str) else json.dumps(got))
        return "".join(out)
    if isinstance(value, Mapping):
        return {k: resolve(v, scope) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [resolve(v, scope) for v in value]
    return value
