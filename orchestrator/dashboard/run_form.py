"""The run form: one field per declared input, read back as `--input NAME=VALUE` pairs so
the same parser and checks as `skillq run` (shared/inputs.py) accept or refuse them, with
the same messages."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.inputs import parse_cli_inputs
from shared.manifest import Manifest


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    widget: str  # text | textarea | boolean
    required: bool
    default: str  # shown as the placeholder: an empty field means "not given"
    description: str
    value: str = ""  # what the user typed (kept when the form comes back with an error)


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def fields(manifest: Manifest, given: Mapping[str, str] | None = None) -> list[Field]:
    found = []
    for spec in manifest.inputs:
        vtype = spec.value_type
        widget = "boolean" if str(vtype) == "boolean" else \
            "textarea" if vtype.is_array or vtype.base == "object" else "text"
        found.append(Field(spec.name, spec.type, widget, spec.required,
                           _shown(spec.default) if spec.has_default else "",
                           spec.description or "", (given or {}).get(spec.name, "")))
    return found


def pairs(manifest: Manifest, form: Mapping[str, str]) -> list[str]:
    """`NAME=VALUE` for every declared input the user filled in, as `--input` takes them
    (an empty field is an input not given: its default applies, or it is missing)."""
    return [f"{spec.name}={form[spec.name]}" for spec in manifest.inputs
            if form.get(spec.name, "").strip() != ""]


def parse_form(manifest: Manifest, form: Mapping[str, str], *, max_bytes: int | None = None
               ) -> dict[str, Any]:
    """The checked inputs; InputError (the CLI's message) when they do not fit, an input
    over ``max_bytes`` included."""
    # A path typed into the form is no file of the dashboard machine's to read.
    return parse_cli_inputs(manifest, pairs(manifest, form), max_bytes=max_bytes,
                            local_files=False)


def form_values(items: Sequence[tuple[str, Any]]) -> dict[str, str]:
    return {k: v for k, v in items if isinstance(v, str)}
