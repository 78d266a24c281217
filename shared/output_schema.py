"""A schema assertion (benchmarks.json ``{"schema": {...}}``, issue 45): a JSON Schema a
run's outputs must meet, read by the jsonschema validator its own ``$schema`` names (the
latest draft when it names none)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema  # type: ignore[import-untyped]

MAX_SHOWN = 5  # misfits named in one verdict: the first few say what is wrong


def schema_problem(schema: Mapping[str, Any]) -> str | None:
    """Why ``schema`` is not a JSON Schema, or None."""
    validator = jsonschema.validators.validator_for(schema)
    try:
        validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "the top"
        return f"not a JSON Schema ({where}: {exc.message})"
    return None


def misfits(outputs: Any, schema: Mapping[str, Any]) -> list[str]:
    """Where ``outputs`` do not meet ``schema``: each misfit's path and why; [] when they
    do."""
    validator = jsonschema.validators.validator_for(schema)(schema)
    found = sorted(validator.iter_errors(outputs), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(str(p) for p in e.absolute_path) or 'outputs'}: {e.message}"
            for e in found[:MAX_SHOWN]]
