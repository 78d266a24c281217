"""Pydantic's validation errors, said the way a skill author can act on them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from shared.problems import did_you_mean
from shared.yamlload import Loc


def allowed_fields(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def _model_at(model: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    """The model class that owns the last key of ``loc`` (for 'did you mean')."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        fields = {f.alias or n: f for n, f in current.model_fields.items()}
        info = fields.get(str(part))
        if info is None:
            return None
        current = _inner_model(info.annotation)
        if current is None:
            return None
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _message(err: ErrorDetails, model: type[BaseModel]) -> str:
    kind = err["type"]
    loc = tuple(err["loc"])
    got = err.get("input")
    if kind == "extra_forbidden":
        owner = _model_at(model, loc)
        names = allowed_fields(owner) if owner else []
        close = did_you_mean(str(loc[-1]), names)
        if close:
            return f"unknown field; did you mean '{close}'?"
        return "unknown field; remove it" + (f" (allowed: {', '.join(names)})" if names else "")
    if kind == "missing":
        return "required field is missing; add it"
    if kind in ("bool_type", "bool_parsing"):
        return (f"must be true or false (unquoted), got {got!r}; YAML 1.2 reads only "
                "true/false as booleans, not yes/no/on/off")
    bounds = {"greater_than_equal": "at least", "greater_than": "more than",
              "less_than_equal": "at most", "less_than": "less than"}
    if kind in bounds:
        limit = next(iter(err.get("ctx", {}).values()), "")
        return f"must be {bounds[kind]} {limit}, got {got!r}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"must be a whole number, got {got!r}"
    if kind in ("string_type",):
        # Quoting fixes a number or a date read as one, not a list or a mapping.
        if isinstance(got, list | tuple):
            return f"must be one text value, not a list, got {got!r}; write it on one line"
        if isinstance(got, dict):
            return (f"must be one text value, not a mapping, got {got!r}; write it on one "
                    "line, quoted if it holds ': '")
        return f"must be text, got {got!r}; quote it"
    if kind in ("tuple_type", "list_type"):
        return f"must be a list, got {got!r}; write one '- item' per line"
    if kind in ("dict_type", "model_type", "model_attributes_type", "mapping_type"):
        return f"must be a mapping of `key: value` lines, got {got!r}"
    if kind == "string_pattern_mismatch":
        extra = ", hyphens" if loc[-1] == "id" else ""
        return (f"{got!r} is not a valid name; use letters, digits{extra} and underscores, "
                "starting with a letter or underscore")
    if kind == "enum":
        expected = err.get("ctx", {}).get("expected", "")
        return f"{got!r} is not allowed; use one of {expected}"
    if kind == "value_error":
        return str(err.get("ctx", {}).get("error", err["msg"]))
    return f"{err['msg']} (got {got!r})"


def problems_from(exc: ValidationError, model: type[BaseModel],
                  make: Callable[[Loc, str], Any], prefix: Loc = ()) -> Iterable[Any]:
    for err in exc.errors(include_url=False):
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and "[" in p))
        yield make((*prefix, *loc), _message(err, model))
