"""`skillq try NAME "request"`: the test window's session in a terminal
(orchestrator/try_session.py). Each request's answer streams to stdout; the calls of the
skill it makes, and their ends, go to stderr as they happen; a question the agent asks
is put to the person here (or answered from anywhere else: `skillq answer`, the
dashboard). The next request is read from stdin until it ends, or an empty line."""

from __future__ import annotations

import json
import sys
import threading
from typing import TYPE_CHECKING

import typer

from orchestrator.cli import common

if TYPE_CHECKING:
    from orchestrator.connect import Connection
    from orchestrator.try_session import Exchange
    from shared.vault import Vault

POLL_S = 0.3  # how often the session looks for new calls of the skill
PROMPT = "try> "


def session(loaded: Vault, name: str, request: str) -> None:
    from orchestrator.connect import connect

    conn = connect()
    earlier: list[Exchange] = []
    failed = False
    while request:
        exchange = _one_request(conn, loaded, name, request, earlier)
        if exchange is None:
            failed = True
        else:
            earlier.append(exchange)
        request = _next_request()
    if failed:
        raise typer.Exit(1)


def _next_request() -> str:
    common.err.print(PROMPT, end="", markup=False)
    line = sys.stdin.readline()
    if not line or not sys.stdin.isatty():  # piped: what was read, as a terminal echoes it
        common.err.print(line.rstrip("\n"), markup=False)
    return line.strip()


def _one_request(conn: Connection, loaded: Vault, name: str, request: str,
                 earlier: list[Exchange]) -> Exchange | None:
    """One request run to its answer (None: it did not succeed, and said why)."""
    from pathlib import Path

    from orchestrator.ask import AnswerStream, usage_of
    from orchestrator.cli.answer_follow import follow_answer
    from orchestrator.try_session import Exchange, start_try

    def write(piece: str) -> None:
        sys.stdout.write(piece)
        sys.stdout.flush()

    stream = AnswerStream(conn.endpoints.database_url, write)
    try:
        run_id = start_try(conn, loaded, name, request, earlier, workdir=str(Path.cwd()))
    except BaseException:
        stream.finish(None)
        raise
    # its questions are read from stdin, a terminal or not: the session's own input
    done = follow_answer(conn, run_id, stream, always_ask=True,
                         alongside=_Calls(conn, run_id))
    final, answer, rest = done.final, done.answer, done.rest
    write(rest)
    if stream.printed or rest:
        write("\n")
    usage = usage_of(conn, run_id)
    common.err.print(f"run {run_id}: {usage.tokens_in} tokens in, {usage.tokens_out} out, "
                     f"${usage.cost_usd:.4f}", markup=False)
    if not final.succeeded:
        common.err.print(f"error: {final.failure}", markup=False)
        return None
    return Exchange(request, answer or "")


class _Calls:
    """While a request runs: its calls of the skill as they start and end, on stderr."""

    def __init__(self, conn: Connection, run_id: str) -> None:
        self.conn, self.run_id = conn, run_id
        self.seen: dict[str, str] = {}  # call run id -> the state last shown
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="try-calls", daemon=True)

    def __enter__(self) -> _Calls:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._show()  # the last calls' ends, read once more

    def _loop(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                self._show()
            except Exception as exc:  # a database outage: the run goes on, so does this
                common.err.print(f"(could not read run {self.run_id}: {exc})", markup=False)

    def _show(self) -> None:
        from orchestrator.try_session import calls_of

        for call in calls_of(self.conn, self.run_id):
            if self.seen.get(call.run_id) == call.state:
                continue
            if call.run_id not in self.seen:
                common.err.print(f"→ {call.skill} {json.dumps(call.inputs, ensure_ascii=False)}"
                                 f" (run {call.run_id})", markup=False)
            if call.state in ("succeeded", "failed", "cancelled", "rejected"):
                how = call.state if call.error is None else f"{call.state}: {call.error}"
                common.err.print(f"  {call.skill} {how}", markup=False)
            self.seen[call.run_id] = call.state
