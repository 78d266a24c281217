"""`skillq inbox`, `skillq answer`, `skillq approve` and `skillq reject`: a person's side
of the runs that wait for one (orchestrator/waits.py; docs/waits.md)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated

import typer

from orchestrator.cli.common import err
from orchestrator.cli.tables import Column, Row, emit

if TYPE_CHECKING:
    from orchestrator.waits import Decided

RunIdArg = Annotated[str, typer.Argument(help="The run id (`skillq inbox` lists them).")]
WhichOption = Annotated[str | None, typer.Option(
    "--wait", "-w", help="Which of the run's open waits: its #number in `skillq inbox`, or "
    "its step id (needed only when it has several).", show_default=False)]
JsonOption = Annotated[bool, typer.Option("--json", help="Print what was decided as JSON.")]


def register(app: typer.Typer) -> None:
    app.command("inbox")(inbox)
    app.command("answer")(answer)
    app.command("approve")(approve)
    app.command("reject")(reject)


def _asks(row: Row) -> str:
    asks = str(row["asks"])
    if row["choices"]:
        asks += " [" + " | ".join(f"{i}. {c}" for i, c in enumerate(row["choices"], 1)) + "]"
    return asks


INBOX_COLUMNS = (
    Column("id", "#", wrap=False),
    Column("kind", wrap=False),
    Column("run_id", "run", wrap=False),
    Column("step", wrap=False),
    Column("asks", show=_asks, limit=300),
    Column("since", spare=3),
    Column("deadline", spare=2),
    Column("who", "who can answer", spare=1, limit=80),
)


def inbox(
    run_id: Annotated[str | None, typer.Argument(
        help="Only this run's waits (and those of the runs it started).")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="A JSON array, one object per open question or approval.")] = False,
) -> None:
    """Every question and approval waiting for a person, across runs, oldest first: the
    run, the step, what is asked, since when, and who can answer."""
    from orchestrator.connect import connect
    from orchestrator.waits import inbox as read_inbox

    rows = [w.as_json() for w in read_inbox(connect(workers=False), run_id)]
    emit(rows, INBOX_COLUMNS, as_json=as_json, title="inbox",
         empty="nothing is waiting for anyone")


def answer(
    run_id: RunIdArg,
    text: Annotated[str | None, typer.Argument(
        help="The answer, in your own words (or --choice N).", show_default=False)] = None,
    choice: Annotated[int | None, typer.Option(
        "--choice", "-c", help="Answer with the question's choice N (from 1).",
        show_default=False)] = None,
    which: WhichOption = None,
    as_json: JsonOption = False,
) -> None:
    """Answer a question an agent step of the run asked (ask_question); the step goes on
    with it."""
    from orchestrator.connect import connect
    from orchestrator.publish import who
    from orchestrator.waits import answer as give_answer

    if (text is None) == (choice is None):
        raise typer.BadParameter("give the answer as TEXT, or --choice N (one of them)")
    done = give_answer(connect(workers=False), run_id, which, text=text, choice=choice,
                       by=f"cli:{who()}")
    _said(done, as_json, f"answered question #{done.wait_id} of run {done.run_id} "
          f"(step {done.step_id}): {done.value}")


def approve(
    run_id: RunIdArg,
    inputs: Annotated[list[str] | None, typer.Option(
        "--input", "-i", help="NAME=VALUE for one of the approval's inputs (repeat; JSON "
        "for lists and objects); the rest take their defaults.", show_default=False)] = None,
    which: WhichOption = None,
    as_json: JsonOption = False,
) -> None:
    """Approve the run's approval step; its inputs (yours, else their defaults) are the
    step's outputs, which later steps read."""
    from orchestrator.connect import connect
    from orchestrator.publish import who
    from orchestrator.waits import approve as give_approval

    done = give_approval(connect(workers=False), run_id, which, pairs=inputs or (),
                         by=f"cli:{who()}")
    given = json.dumps(done.value, ensure_ascii=False) if done.value else "no inputs"
    _said(done, as_json, f"approved step {done.step_id} of run {done.run_id} ({given})")


def reject(
    run_id: RunIdArg,
    reason: Annotated[str, typer.Option(
        "--reason", "-r", help="Why: recorded with the decision and shown in the run.")],
    which: WhichOption = None,
    as_json: JsonOption = False,
) -> None:
    """Reject the run's approval step: the run ends rejected (or follows the step's
    on_failure)."""
    from orchestrator.connect import connect
    from orchestrator.publish import who
    from orchestrator.waits import reject as give_rejection

    done = give_rejection(connect(workers=False), run_id, which, reason=reason,
                          by=f"cli:{who()}")
    _said(done, as_json, f"rejected step {done.step_id} of run {done.run_id}: {reason}")


def _said(done: Decided, as_json: bool, line: str) -> None:
    if as_json:
        print(json.dumps(asdict(done), ensure_ascii=False, default=str))
    else:
        err.print(line, markup=False)
