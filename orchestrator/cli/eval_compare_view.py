"""`skillq bench --compare A B`'s eval view as a table: in a terminal under the version
table, on stderr when stdout is piped (its rows stay all a script reads; --json has
the view as data)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from orchestrator.cli.common import err, out
from orchestrator.evals.compare import CaseRow, Side
from shared.eval_stats import Interval


def _side(s: Side) -> str:
    return "-" if not s.runs else f"{s.passed}/{s.runs} ({s.passed / s.runs:.0%})"


def _interval(i: Interval | None, fmt: str) -> str:
    if i is None:
        return "-"
    mark = " *" if i.excludes_zero else ""
    return (f"{fmt.format(i.difference)} [{fmt.format(i.low)}, {fmt.format(i.high)}]"
            f"{mark}")


def print_eval_compare(rows: Sequence[CaseRow], a: int, b: int) -> None:
    table = Table(title=f"eval runs, the same cases on v{a} and v{b} (v{b} minus v{a}, "
                  "95% interval; * excludes 0)", title_justify="left")
    for column in ("case", f"v{a} passed", f"v{b} passed", "pass rate difference",
                   "cost USD difference"):
        table.add_column(column, overflow="fold")
    for r in rows:
        table.add_row(r.case, _side(r.a), _side(r.b), _interval(r.pass_rate, "{:+.2f}"),
                      _interval(r.cost_usd, "{:+.4f}"))
    (out if out.is_terminal else err).print(table)
