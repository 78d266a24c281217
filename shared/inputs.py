"""Run inputs: from the command line or a JSON file, checked against the declared inputs.

Bad inputs are refused before anything is dispatched, each problem naming the input
and the fix; nothing is half-started.

An input of type ``file`` (or ``file[]``) is given as a path, relative to the caller's
folder (the working directory for ``--input``, the JSON file's folder for
``--inputs-file``). It is checked here (it exists, it fits SKILLQ_FILE_MAX_BYTES) and held
as a local file; ``store_files`` puts its bytes in the shared store in the transaction
that records the run, so every daemon reaches the same bytes by their SHA-256.

An input of type ``directory`` is given as a path the same way. The folder must exist
here; it is left where it is, and the value names it with this machine's id
(shared/machine.py), so the step runs on a daemon of this machine and sees it there.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shared.errors import InputError
from shared.machine import device_id, host_name
from shared.manifest import Manifest
from shared.problems import Problem, display_path
from shared.settings import get_settings
from shared.valuetypes import (
    LOCAL_KEY,
    PATH_BASES,
    ValueType,
    dir_value,
    escaped,
    file_value,
    from_text,
    is_dir_value,
    is_file_value,
    is_local_file,
    json_trouble,
    json_value,
    shown_text,
    text_problem,
    type_error,
    unstorable,
)

if TYPE_CHECKING:  # the validate path imports this module: no SQLAlchemy at import time
    from sqlalchemy.orm import Session

FILE_MAX_BYTES_ENV = "SKILLQ_FILE_MAX_BYTES"
CLI_ORIGIN = "--input"  # inputs from `skillq run`'s command line (or its local API)


def input_problems(manifest: Manifest, given: Mapping[str, Any], *, local_files: bool = False,
                   origin: str = "inputs"
                   ) -> list[tuple[str, str]]:
    """(".name", message) for every given input that does not fit, and every missing one.
    ``local_files``: a file input may still be a local file, not stored yet; ``origin``:
    where the inputs came from (``--input``: the command line, whose flag the fix names)."""
    out: list[tuple[str, str]] = []
    declared = [i.name for i in manifest.inputs]
    for key, value in given.items():
        spec = manifest.input(key)
        if spec is None:
            close = difflib.get_close_matches(key, declared, n=1)
            hint = f"did you mean '{close[0]}'?" if close else \
                f"{manifest.name} takes: {', '.join(declared) or 'no inputs'}"
            out.append((f".{_key(key)}", f"unknown input; {hint}"))
            continue
        err = type_error(value, spec.value_type, local_files=local_files)
        if err and not (value is None and not spec.required):
            out.append((f".{key}", err))
    for spec in manifest.inputs:
        if spec.required and spec.name not in given:
            how = f"give it with --input {spec.name}=VALUE" if origin == CLI_ORIGIN \
                else "give it in the run's inputs"
            out.append((f".{spec.name}", f"required input is missing ({spec.type}): {how}"))
    return out


def _key(key: str) -> str:
    """An input's name as a message shows it: quoted and escaped when it holds what a
    terminal or a JSON answer cannot carry."""
    return shown_text(key) if text_problem(key) else key


def with_defaults(manifest: Manifest, given: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs a skill's script receives: what was given, then declared defaults."""
    values = dict(given)
    for spec in manifest.inputs:
        # null for an optional input means "not given": the default applies.
        if values.get(spec.name) is None and spec.has_default and not spec.required:
            values[spec.name] = spec.default
    return values


