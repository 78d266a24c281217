"""The value types a skill's inputs and outputs declare: string, number, integer,
boolean, object, file, directory, and arrays of any of them written ``T[]``.

A ``file`` value is a reference to bytes in the shared store (shared/store.py):
``{"$ref": "sha256:<hex>", "name": "data.csv", "size": 123}``. The command line turns a
path into one (shared/inputs.py); a script step sees a local path instead
(workers/file_inputs.py).

A ``directory`` value is a folder on one machine, left where it is:
``{"$dir": "/abs/path", "device": "<machine id>", "host": "laptop"}``. The command line
turns a path into one (shared/inputs.py); the step runs on a daemon of that machine
(lifecycle/routing.py) and sees the folder read-only at the same path, as a plain path
(workers/folder_inputs.py)."""

from __future__ import annotations

import difflib
import json
import math
import re
import sys
from dataclasses import dataclass
from typing import Any

BASE_TYPES = ("string", "number", "integer", "boolean", "object", "file", "directory")
TYPE_HELP = ("use string, number, integer, boolean, object, or an array such as string[]; "
             "or file (given by its path, sent to the step through the shared store); or "
             "directory (a folder given by its path, read where it is)")
PATH_BASES = frozenset({"file", "directory"})  # given by a path on the command line
FILE_REF_KEY = "$ref"  # shared/store.py's REF_KEY (this module stays free of the database)
_FILE_KEYS = frozenset({FILE_REF_KEY, "name", "size"})
LOCAL_KEY = "$local"  # an absolute path on the machine that starts the run
_LOCAL_KEYS = frozenset({LOCAL_KEY, "name", "size"})
_SHA256 = re.compile(r"sha256:[0-9a-f]{64}")
DIR_KEY = "$dir"
_DIR_KEYS = frozenset({DIR_KEY, "device", "host"})


@dataclass(frozen=True, slots=True)
class ValueType:
    base: str
    depth: int = 0  # how many [] follow the base: string[][] has depth 2

    def __str__(self) -> str:
        return self.base + "[]" * self.depth

    @property
    def is_array(self) -> bool:
        return self.depth > 0

    def element(self) -> ValueType:
        return ValueType(self.base, self.depth - 1)

    def array(self) -> ValueType:
        return ValueType(self.base, self.depth + 1)


def parse_type(text: str) -> ValueType:
    """``"string[]"`` -> ValueType("string", 1); ValueError with a fix otherwise."""
    base, depth = text.strip(), 0
    while base.endswith("[]"):
        base, depth = base[:-2].rstrip(), depth + 1
    if base not in BASE_TYPES:
        close = difflib.get_close_matches(base, BASE_TYPES, n=1)
        hint = f"did you mean '{close[0]}{'[]' * depth}'? " if close else ""
        raise ValueError(f"unknown type '{text}'; {hint}{TYPE_HELP}")
    return ValueType(base, depth)


def _describe(value: Any) -> str:
    try:
        text = json.dumps(value, default=str)
    except (ValueError, RecursionError):  # nested deeper than the encoder goes
        text = type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def type_error(value: Any, vtype: ValueType, *, local_files: bool = False) -> str | None:
    """Why ``value`` is not a ``vtype``, or cannot be stored as one (unstorable), or None
    when it is fine. ``local_files``: a file may also be one on this machine not stored
    yet (shared/inputs.py's, before the run is recorded).

    Every run's inputs pass here (shared/inputs.py resolve_inputs), and every script
    step's outputs (workers/script_executor.py): so nothing PostgreSQL cannot hold
    reaches a run's record."""
    return _type_error(value, vtype, local_files) or unstorable(value)


def _type_error(value: Any, vtype: ValueType, local_files: bool) -> str | None:
    if vtype.is_array:
        if not isinstance(value, list):
            return f"expected {vtype} (a JSON list), got {_describe(value)}"
        inner = vtype.element()
        for i, item in enumerate(value):
            err = _type_error(item, inner, local_files)
            if err:
                return f"item {i}: {err}"
        return None
    ok = {
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool)
        and math.isfinite(value),
        "boolean": isinstance(value, bool),
        "object": isinstance(value, dict),
        "file": is_file_value(value) or (local_files and is_local_file(value)),
        "directory": is_dir_value(value),
    }[vtype.base]
    if ok:
        return None
    if vtype.base == "file":
        return (f"expected a file (give its path on the command line, or a stored file "
                f'{{"$ref": "sha256:..."}}), got {_describe(value)}')
    if vtype.base == "directory":
        return f"expected a folder (give its path on the command line), got {_describe(value)}"
    return f"expected {vtype}, got {_describe(value)}"


