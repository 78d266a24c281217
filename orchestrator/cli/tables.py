"""Lists on the command line: one set of rows, printed in the form the reader needs.

A list command builds its rows (dicts of machine values: datetimes, numbers, lists) and
names the columns it shows. `emit` prints them:

- ``--json``: a JSON array of the rows, one object each, the same keys in every object
  (each column's key, and any other field the command adds); timestamps ISO 8601 in
  UTC, numbers as numbers, nothing missing as null. What a script reads.
- stdout a terminal: a rich table that fits the terminal's width. A column gets its
  widest cell when everything fits; otherwise the columns that may wrap narrow, widest
  first, never below their longest word, so text wraps between words. Only when even
  the words cannot fit does the widest column cut words, with an ellipsis.
- stdout not a terminal (a pipe, a file): tab-separated lines, a header line of the
  column keys first, one line per row, every cell whole (whitespace folded to one space
  so a cell never holds a tab or a line break). `cut -f`, `awk -F'\\t'` and `grep` work.

Prefect and kubectl keep these apart the same way: the width of whoever reads.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from enum import Enum
from typing import Any, Literal, TextIO

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from orchestrator.cli.common import err, out

Row = Mapping[str, Any]
# The terminal table has no outer frame; columns are three cells apart (a space of
# padding, a blank divider, a space of padding), the header underlined: room for text.
GAP = 3
# A wrapping column keeps this many cells (or its widest cell, if narrower) while spare
# columns can make room, so a message wraps into lines, not a column of single words.
COMFORT = 24
# A wrapping column is not narrowed below this while a one-line column can give way.
MIN_WRAP = 12


@dataclass(frozen=True)
class Column:
    """One column: the row key it shows, and how.

    ``show`` turns the row into the cell's text (default: the key's value, see `text`);
    ``wrap=False`` keeps a cell on one line (ids to paste); ``limit`` shortens a long
    cell in the terminal table only (piped, it is whole); ``style`` colours a cell;
    ``spare`` > 0 lets a terminal too narrow for every column leave this one out
    (highest first; the table says which), 0 keeps it always.
    """

    key: str
    header: str | None = None
    show: Callable[[Row], str] | None = None
    wrap: bool = True
    justify: Literal["left", "right"] = "left"
    limit: int | None = None
    style: Callable[[Row], str] | None = None
    spare: int = 0

    @property
    def title(self) -> str:
        return self.header if self.header is not None else self.key.replace("_", " ")

    def cell(self, row: Row) -> str:
        return self.show(row) if self.show is not None else text(row.get(self.key))


def text(value: Any) -> str:
    """A value as a person reads it in a cell: '-' for nothing, local time to the
    second, lists comma-separated."""
    if value is None or value == "" or value == []:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, datetime):
        return f"{value.astimezone():%Y-%m-%d %H:%M:%S}" if value.tzinfo else \
            f"{value:%Y-%m-%d %H:%M:%S}"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(text(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


def jsonable(value: Any) -> Any:
    """A value JSON can hold, machine-readable: aware datetimes in UTC, ISO 8601."""
    if isinstance(value, datetime):
        return (value.astimezone(UTC) if value.tzinfo else value).isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        return sorted(jsonable(v) for v in value)
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def print_json(data: Any, file: TextIO | None = None) -> None:
    print(json.dumps(jsonable(data), indent=2, ensure_ascii=False), file=file or sys.stdout)


def one_line(value: str) -> str:
    return " ".join(value.split())


def tsv_lines(rows: Iterable[Row], columns: Sequence[Column]) -> list[str]:
    lines = ["\t".join(c.key for c in columns)]
    lines.extend("\t".join(one_line(c.cell(row)) for c in columns) for row in rows)
    return lines


def _shorten(value: str, limit: int | None) -> str:
    return value if limit is None or len(value) <= limit else value[:limit - 1] + "…"


def _longest_word(value: str) -> int:
    return max((cell_len(word) for word in value.split()), default=0)


def fit(natural: Sequence[int], floor: Sequence[int], available: int) -> list[int]:
    """Widths that sum to at most ``available``: each column its natural width, but
    the widest narrowed first (one level cuts them all), never below its floor.

    When even the floors do not fit, the floors are what comes back.
    """
    widths = [max(n, f) for n, f in zip(natural, floor, strict=True)]
    if sum(widths) <= available:
        return widths

    def at(level: int) -> list[int]:
        return [max(f, min(w, level)) for w, f in zip(widths, floor, strict=True)]

    low, high = 0, max(widths)  # the highest level that fits, by bisection
    while low < high:
        mid = (low + high + 1) // 2
        if sum(at(mid)) <= available:
            low = mid
        else:
            high = mid - 1
    return at(low)


def frame(count: int) -> int:
    return GAP * max(count - 1, 0)


def layout(cells: Sequence[Sequence[str]], columns: Sequence[Column],
           width: int) -> list[int | None]:
    """Each column's content width in a table ``width`` cells wide, None for a column
    left out; ``cells`` holds the header row first, then each row's cells.

    What gives way, each step only when the one before does not fit: wrapping columns
    narrow to COMFORT; spare columns are left out; wrapping columns narrow to their
    longest word; long words in wrapping columns are cut (an ellipsis), the one-line
    columns (ids) still whole; then every column, widest first.
    """
    by_column = list(zip(*cells, strict=True)) if cells else [() for _ in columns]
    natural = [max(1, max((cell_len(v) for v in values), default=1)) for values in by_column]
    words = [max(1, max((_longest_word(v) for v in values), default=1)) for values in by_column]
    whole = [w if c.wrap else n for c, n, w in zip(columns, natural, words, strict=True)]
    comfy = [max(w, min(n, COMFORT)) if c.wrap else n
             for c, n, w in zip(columns, natural, words, strict=True)]
    least = [min(w, MIN_WRAP) if c.wrap else n
             for c, n, w in zip(columns, natural, words, strict=True)]

    def room(kept: list[int]) -> int:
        return max(len(kept), width - frame(len(kept)))

    def keep(floors: list[int]) -> list[int]:
        """The columns left when spare ones go, highest first, until the rest fit."""
        kept = list(range(len(columns)))
        while sum(floors[i] for i in kept) > room(kept):
            spare = [i for i in kept if columns[i].spare > 0]
            if not spare:
                break
            kept.remove(max(spare, key=lambda i: (columns[i].spare, i)))
        return kept

    # Leave out no more than it takes: when even without every spare column the wrapping
    # ones cannot have their comfortable width, they will be narrower anyway, so keep the
    # spare columns that fit beside their narrower floors.
    for floors in (comfy, whole, least):
        kept = keep(floors)
        if sum(floors[i] for i in kept) <= room(kept):
            break
    widths = [natural[i] for i in kept]
    for floors in (comfy, whole, least, [1] * len(columns)):
        widths = fit(widths, [floors[i] for i in kept], room(kept))
        if sum(widths) <= room(kept):
            break
    placed: list[int | None] = [None] * len(columns)
    for i, w in zip(kept, widths, strict=True):
        placed[i] = w
    return placed


def table(rows: Sequence[Row], columns: Sequence[Column], *, width: int,
          title: str | None = None) -> tuple[Table, list[str]]:
    """The table, and the titles of the columns left out for width."""
    body = [[one_line(_shorten(c.cell(row), c.limit)) for c in columns] for row in rows]
    widths = layout([[c.title for c in columns], *body], columns, width)
    shown = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                  pad_edge=False, header_style="bold")
    for c, w in zip(columns, widths, strict=True):
        if w is not None:
            shown.add_column(c.title, width=w, no_wrap=not c.wrap, overflow="ellipsis",
                             justify=c.justify)
    for row, cells in zip(rows, body, strict=True):
        # Text, not markup: errors and inputs hold [brackets].
        shown.add_row(*(Text(v, style=c.style(row) if c.style else "")
                        for c, v, w in zip(columns, cells, widths, strict=True)
                        if w is not None))
    return shown, [c.title for c, w in zip(columns, widths, strict=True) if w is None]


def emit(rows: Sequence[Row], columns: Sequence[Column], *, as_json: bool = False,
         title: str | None = None, empty: str | None = None,
         console: Console | None = None) -> None:
    """Print a list command's rows as JSON, a table (a terminal) or TSV (anything else).

    ``empty`` is said when there are no rows: in the terminal instead of the table,
    piped on stderr under the bare header line (so stdout stays parseable).
    """
    if as_json:
        print_json(list(rows))
        return
    console = console or out
    if not console.is_terminal:
        console.file.write("\n".join(tsv_lines(rows, columns)) + "\n")
        console.file.flush()
        if not rows and empty:
            err.print(empty, markup=False)
        return
    if not rows and empty:
        console.print(empty, markup=False)
        return
    shown, hidden = table(rows, columns, width=console.width, title=title)
    console.print(shown)
    if hidden:
        console.print(Text(f"not shown, for width: {', '.join(hidden)} (--json has them)",
                           style="dim"), soft_wrap=False)


def aside(message: str, console: Console | None = None) -> None:
    """A line about a list, not a row of it: under the table in a terminal, on stderr
    when stdout is piped, so the rows stay all a script reads."""
    console = console or out
    (console if console.is_terminal else err).print(message, markup=False)
