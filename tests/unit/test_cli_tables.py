"""orchestrator/cli/tables.py: the one way list commands print rows. In a terminal the
table fits its width and wraps between words; piped, each row is one tab-separated line,
whole; --json is an array of objects with machine values. And `skillq runs --since`."""

from __future__ import annotations

import io
import json
import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
import typer
from rich.console import Console

from orchestrator.cli.history_cmds import RUN_COLUMNS, parse_since
from orchestrator.cli.tables import Column, emit, fit, layout

ERROR = ("step 'each' item 1 failed: boom: cannot handle item 'x' after 3 attempts; see "
         "`skillq run-show` for the attempt's stderr")
RUNS = [
    {"run_id": "run-0123456789abcdef", "skill": "youtube-creator-analytics", "version": 12,
     "state": "failed", "source": "production", "triggered_by": "schedule:3",
     "created_at": datetime(2026, 12, 2, 9, 30, 5, tzinfo=UTC), "duration_s": 12.5,
     "error": ERROR},
    {"run_id": "run-fedcba9876543210", "skill": "echo", "version": 1, "state": "succeeded",
     "source": "test_window", "triggered_by": "cli",
     "created_at": datetime(2026, 12, 2, 9, 31, tzinfo=timezone(timedelta(hours=1))),
     "duration_s": None, "error": None},
]


def terminal(width: int) -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=width, force_terminal=True, color_system=None,
                   highlight=False, soft_wrap=True), buffer


def shown_words(output: str) -> set[str]:
    return set(output.split())


@pytest.mark.parametrize("width", [72, 80, 100, 120, 160, 250])
def test_a_terminal_table_fits_and_never_breaks_a_word(width: int) -> None:
    console, buffer = terminal(width)
    emit(RUNS, RUN_COLUMNS, title="runs", console=console)
    output = buffer.getvalue()
    lines = output.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= width, output
    words = shown_words(output)
    # Ids, names and states are what a user pastes or greps for: always whole.
    for row in RUNS:
        assert {row["run_id"], row["skill"], row["state"]} <= words, output
    hidden = " ".join(output.split()).partition("not shown, for width:")[2]
    for column in RUN_COLUMNS:
        if column.title not in hidden:  # a shown column shows each of its words whole
            for row in RUNS:
                assert set(column.cell(row).split()) <= words, (column.key, output)
    assert "…" not in output, output


def test_a_wide_terminal_shows_every_column_on_one_line_per_row() -> None:
    console, buffer = terminal(250)
    emit(RUNS, RUN_COLUMNS, title="runs", console=console)
    lines = buffer.getvalue().splitlines()
    assert lines[0].strip() == "runs"
    header = lines[1].split()
    assert header[:4] == ["run", "skill", "v", "state"] and "triggered" in header
    first = next(ln for ln in lines if "run-0123456789abcdef" in ln)
    assert ERROR in first and "schedule:3" in first and "12.50s" in first
    assert not any(ln.startswith("not shown") for ln in lines)


def test_a_narrow_terminal_leaves_out_spare_columns_and_says_which() -> None:
    console, buffer = terminal(80)
    emit(RUNS, RUN_COLUMNS, title="runs", console=console)
    output = buffer.getvalue()
    said = " ".join(output.split())
    assert "not shown, for width: v, source, triggered by, created, duration (--json has " \
        "them)" in said, output
    assert max(len(line.rstrip()) for line in output.splitlines()) <= 80


def test_when_words_cannot_fit_ids_stay_whole_and_long_words_get_an_ellipsis() -> None:
    columns = [Column("id", wrap=False), Column("path")]
    rows = [{"id": "run-0123456789abcdef", "path": "/srv/vault/" + "x" * 80 + " ok"}]
    console, buffer = terminal(50)
    emit(rows, columns, console=console)
    output = buffer.getvalue()
    assert "run-0123456789abcdef" in output and "…" in output
    assert max(len(line.rstrip()) for line in output.splitlines()) <= 50, output


