"""Run inputs: from the command line or a JSON file, checked against the declared inputs.

Bad inputs are refused before anything is dispatched, each problem naming the input
and the fix; nothing is half-started.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from shared.errors import InputError
from shared.manifest import Manifest
from shared.problems import Problem, display_path
from shared.settings import get_settings
from shared.valuetypes import from_text, type_error


def input_problems(manifest: Manifest, given: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(".name", message) for every given input that does not fit, and every missing one."""
    out: list[tuple[str, str]] = []
    declared = [i.name for i in manifest.inputs]
    for key, value in given.items():
        spec = manifest.input(key)
        if spec is None:
            close = difflib.get_close_matches(key, declared, n=1)
            hint = f"did you mean '{close[0]}'?" if close else \
                f"{manifest.name} takes: {', '.join(declared) or 'no inputs'}"
            out.append((f".{key}", f"unknown input; {hint}"))
            continue
        err = type_error(value, spec.value_type)
        if err and not (value is None and not spec.required):
            out.append((f".{key}", err))
    for spec in manifest.inputs:
        if spec.required and spec.name not in given:
            out.append((f".{spec.name}", f"required input is missing ({spec.type}): "
                        f"give it with --input {spec.name}=VALUE"))
    return out


def with_defaults(manifest: Manifest, given: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs a skill's script receives: what was given, then declared defaults."""
    values = dict(given)
    for spec in manifest.inputs:
        # null for an optional input means "not given": the default applies.
        if values.get(spec.name) is None and spec.has_default and not spec.required:
            values[spec.name] = spec.default
    return values


def resolve_inputs(manifest: Manifest, given: Mapping[str, Any], *, origin: str = "inputs"
                   ) -> dict[str, Any]:
    """Checked inputs with defaults applied; InputError listing every problem otherwise."""
    problems = [Problem(origin, f"{manifest.name}{field}", msg)
                for field, msg in input_problems(manifest, given)]
    if problems:
        raise InputError(problems)
    return with_defaults(manifest, given)


MAX_BYTES_ENV = "SKILLQ_INPUT_MAX_BYTES"


def value_bytes(value: Any) -> int:
    """An input value's size as the cap counts it: a string's UTF-8 bytes, anything else
    as compact JSON (what the run record stores)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           separators=(",", ":"))
    return len(text.encode("utf-8", errors="surrogatepass"))


def size_problem(size: int, max_bytes: int) -> str | None:
    if size <= max_bytes:
        return None
    return (f"is {size:,} bytes, over the {max_bytes:,}-byte cap on one input value: give "
            f"less, or raise {MAX_BYTES_ENV}")


def parse_cli_inputs(manifest: Manifest, pairs: Sequence[str], inputs_file: Path | None = None,
                     *, max_bytes: int | None = None) -> dict[str, Any]:
    """``--input k=v`` pairs (typed by the declared inputs) over an ``--inputs-file`` JSON.

    Repeating ``--input k=...`` for an array input appends to it. No value may be larger
    than ``max_bytes`` (default: the input_max_bytes setting): what a person or a form
    hands a run is capped before it is parsed, stored in the run record or dispatched.
    """
    if max_bytes is None:
        max_bytes = get_settings().input_max_bytes
    problems: list[Problem] = []
    given: dict[str, Any] = {}
    if inputs_file is not None:
        for key, value in _read_inputs_file(inputs_file, problems).items():
            too_big = size_problem(value_bytes(value), max_bytes)
            if too_big:
                problems.append(Problem(display_path(inputs_file), key, too_big))
            else:
                given[key] = value
    from_cli: dict[str, Any] = {}
    repeated: set[str] = set()
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            shown = pair if len(pair) <= 80 else pair[:77] + "..."
            problems.append(Problem("--input", shown, "write --input NAME=VALUE"))
            continue
        too_big = size_problem(value_bytes(text), max_bytes)  # before parsing it as JSON
        if too_big:
            problems.append(Problem("--input", key, too_big))
            continue
        spec = manifest.input(key)
        if spec is None:
            from_cli[key] = text  # reported as unknown by resolve_inputs
            continue
        try:
            value = from_text(text, spec.value_type)
        except ValueError as exc:
            problems.append(Problem("--input", key, f"{exc} (declared type {spec.type})"))
            continue
        if key in from_cli and spec.value_type.is_array:
            from_cli[key] = [*from_cli[key], *value]
            repeated.add(key)
        elif key in from_cli:
            problems.append(Problem("--input", key, "given twice; give it once"))
        else:
            from_cli[key] = value
    for key in sorted(repeated):  # each repeat fitted; together they may not
        too_big = size_problem(value_bytes(from_cli[key]), max_bytes)
        if too_big:
            problems.append(Problem("--input", key, too_big))
    if problems:
        raise InputError(problems)
    given.update(from_cli)
    return resolve_inputs(manifest, given, origin="--input")


def _read_inputs_file(path: Path, problems: list[Problem]) -> dict[str, Any]:
    shown = display_path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        problems.append(Problem(shown, "(file)", "does not exist"))
        return {}
    except OSError as exc:
        problems.append(Problem(shown, "(file)", f"cannot be read: {exc.strerror or exc}"))
        return {}
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        problems.append(Problem(shown, "(file)", f"is not a UTF-8 JSON file: {exc}"))
        return {}
    if not isinstance(data, dict):
        problems.append(Problem(shown, "(file)", "must hold one JSON object of input values"))
        return {}
    return data
