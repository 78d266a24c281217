"""triage-board: notes joined with their triage, high priority first.

Script protocol: inputs JSON from the file named by SKILL_INPUTS (else stdin), outputs
JSON to the file named by SKILL_OUTPUT (else stdout). Exit 0 = success, 1 = permanent
failure (bad input). Standard library only and deterministic.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

ORDER = ("high", "medium", "low")


def fail(message: str) -> NoReturn:
    print(f"triage-board: {message}", file=sys.stderr)
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


def cell(value: Any) -> str:
    # A pipe or a newline in a summary would break the table's row.
    return " ".join(str(value).split()).replace("|", "\\|")


def board(notes: list[dict], triage: list[dict]) -> dict[str, Any]:
    if len(notes) != len(triage):
        fail(f"{len(notes)} notes but {len(triage)} triage results: they pair by position")
    rows = [{"file": n.get("file", ""), "category": t.get("category", ""),
             "priority": str(t.get("priority", "")).strip().lower(),
             "summary": t.get("summary", "")} for n, t in zip(notes, triage, strict=True)]

    def rank(row: dict) -> int:
        return ORDER.index(row["priority"]) if row["priority"] in ORDER else len(ORDER)

    rows.sort(key=rank)  # stable: file order within a priority
    lines = ["| priority | category | file | summary |", "| --- | --- | --- | --- |"]
    lines += [f"| {cell(r['priority'])} | {cell(r['category'])} | {cell(r['file'])} | "
              f"{cell(r['summary'])} |" for r in rows]
    counts = {p: sum(r["priority"] == p for r in rows) for p in ORDER}
    for row in rows:
        if row["priority"] not in ORDER:
            counts[row["priority"]] = counts.get(row["priority"], 0) + 1
    return {"items": rows, "board": "\n".join(lines) + "\n", "counts": counts}


def main() -> None:
    inputs = load_inputs()
    notes, triage = inputs.get("notes"), inputs.get("triage")
    for name, value in (("notes", notes), ("triage", triage)):
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            fail(f"{name} must be a list of objects")
    emit(board(notes, triage))


if __name__ == "__main__":
    main()