def test_fit_narrows_the_widest_first_and_never_below_a_floor() -> None:
    assert fit([10, 20], [1, 1], 40) == [10, 20]
    assert fit([10, 20, 40], [1, 1, 1], 50) == [10, 20, 20]
    assert fit([10, 20, 40], [10, 20, 30], 50) == [10, 20, 30]  # floors win
    widths = layout([["run", "error"], ["run-0123456789abcdef", "a b c d e f g h"]],
                    [Column("run", wrap=False), Column("error")], 30)
    assert widths[0] == 20 and widths[1] is not None and widths[1] <= 7


def test_piped_rows_are_whole_tab_separated_lines_under_a_header_of_keys() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=80, force_terminal=False)
    long_error = "boom\tand\nmore " + "word " * 200
    rows = [{**RUNS[0], "error": long_error}, RUNS[1]]
    emit(rows, RUN_COLUMNS, console=console)
    lines = buffer.getvalue().splitlines()
    assert len(lines) == 3, lines
    assert lines[0].split("\t") == [c.key for c in RUN_COLUMNS]
    first = lines[1].split("\t")
    assert len(first) == len(RUN_COLUMNS)
    assert first[0] == "run-0123456789abcdef" and first[4] == "production"
    assert first[-1] == " ".join(long_error.split())  # whole, on one line, no tab inside
    second = dict(zip(lines[0].split("\t"), lines[2].split("\t"), strict=True))
    assert (second["duration_s"], second["error"], second["triggered_by"]) == ("-", "-", "cli")


def test_piped_with_no_rows_prints_the_header_and_says_so_on_stderr(
        capsys: pytest.CaptureFixture[str]) -> None:
    buffer = io.StringIO()
    emit([], RUN_COLUMNS, console=Console(file=buffer, force_terminal=False),
         empty="no runs match")
    assert buffer.getvalue() == "\t".join(c.key for c in RUN_COLUMNS) + "\n"
    assert "no runs match" in capsys.readouterr().err


def test_json_is_an_array_of_objects_with_machine_values(
        capsys: pytest.CaptureFixture[str]) -> None:
    emit(RUNS, RUN_COLUMNS, as_json=True)
    data = json.loads(capsys.readouterr().out)
    assert isinstance(data, list) and len(data) == 2
    assert [set(d) for d in data] == [set(RUNS[0])] * 2
    assert data[0]["created_at"] == "2026-12-02T09:30:05+00:00"
    assert data[1]["created_at"] == "2026-12-02T08:31:00+00:00"  # UTC, whatever it was in
    assert data[0]["version"] == 12 and data[0]["duration_s"] == 12.5
    assert data[1]["duration_s"] is None and data[1]["error"] is None


NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("given", "expected"), [
    ("30m", NOW - timedelta(minutes=30)),
    ("2h", NOW - timedelta(hours=2)),
    ("1d", NOW - timedelta(days=1)),
    ("1w", NOW - timedelta(weeks=1)),
    ("1d12h", NOW - timedelta(hours=36)),
    ("2026-12-01T09:30+01:00", datetime(2026, 12, 1, 8, 30, tzinfo=UTC)),
    ("2026-12-01T08:00Z", datetime(2026, 12, 1, 8, 0, tzinfo=UTC)),
])
def test_since_takes_an_age_or_an_iso_time(given: str, expected: datetime) -> None:
    assert parse_since(given, now=NOW) == expected


def test_since_without_an_offset_is_local_time() -> None:
    moment = parse_since("2026-12-01")
    assert moment.tzinfo is not None
    assert moment == datetime(2026, 12, 1).astimezone()


@pytest.mark.parametrize("given", ["yesterday", "2h ago", "-1d", "12", "2026-13-01"])
def test_since_refuses_what_it_cannot_read_naming_both_forms(given: str) -> None:
    with pytest.raises(typer.BadParameter, match=re.escape(f"'{given}' is neither an age")):
        parse_since(given)