# PostgreSQL's text and jsonb hold no NUL character, and no lone UTF-16 surrogate: what
# Python makes of bytes that are not UTF-8 (argv and file names are decoded with
# surrogateescape: byte 0xff becomes U+DCFF) or of a JSON "\\ud800" escape.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_ESCAPED = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")


def text_problem(text: str, *, path: bool = False) -> str | None:
    """Why ``text`` cannot be stored (a NUL byte, text that is not UTF-8), or None.

    ``path``: the text is a file's or folder's path, said so in the fix (the run's
    record, or a schedule's, names the file or folder by it)."""
    cannot = "which no path holds" if path else "which cannot be stored"
    for found in _UNSTORABLE.finditer(text):
        char = found.group()
        if char == "\x00":
            return f"contains a NUL byte (\\u0000), {cannot}; remove it"
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:  # one byte that was not UTF-8 (surrogateescape)
            fix = "give a path in UTF-8 (rename the file or folder)" if path \
                else "give UTF-8 text"
            return (f"is not valid UTF-8 (byte 0x{code - 0xDC00:02x} at character "
                    f"{found.start() + 1}), which cannot be stored; {fix}")
        return f"contains a lone surrogate (\\u{code:04x}), not text, {cannot}; remove it"
    return None


def shown_text(text: str) -> str:
    """``text`` quoted for a message, control characters and surrogates escaped (a NUL
    or a lone surrogate would break the terminal or the JSON answer carrying it)."""
    return "'" + _ESCAPED.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "'"


def escaped(text: str) -> str:
    """``text`` with each NUL byte and lone surrogate written as its ``\\uXXXX`` escape."""
    return _UNSTORABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def unstorable(value: Any) -> str | None:
    """Why the JSON value ``value`` cannot be stored, naming where in it (``at a.b[2]: ``);
    None when it can."""
    found = unstorable_at(value)
    if found is None:
        return None
    where, why = found
    return f"at {where}: {why}" if where else why


def unstorable_at(value: Any) -> tuple[str, str] | None:
    """(where in ``value``, why) for the first thing in it that cannot be stored; None
    when all can. Where: ``""`` for the value itself, else a path such as ``a.b[2]``.

    Any string anywhere in it (list items, object keys and values) with a NUL byte or
    text that is not UTF-8 (text_problem), and any NaN or infinite number (JSON has
    none). Walked without recursion: a value as deep as JSON parsing allows is fine."""
    todo: list[tuple[str, Any]] = [("", value)]
    while todo:
        where, item = todo.pop()
        if isinstance(item, str):
            if err := text_problem(item):
                return where.removeprefix("."), err
        elif isinstance(item, float) and not math.isfinite(item):
            shown = "NaN" if math.isnan(item) else "Infinity" if item > 0 else "-Infinity"
            return where.removeprefix("."), f"is {shown}, which JSON cannot hold; give a " \
                "finite number"
        elif isinstance(item, list):
            todo.extend((f"{where}[{i}]", v) for i, v in reversed(list(enumerate(item))))
        elif isinstance(item, dict):
            for key in item:
                if isinstance(key, str) and (err := text_problem(key)):
                    return where.removeprefix("."), f"key {shown_text(key)}: {err}"
            todo.extend((where + _member(str(k)), v) for k, v in reversed(list(item.items())))
    return None


def _member(key: str) -> str:
    return f".{key}" if key.isidentifier() else f"[{shown_text(key)}]"


def is_file_value(value: Any) -> bool:
    """Whether ``value`` is a stored file: its store key, and optionally its name and size
    (a bare ``{"$ref": KEY}``, as a screen step's screenshot is, names no file)."""
    if not (isinstance(value, dict) and FILE_REF_KEY in value and set(value) <= _FILE_KEYS):
        return False
    key, name, size = value[FILE_REF_KEY], value.get("name", ""), value.get("size", 0)
    return isinstance(key, str) and bool(_SHA256.fullmatch(key)) and isinstance(name, str) \
        and isinstance(size, int) and not isinstance(size, bool) and size >= 0


