"""Files in and out of a script step: the bytes of its ``file`` inputs, fetched from the
shared store into its scratch folder, and the files it names as ``file`` outputs, put
back into the store.

Daemons share no filesystem: a file travels as ``{"$ref": "sha256:...", "name", "size"}``
(shared/valuetypes.py) and its bytes through the store (shared/store.py), so a step on any
daemon gets a local path to the same bytes, checked against their SHA-256.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from shared.manifest import Manifest
from shared.valuetypes import (
    FILE_REF_KEY,
    LOCAL_KEY,
    ValueType,
    file_value,
    is_file_value,
    is_local_file,
)

FILES_DIR = "files"  # under the scratch folder: scratch/files/<input>/[<item>/]<name>
FALLBACK_NAME = "file"  # a stored file that names none (a screenshot handed on)
_UNSAFE = re.compile(r"[^\w.\-+@ ]")


class FileStore(Protocol):
    """Where files' bytes live; ``max_bytes`` caps one file (SKILLQ_FILE_MAX_BYTES)."""

    @property
    def max_bytes(self) -> int: ...

    def fetch(self, key: str) -> bytes: ...

    def put(self, data: bytes, name: str) -> str: ...


@dataclass(frozen=True, slots=True)
class DatabaseFiles:
    """The shared store in PostgreSQL, one short transaction per file."""

    database_url: str
    max_bytes: int

    def fetch(self, key: str) -> bytes:
        from shared.db.session import transaction
        from shared.store import get_bytes

        with transaction(self.database_url) as session:
            return bytes(get_bytes(session, key))

    def put(self, data: bytes, name: str) -> str:
        from shared.db.session import transaction
        from shared.store import media_type_for, put_bytes

        with transaction(self.database_url) as session:
            return put_bytes(session, data, media_type_for(name))


class FileProblem(Exception):
    """A file input that cannot be materialized, or a file output that cannot be stored:
    the step fails with this message (never a traceback)."""


def uses_files(manifest: Manifest) -> bool:
    return any(s.value_type.base == "file" for s in (*manifest.inputs, *manifest.outputs))


def materialize(manifest: Manifest, inputs: dict[str, Any], scratch: Path, store: FileStore
                ) -> dict[str, Any]:
    """``inputs`` as the script sees them: each file input an absolute path to its bytes,
    written under ``scratch``/files/. FileProblem when a file is missing or altered."""
    seen = dict(inputs)
    for spec in manifest.inputs:
        value = inputs.get(spec.name)
        if spec.value_type.base == "file" and value is not None:
            seen[spec.name] = _fetch(value, spec.value_type, scratch / FILES_DIR / spec.name,
                                     spec.name, store)
    return seen


def _fetch(value: Any, vtype: ValueType, into: Path, name: str, store: FileStore) -> Any:
    if vtype.is_array:
        return [_fetch(v, vtype.element(), into / str(i), f"{name}[{i}]", store)
                for i, v in enumerate(value)]
    if is_local_file(value):  # recorded without being stored: its bytes are on another machine
        raise FileProblem(f"input '{name}': the file {value[LOCAL_KEY]} was not put in the "
                          "shared store when the run was recorded; start the run again")
    if not is_file_value(value):
        raise FileProblem(f"input '{name}': expected a stored file, got {str(value)[:60]}")
    key = value[FILE_REF_KEY]
    try:
        data = store.fetch(key)
    except KeyError:
        raise FileProblem(f"input '{name}': file {key} is not in the shared store "
                          "(purged or archived?)") from None
    if "sha256:" + hashlib.sha256(data).hexdigest() != key:
        raise FileProblem(f"input '{name}': the store's bytes for {key} do not match their "
                          "hash")
    into.mkdir(parents=True, exist_ok=True)
    path = into / safe_name(value.get("name", ""))
    path.write_bytes(data)
    return str(path)


def safe_name(name: str) -> str:
    """A file name that stays in its folder: the last part, odd characters replaced."""
    base = _UNSAFE.sub("_", name.replace("\\", "/").rsplit("/", 1)[-1]).strip(" .")
    return base[:200] or FALLBACK_NAME


def store_outputs(manifest: Manifest, outputs: dict[str, Any], cwd: Path, scratch: Path,
                  store: FileStore) -> dict[str, Any]:
    """``outputs`` with each path a file output names (relative to the script's folder,
    or absolute) replaced by the stored file. The file must be a regular file inside the
    step's scratch folder, no larger than ``store.max_bytes``; FileProblem otherwise."""
    stored = dict(outputs)
    for spec in manifest.outputs:
        if spec.value_type.base == "file" and outputs.get(spec.name) is not None:
            stored[spec.name] = _walk(outputs[spec.name], spec.value_type, spec.name,
                                      lambda text, where: _put(text, where, cwd, scratch, store))
    return stored


def _walk(value: Any, vtype: ValueType, where: str, leaf: Callable[[str, str], Any]) -> Any:
    if vtype.is_array:
        return [_walk(v, vtype.element(), f"{where}[{i}]", leaf) for i, v in enumerate(value)]
    return leaf(value, where)


def _put(text: str, where: str, cwd: Path, scratch: Path, store: FileStore) -> Any:
    path = Path(os.path.normpath(cwd / text))  # the name as the script gave it, unresolved
    root = scratch.resolve()
    if not path.resolve().is_relative_to(root):
        raise FileProblem(f"output '{where}': {text!r} is outside the step's scratch folder; "
                          "write the file in the working directory (or under it)")
    try:  # O_NOFOLLOW, then fstat: a link to a worker's file is refused, as SKILL_OUTPUT is
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise FileProblem(f"output '{where}': names {text!r}, which the step did not write"
                          ) from None
    except OSError:
        raise FileProblem(f"output '{where}': {text!r} is not a regular file") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise FileProblem(f"output '{where}': {text!r} is not a regular file")
        data = fh.read(store.max_bytes + 1)
    if len(data) > store.max_bytes:
        raise FileProblem(f"output '{where}': {text!r} is more than {store.max_bytes:,} "
                          "bytes, over SKILLQ_FILE_MAX_BYTES")
    return file_value(store.put(data, path.name), path.name, len(data))