def resolve_inputs(manifest: Manifest, given: Mapping[str, Any], *, origin: str = "inputs",
                   session: Session | None = None) -> dict[str, Any]:
    """Checked inputs with defaults applied; InputError listing every problem otherwise.

    With ``session`` (the transaction recording the run), local files are stored and
    every file input must be in the store; without, local files are still allowed."""
    if session is not None:
        given = store_files(session, manifest, given)
    problems = [Problem(origin, f"{manifest.name}{field}", msg)
                for field, msg in input_problems(manifest, given, origin=origin,
                                                 local_files=session is None)]
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
                     *, max_bytes: int | None = None, files_from: Path | None = None,
                     local_files: bool = True,
                     inputs_data: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``--input k=v`` pairs (typed by the declared inputs) over an ``--inputs-file`` JSON.

    Repeating ``--input k=...`` for an array input appends to it. No value may be larger
    than ``max_bytes`` (default: the input_max_bytes setting): what a person or a form
    hands a run is capped before it is parsed, stored in the run record or dispatched.

    A file input's path is relative to ``files_from`` (default: the working directory)
    for ``--input``, to the inputs file's folder for ``--inputs-file``; each file must
    exist and fit the file_max_bytes setting. ``local_files=False`` (a form served to
    others): paths on this machine are refused, only stored files are taken.
    ``inputs_data``: the inputs file's object, already read by the caller (the local API
    gets it from `skillq run`); ``inputs_file`` then only names it and its folder.
    """
    settings = get_settings()
    if max_bytes is None:
        max_bytes = settings.input_max_bytes
    files = _Files(files_from or Path.cwd(), settings.file_max_bytes, local_files)
    problems: list[Problem] = []
    given: dict[str, Any] = {}
    if inputs_file is not None:
        shown = display_path(inputs_file)
        data = dict(inputs_data) if inputs_data is not None \
            else _read_inputs_file(inputs_file, problems)
        given = files.all_local(manifest, data, inputs_file.absolute().parent, shown,
                                max_bytes, problems)
    from_cli: dict[str, Any] = {}
    repeated: set[str] = set()
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            shown = pair if len(pair) <= 80 else pair[:77] + "..."
            problems.append(Problem("--input", _key(shown), "write --input NAME=VALUE"))
            continue
        too_big = size_problem(value_bytes(text), max_bytes)  # before parsing it as JSON
        if too_big:
            problems.append(Problem("--input", _key(key), too_big))
            continue
        spec = manifest.input(key)
        # What no run record can hold (a NUL byte, bytes that are not UTF-8 in argv) is
        # refused before it is parsed, read as a path or sent anywhere.
        bad = text_problem(key) or text_problem(
            text, path=spec is not None and spec.value_type.base in PATH_BASES)
        if bad:
            problems.append(Problem("--input", _key(key), bad))
            continue
        if spec is None:
            from_cli[key] = text  # reported as unknown by resolve_inputs
            continue
        if spec.value_type.base in PATH_BASES:
            value = files.local(_file_text(text, spec.value_type), spec.value_type,
                                files.base, Problem("--input", key, ""), problems)
        else:
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
    return resolve_inputs(manifest, given, origin=CLI_ORIGIN)


def local_paths(manifest: Manifest, data: Mapping[str, Any], base: Path, *,
                origin: str = "inputs") -> dict[str, Any]:
    """``data`` (JSON values, from an MCP client say) with each path given for a file or
    directory input checked and made a local file or folder, relative to ``base``;
    InputError naming each input that does not fit."""
    settings = get_settings()
    problems: list[Problem] = []
    files = _Files(base, settings.file_max_bytes, True)
    given = files.all_local(manifest, data, base, origin, settings.input_max_bytes, problems)
    if problems:
        raise InputError(problems)
    return given


def _file_text(text: str, vtype: ValueType) -> Any:
    """What ``--input`` gives a file or directory type: JSON (a list of paths, a stored
    file) when it parses, else one path (``[draft] notes.txt`` is a file name, not broken JSON)."""
    value: Any = text
    if text.lstrip().startswith(("[", "{")):
        with contextlib.suppress(ValueError):  # then it is a file's name
            value = json_value(text)
        if isinstance(value, list):
            return value
    for _ in range(vtype.depth):  # one file given to a file[]: its one item
        value = [value]
    return value


class _Files:
    """Paths given for file inputs, checked and held as local files until stored; and
    for directory inputs, checked and named with this machine."""

    def __init__(self, base: Path, max_bytes: int, allowed: bool) -> None:
        self.base, self.max_bytes, self.allowed = base.absolute(), max_bytes, allowed

    def all_local(self, manifest: Manifest, data: Mapping[str, Any], base: Path, shown: str,
                  max_bytes: int, problems: list[Problem]) -> dict[str, Any]:
        given: dict[str, Any] = {}
        for key, value in data.items():
            too_big = size_problem(value_bytes(value), max_bytes)
            if too_big:
                problems.append(Problem(shown, _key(key), too_big))
                continue
            spec = manifest.input(key)
            is_path = spec is not None and spec.value_type.base in PATH_BASES
            # As parse_cli_inputs: what no run record can hold is refused first; a path
            # (a string, at any depth of a file or folder input) is checked as one.
            bad = text_problem(key) or (None if is_path else unstorable(value))
            if bad:
                problems.append(Problem(shown, _key(key), bad))
                continue
            if spec is not None and is_path:
                value = self.local(value, spec.value_type, base, Problem(shown, key, ""),
                                   problems)
            given[key] = value
        return given

    def local(self, value: Any, vtype: ValueType, base: Path, where: Problem,
              problems: list[Problem]) -> Any:
        """``value`` with every path in it (to ``vtype``'s depth) a local file; stored files
        are kept; anything else is left for the type check to report."""
        if vtype.is_array and isinstance(value, list):
            return [self.local(v, vtype.element(), base, where, problems) for v in value]
        # Not allowed: a path, and skillq's own forms of a file or folder here, alike.
        if not self.allowed and (isinstance(value, str) or is_local_file(value)
                                 or is_dir_value(value)):
            what = "a stored file" if vtype.base == "file" else "no folder"
            problems.append(_at(where, f"a {vtype.base} input takes {what} here, not a path "
                                f"on this machine; give it with `skillq run --input "
                                f"{where.field}=PATH`"))
            return value
        if not isinstance(value, str):
            return value
        found = _local_dir(value, base) if vtype.base == "directory" \
            else _local_file(value, base, self.max_bytes)
        if isinstance(found, str):
            problems.append(_at(where, found))
            return value
        return found


def _at(where: Problem, message: str) -> Problem:
    # A path that is not UTF-8 is named escaped: the message may travel as JSON.
    return Problem(where.path, where.field, escaped(message))


def _found(what: str, text: str, base: Path) -> tuple[Path, os.stat_result] | str:
    """The path ``text`` names (relative to ``base``) and what stat says of it, or why
    there is none; ``what``: file or folder, for the message."""
    if not text.strip():
        return f"is empty: give the path of a {what}"
    if bad := text_problem(text, path=True):
        return bad
    # normpath, not resolve: the name is the one given, not a link's target (base is absolute)
    path = Path(os.path.normpath(base / Path(text).expanduser()))
    try:
        return path, path.stat()
    except FileNotFoundError:
        return f"{what} '{text}' does not exist (looked for {path})"
    except OSError as exc:
        return f"{what} '{text}' cannot be read ({path}): {exc.strerror or exc}"


def _local_file(text: str, base: Path, max_bytes: int) -> dict[str, Any] | str:
    """The local file ``text`` names (relative to ``base``), or why it cannot be one."""
    found = _found("file", text, base)
    if isinstance(found, str):
        return found
    path, st = found
    if stat.S_ISDIR(st.st_mode):
        return f"'{text}' is a folder ({path}), not a file; give a file"
    if not stat.S_ISREG(st.st_mode):
        return f"'{text}' is not a regular file ({path}); give a file"
    if not os.access(path, os.R_OK):
        return f"file '{text}' cannot be read ({path}): permission denied"
    if too_big := _file_too_big(st.st_size, max_bytes):
        return f"file '{text}' {too_big}"
    if text_problem(str(path)):  # a relative path in a folder whose path is not UTF-8
        return _not_utf8("file", text, str(path))
    return {LOCAL_KEY: str(path), "name": path.name, "size": st.st_size}


def _local_dir(text: str, base: Path) -> dict[str, Any] | str:
    """The folder ``text`` names (relative to ``base``) on this machine, or why not."""
    found = _found("folder", text, base)
    if isinstance(found, str):
        return found
    path, st = found
    if not stat.S_ISDIR(st.st_mode):
        return f"'{text}' is not a folder ({path}); give a folder"
    if not os.access(path, os.R_OK | os.X_OK):
        return f"folder '{text}' cannot be read ({path}): permission denied"
    # Its real path: the sandbox mounts it there, and a link on the way could point
    # elsewhere by the time the step starts.
    real = str(path.resolve())
    if text_problem(real):  # through a link, or in a folder whose path is not UTF-8
        return _not_utf8("folder", text, real)
    return dir_value(real, device_id(get_settings()), host_name())


def _not_utf8(what: str, text: str, path: str) -> str:
    return (f"{what} '{text}' is at {path}, a path that is not UTF-8, which a run's "
            f"record cannot hold; give a {what} whose path is UTF-8")


def _file_too_big(size: int, max_bytes: int) -> str | None:
    if size <= max_bytes:
        return None
    return (f"is {size:,} bytes, over the {max_bytes:,}-byte cap on one file: give a "
            f"smaller one, or raise {FILE_MAX_BYTES_ENV}")


def store_files(session: Session, manifest: Manifest, given: Mapping[str, Any]
                ) -> dict[str, Any]:
    """``given`` with each local file's bytes put in the shared store (the file input
    becomes ``{"$ref", "name", "size"}``); a stored file given must be in the store.
    InputError naming the input and the file otherwise: the run is not recorded."""
    from shared import store  # SQLAlchemy: only where a run is recorded

    problems: list[Problem] = []

    def stored(value: Any, field: str) -> Any:
        if isinstance(value, list):
            return [stored(v, field) for v in value]
        if is_local_file(value):
            # Read here, not for every run: most runs give no file, and the settings
            # are parsed from the environment each time they are asked for.
            data = _read_local(Path(value[LOCAL_KEY]), get_settings().file_max_bytes)
            if isinstance(data, str):
                problems.append(Problem("inputs", field, data))
                return value
            key = store.put_bytes(session, data, store.media_type_for(value["name"]))
            return file_value(key, value["name"], len(data))
        if is_file_value(value) and not store.has(session, value["$ref"]):
            problems.append(Problem("inputs", field, f"no file {value['$ref']} in the store "
                                    "(`skillq artifact get` lists nothing under that key)"))
        return value

    out = dict(given)
    for spec in manifest.inputs:
        if spec.value_type.base == "file" and given.get(spec.name) is not None:
            out[spec.name] = stored(given[spec.name], f"{manifest.name}.{spec.name}")
    if problems:
        raise InputError(problems)
    return out


def _read_local(path: Path, max_bytes: int) -> bytes | str:
    """The file's bytes, or why not (it may have changed since it was checked)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return f"file {path} cannot be read: {exc.strerror or exc}"
    except ValueError:  # a NUL byte, or a surrogate no file name has: a path made up
        return f"{escaped(str(path))} is no file's path; give the file's path"
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return f"{path} is not a regular file; give a file"
        if too_big := _file_too_big(st.st_size, max_bytes):
            return f"file {path} {too_big}"
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:  # it grew while being read
        return f"file {path} {_file_too_big(len(data), max_bytes)}"
    return data


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
    except (ValueError, RecursionError) as exc:  # a number of thousands of digits, nesting
        problems.append(Problem(shown, "(file)", json_trouble(exc)))
        return {}
    if not isinstance(data, dict):
        problems.append(Problem(shown, "(file)", "must hold one JSON object of input values"))
        return {}
    return data