def file_value(key: str, name: str, size: int) -> dict[str, Any]:
    return {FILE_REF_KEY: key, "name": name, "size": size}


def is_dir_value(value: Any) -> bool:
    """Whether ``value`` is a folder on a machine: its absolute path, the machine's id
    and its host name (for messages)."""
    return isinstance(value, dict) and set(value) == _DIR_KEYS \
        and all(isinstance(value[k], str) and value[k] for k in _DIR_KEYS) \
        and value[DIR_KEY].startswith("/")


def dir_value(path: str, device: str, host: str) -> dict[str, Any]:
    return {DIR_KEY: path, "device": device, "host": host}


def dir_values(value: Any) -> list[dict[str, Any]]:
    """Every folder in ``value``, however deep in lists and objects."""
    if is_dir_value(value):
        return [value]
    if isinstance(value, list):
        return [d for v in value for d in dir_values(v)]
    if isinstance(value, dict):
        return [d for v in value.values() for d in dir_values(v)]
    return []


def machine_path(value: Any) -> str | None:
    """The first folder or unstored file of a machine (``$dir`` or ``$local``) anywhere in
    ``value``, as its path; None when it holds none. Only a person's command on that
    machine may name one (shared/inputs.py): from a step's outputs or a model's call it
    would show the step, or store, whatever the worker can read."""
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            for key in (DIR_KEY, LOCAL_KEY):
                if key in item:
                    return str(item[key])[:200]
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return None


def is_local_file(value: Any) -> bool:
    """A file on the machine that starts a run, until shared/inputs.py stores it."""
    return isinstance(value, dict) and set(value) == _LOCAL_KEYS \
        and all(isinstance(value[k], str) for k in (LOCAL_KEY, "name")) \
        and isinstance(value["size"], int)


def path_type(vtype: ValueType) -> ValueType:
    """What the command line gives for a file or directory type: a path, or a list."""
    return ValueType("string", vtype.depth)


_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}


def from_text(text: str, vtype: ValueType) -> Any:
    """Turn command-line text into a value of ``vtype`` (ValueError says why not).

    Arrays and objects are JSON; an array given a non-JSON text gets it as its one
    item, so ``--input repos=. --input repos=../other`` reads naturally.
    """
    if vtype.is_array or vtype.base == "object":
        if text.lstrip().startswith(("[", "{")):
            value = json_value(text)
            err = type_error(value, vtype)
            if err:
                raise ValueError(err)
            return value
        if vtype.is_array:
            return [from_text(text, vtype.element())]
        raise ValueError(f"expected a JSON object such as '{{\"key\": \"value\"}}', got {text!r}")
    if vtype.base == "string":
        return text
    if vtype.base in PATH_BASES:  # a path: read by shared/inputs.py, relative to its caller
        raise ValueError(f"a {vtype.base} input is given by its path (shared/inputs.py "
                         "reads it)")
    if vtype.base == "boolean":
        low = text.strip().lower()
        if low in _TRUE or low in _FALSE:
            return low in _TRUE
        raise ValueError(f"expected true or false, got {text!r}")
    try:
        return int(text) if vtype.base == "integer" else _number(text)
    except ValueError:
        raise ValueError(f"expected {vtype.base}, got {text!r}") from None


def json_value(text: str) -> Any:
    """``text`` parsed as JSON; ValueError saying why not, as one line a user can act on."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not valid JSON ({exc.msg} at column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:
        raise ValueError(json_trouble(exc)) from None


def json_trouble(exc: ValueError | RecursionError) -> str:
    """What json.loads's errors other than JSONDecodeError mean, as a fix."""
    if isinstance(exc, RecursionError):
        return "is JSON nested too deeply to read; flatten it"
    # the one other ValueError: an integer past Python's digit limit
    return (f"holds a number of more than {sys.get_int_max_str_digits():,} digits, which "
            "skillq does not read; give a shorter one")


def _number(text: str) -> int | float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() \
        else value


def compatible(source: ValueType, target: ValueType) -> bool:
    """Whether a value typed ``source`` may be passed where ``target`` is declared.

    integer and number mix freely (a step passing 7 to a number input is fine);
    strings, booleans, objects and array depth must agree.
    """
    if source.depth != target.depth:
        return False
    numeric = {"integer", "number"}
    return source.base == target.base or (source.base in numeric and target.base in numeric)
