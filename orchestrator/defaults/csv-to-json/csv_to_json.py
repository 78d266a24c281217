"""csv-to-json: CSV text -> {columns, rows, count} (skillq script protocol).

Exit 0 on success; 1 on malformed CSV, with the row or column named on stderr.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from pathlib import Path
from typing import NoReturn


def fail(message: str) -> NoReturn:
    print(f"csv-to-json: {message}", file=sys.stderr)
    sys.exit(1)


def main() -> int:
    path = os.environ.get("SKILL_INPUTS")
    inputs = json.loads(Path(path).read_text(encoding="utf-8")) if path else json.load(sys.stdin)
    text, delimiter = inputs.get("text"), inputs.get("delimiter", ",")
    if not isinstance(text, str):
        fail("text must be a string")
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        fail(f"delimiter must be one character, got {delimiter!r}")
    try:
        records = [r for r in csv.reader(io.StringIO(text), delimiter=delimiter) if r]
    except csv.Error as exc:
        fail(f"not valid CSV: {exc}")
    if not records:
        fail("the text has no header row")
    columns = records[0]
    seen: set[str] = set()
    for i, column in enumerate(columns, 1):
        if not column.strip():
            fail(f"column {i} of the header has no name")
        if column in seen:
            fail(f"column '{column}' appears twice in the header")
        seen.add(column)
    rows = []
    for number, record in enumerate(records[1:], 2):
        if len(record) > len(columns):
            fail(f"row {number} has {len(record)} fields, the header {len(columns)}")
        record = record + [""] * (len(columns) - len(record))
        rows.append(dict(zip(columns, record, strict=True)))
    outputs = {"columns": columns, "rows": rows, "count": len(rows)}
    target = os.environ.get("SKILL_OUTPUT")
    if target:
        Path(target).write_text(json.dumps(outputs, ensure_ascii=False), encoding="utf-8")
    else:
        print(json.dumps(outputs, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
