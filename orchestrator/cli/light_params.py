"""Typer commands whose options are read without pydantic: for the thin `skillq run`.

Typer (0.2x) coerces every non-flag parameter through a pydantic TypeAdapter, so merely
running a command imports pydantic and builds adapters: a large part of a thin start.
`skillq run` and `skillq wait` take only strings, lists of strings, paths and flags,
whose coercion is trivial; ``LightCommand`` (and ``lighten`` for the group's own flags)
gives those parameters a coercer of its own and leaves any other to typer. Should
typer's internals change (no ``_runtime_param``), nothing is replaced: the command still
works, only slower, and tests/unit/test_run_client.py says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

from typer.core import TyperCommand

NoneType = type(None)


class _Light:
    """The one method typer asks of a runtime parameter: ``coerce``."""

    def __init__(self, convert: type) -> None:
        self.convert = convert

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        multiple = param.multiple or param.nargs == -1
        if value is None:
            return () if multiple else None
        if multiple:
            return [self.convert(v) for v in value]  # a list, as typer's adapter gives
        return self.convert(value)


def _plain(annotation: Any, flag: bool) -> type | None:
    """str or Path for ``str``, ``Path``, ``X | None``, ``list[X]`` and ``list[X] | None``;
    bool for a flag (click gives it a bool, or None when it was not given)."""
    if annotation is bool or annotation == (bool | None):
        return bool if flag else None
    if get_origin(annotation) in (Union, UnionType):
        rest = [a for a in get_args(annotation) if a is not NoneType]
        if len(rest) != 1:
            return None
        annotation = rest[0]
    if get_origin(annotation) is list:
        (annotation,) = get_args(annotation) or (None,)
    return annotation if annotation in (str, Path) else None


def lighten(params: Iterable[Any]) -> None:
    """Give each plain parameter the light coercer (typer builds its own lazily)."""
    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        convert = _plain(getattr(descriptor, "annotation", None),
                         bool(getattr(param, "is_flag", False)))
        if convert is not None and hasattr(param, "_runtime_param"):
            param._runtime_param = _Light(convert)


class LightCommand(TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        params: list[Any] = super().get_params(ctx)  # with --help, made on first use
        lighten(params)
        return params
