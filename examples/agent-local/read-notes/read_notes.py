"""read-notes: the text notes of one folder, in name order.

Script protocol: inputs JSON from the file named by SKILL_INPUTS (else stdin), outputs
JSON to the file named by SKILL_OUTPUT (else stdout). Exit 0 = success, 1 = permanent
failure (bad input). Standard library only.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import NoReturn

SUFFIXES = (".txt", ".md")


def fail(message: str) -> NoReturn:
    print(f"read-notes: {message}", file=sys.stderr)
    sys.exit(1)


def load_inputs() -> dict:
    path = os.environ.get("SKILL_INPUTS")
    try:
        data = json.loads(Path(path).read_text("utf-8")) if path else json.load(sys.stdin)
    except (OSError, ValueError) as exc:
        fail(f"cannot read the inputs JSON: {exc}")
    if not isinstance(data, dict):
        fail("the inputs JSON must be an object")
    return data


def emit(outputs: dict) -> None:
    text = json.dumps(outputs, ensure_ascii=False)
    target = os.environ.get("SKILL_OUTPUT")
    if target:
        Path(target).write_text(text, "utf-8")
    else:
        print(text)


def resolve(folder: str) -> Path:
    path = Path(folder).expanduser()
    # The worker's cwd is a scratch folder; the caller meant their own directory.
    base = os.environ.get("SKILLQ_WORKDIR")
    return path if path.is_absolute() or not base else Path(base) / path


def read_notes(folder: Path, max_chars: int) -> list[dict[str, str]]:
    if not folder.is_dir():
        fail(f"not a folder: {folder}")
    notes = []
    for path in sorted(folder.iterdir(), key=lambda p: p.name):
        if not path.is_file() or path.suffix.lower() not in SUFFIXES:
            continue
        text = path.read_text("utf-8", errors="replace").strip()
        if text:
            notes.append({"file": path.name, "text": text[:max_chars]})
    return notes


def main() -> None:
    inputs = load_inputs()
    folder, max_chars = inputs.get("folder"), inputs.get("max_chars", 2000)
    if not isinstance(folder, str) or not folder.strip():
        fail("folder must be a non-empty string")
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
        fail(f"max_chars must be a positive integer, got {max_chars!r}")
    notes = read_notes(resolve(folder), max_chars)
    emit({"notes": notes, "count": len(notes)})


if __name__ == "__main__":
    main()
