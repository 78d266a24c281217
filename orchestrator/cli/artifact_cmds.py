"""`skillq artifact get REF [-o PATH]`: bytes from the shared store (a file output, a
screenshot, an output too large to keep inline), as the dashboard's download serves them."""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from shared.errors import ArtifactError

artifact_app = typer.Typer(help="Files and large values in the shared store: "
                           "`skillq artifact get REF [-o PATH]`.", no_args_is_help=True)

_KEY = re.compile(r"(?:sha256[:-])?([0-9a-f]{64})")
_SAFE_NAME = re.compile(r"[^\w.\-+@ ]")


def register(app: typer.Typer) -> None:
    app.add_typer(artifact_app, name="artifact")


@artifact_app.command("get")
def get(
    ref: Annotated[str, typer.Argument(
        help='The key, sha256:<hex> (the "$ref" of an output), or the whole '
             '{"$ref": ..., "name": ...} value.', show_default=False)],
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Write to this file (a folder: the file's own name in it); "
                               "- or unset: stdout.", show_default=False)] = None,
) -> None:
    """Fetch stored bytes, to a file or stdout (exit 1 when the store has no such key)."""
    key, name = parse_ref(ref)
    from orchestrator.connect import connect
    from shared.db.session import transaction
    from shared.store import get_bytes

    conn = connect(workers=False)
    with transaction(conn.endpoints.database_url) as session:
        try:
            data = bytes(get_bytes(session, key))
        except KeyError:
            raise ArtifactError(f"no artifact {key} in the shared store; a run's file "
                                   "outputs show their key (`skillq run-show RUN`)") from None
    if output is None or str(output) == "-":
        if sys.stdout.isatty() and not _is_text(data):
            raise ArtifactError(f"{key} is {len(data):,} bytes of binary data: give "
                                   "-o PATH rather than print it to the terminal")
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    target = output / (name or key.replace(":", "-")) if output.is_dir() else output
    write_file(target, data)
    print(f"wrote {len(data):,} bytes to {target}", file=sys.stderr)


def parse_ref(ref: str) -> tuple[str, str | None]:
    """("sha256:<hex>", the file's name when the value carried one)."""
    text, name = ref.strip(), None
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = None
        if not isinstance(value, dict) or not isinstance(value.get("$ref"), str):
            raise ArtifactError(f"{ref[:80]!r} is not a stored value: give its "
                                   '"$ref" key, sha256:<hex>')
        text = value["$ref"]
        if isinstance(value.get("name"), str):
            name = _SAFE_NAME.sub("_", Path(value["name"]).name).strip(" .") or None
    found = _KEY.fullmatch(text.lower())
    if found is None:
        raise ArtifactError(f"{ref[:80]!r} is not an artifact key: keys look like "
                               "sha256:<64 hex digits>, the \"$ref\" of a stored output")
    return "sha256:" + found.group(1), name


def _is_text(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return b"\0" not in data


def write_file(path: Path, data: bytes) -> None:
    """Write beside ``path``, then rename: an interrupted fetch leaves no half file. The
    mode is what the umask gives a new file (0644 under 022), as `curl -o` writes it."""
    folder = path.parent if str(path.parent) else Path()
    if not folder.is_dir():
        raise ArtifactError(f"cannot write {path}: the folder {folder} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
