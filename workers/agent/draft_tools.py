"""A skill builder's file tools (issue 44): ``write_file``, ``read_file`` and
``list_files``, confined to the one draft folder the builder is building.

A path is relative to the draft folder and stays in it: an absolute path, a ``..`` that
climbs out, a symbolic link anywhere on the way, or a hidden name is refused, as is a
file past the size limit. A refusal is the tool's answer, which the model reads and
corrects; nothing outside the folder is ever created, read or changed. Commands run
through the ``bash`` tool instead, in a scratch copy under the step's protections
(workers/agent/bash_tool.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Any

from pydantic_ai import Tool

from shared.atomic import write_text

MAX_READ_CHARS = 50_000
_PATH = {"type": "string", "description": "A path inside the skill's folder, such as "
         "SKILL.md or scripts/fetch.py"}
SPECS: dict[str, tuple[str, MappingProxyType[str, Any]]] = {
    "write_file": ("Write a text file of the skill being built (created, or replaced "
                   "whole); its folders are made as needed.",
                   MappingProxyType({"type": "object", "additionalProperties": False,
                                     "required": ["path", "text"],
                                     "properties": {"path": _PATH,
                                                    "text": {"type": "string"}}})),
    "read_file": ("Read a text file of the skill being built.",
                  MappingProxyType({"type": "object", "additionalProperties": False,
                                    "required": ["path"], "properties": {"path": _PATH}})),
    "list_files": ("List the files of the skill being built.",
                   MappingProxyType({"type": "object", "additionalProperties": False,
                                     "properties": {}})),
}


class Refused(Exception):
    """A path outside the draft folder, or otherwise not one to touch."""


@dataclass
class DraftFolder:
    root: Path  # the skill's draft folder: the only place these tools reach
    max_file_bytes: int

    def target(self, path: str) -> Path:
        """The file ``path`` names inside the folder; Refused, saying why, otherwise."""
        rel = PurePosixPath(path.strip().replace("\\", "/"))
        where = f"{self.root.name}/"
        if not path.strip() or rel.is_absolute():
            raise Refused(f"'{path}' is not a path inside the skill's folder ({where}); give "
                          "one relative to it, such as SKILL.md")
        if any(part in ("..", "") or part.startswith(".") for part in rel.parts):
            raise Refused(f"'{path}' leaves the skill's folder or names a hidden file; "
                          f"write inside {where}, with no '..' and no leading dot")
        current = self.root
        for part in rel.parts:  # a link anywhere on the way could lead out
            current = current / part
            if current.is_symlink():
                raise Refused(f"{where}{rel} goes through a symbolic link; links are not "
                              "followed")
        resolved = current.resolve()
        if not resolved.is_relative_to(self.root.resolve()):
            raise Refused(f"'{path}' is outside the skill's folder ({where})")
        return current

    def write_file(self, path: str, text: str) -> str:
        try:
            target = self.target(path)
        except Refused as exc:
            return f"error: {exc}"
        size = len(text.encode("utf-8", errors="surrogatepass"))
        if size > self.max_file_bytes:
            return (f"error: {path} would be {size} bytes, over the limit of "
                    f"{self.max_file_bytes}; keep generated data out of the skill's files")
        if target.is_dir():
            return f"error: {path} is a folder"
        target.parent.mkdir(parents=True, exist_ok=True)
        write_text(target, text)
        return f"wrote {path} ({size} bytes)"

    def read_file(self, path: str) -> str:
        try:
            target = self.target(path)
        except Refused as exc:
            return f"error: {exc}"
        if not target.is_file():
            return f"error: no file {path} in {self.root.name}/; list_files shows what is there"
        try:
            text = target.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            return f"error: {path} is not UTF-8 text"
        cut = f"\n[... {len(text) - MAX_READ_CHARS} more characters]" \
            if len(text) > MAX_READ_CHARS else ""
        return text[:MAX_READ_CHARS] + cut

    def list_files(self) -> str:
        found = sorted(p.relative_to(self.root).as_posix() for p in self.root.rglob("*")
                       if p.is_file() and not p.is_symlink() and not any(
                           part.startswith(".") for part in p.relative_to(self.root).parts))
        return "\n".join(found) or "(no files yet)"

    def tools(self) -> list[Tool[None]]:
        calls: dict[str, Callable[..., str]] = {
            "write_file": self.write_file, "read_file": self.read_file,
            "list_files": self.list_files}
        return [Tool.from_schema(calls[name], name=name, description=text,
                                 json_schema=dict(schema))
                for name, (text, schema) in SPECS.items()]
