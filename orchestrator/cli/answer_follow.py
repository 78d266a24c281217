"""Following a run whose answer streams to stdout (`skillq ask`, a `skillq try`
session's request): its id said, its streamed text shown, its questions put to the
person, Ctrl-C cancelling it; then its end and what of its answer is left to show."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import typer

from orchestrator.cli import common
from orchestrator.cli.direct_run import DirectRun
from orchestrator.cli.follow import INTERRUPTED, Ended, asking, cancel_interrupted
from orchestrator.cli.inline_answers import InlineAnswers

if TYPE_CHECKING:
    from orchestrator.ask import AnswerStream
    from orchestrator.connect import Connection


@dataclass(frozen=True, slots=True)
class Answered:
    final: Ended
    answer: str | None  # the run's answer output, when it gave one
    rest: str  # what of it the stream did not show


def follow_answer(conn: Connection, run_id: str, stream: AnswerStream, *,
                  always_ask: bool = False,
                  alongside: contextlib.AbstractContextManager[object] | None = None
                  ) -> Answered:
    """``always_ask``: questions are read from stdin even when it is not a terminal (a
    session fed its requests and answers); ``alongside``: held while the run is followed
    (a session's view of its calls)."""
    from orchestrator.launch import wait_run

    common.announce(run_id)
    stream.follow(run_id)
    followed = DirectRun(conn, run_id)
    ask = InlineAnswers(followed) if always_ask else asking(followed)
    try:
        with ask, alongside or contextlib.nullcontext():
            final = followed.ended(wait_run(conn, run_id))
    except KeyboardInterrupt:
        stream.finish(None)
        final = cancel_interrupted(followed)
        if final.state == "cancelled":
            raise typer.Exit(INTERRUPTED) from None
    answer = (final.result.get("outputs") or {}).get("answer")
    said = answer if isinstance(answer, str) else None
    return Answered(final, said, stream.finish(said))
