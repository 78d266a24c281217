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

POLL_S = 0.3  # how often the session looks for new calls and questions
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
    from orchestrator.cli.direct_run import DirectRun
    from orchestrator.cli.follow import INTERRUPTED, cancel_interrupted
    from orchestrator.launch import wait_run
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
    common.announce(run_id)
    stream.follow(run_id)
    watch = _Watch(conn, run_id)
    watch.start()
    followed = DirectRun(conn, run_id)
    try:
        final = followed.ended(wait_run(conn, run_id))
    except KeyboardInterrupt:
        stream.finish(None)
        final = cancel_interrupted(followed)
        if final.state == "cancelled":
            raise typer.Exit(INTERRUPTED) from None
    finally:
        watch.stop()
    answer = (final.result.get("outputs") or {}).get("answer")
    rest = stream.finish(answer if isinstance(answer, str) else None)
    write(rest)
    if stream.printed or rest:
        write("\n")
    usage = usage_of(conn, run_id)
    common.err.print(f"run {run_id}: {usage.tokens_in} tokens in, {usage.tokens_out} out, "
                     f"${usage.cost_usd:.4f}", markup=False)
    if not final.succeeded:
        common.err.print(f"error: {final.failure}", markup=False)
        return None
    return Exchange(request, answer if isinstance(answer, str) else "")


class _Watch:
    """While a request runs: its calls of the skill as they start and end, and its open
    questions, asked here (one at a time, read from stdin)."""

    def __init__(self, conn: Connection, run_id: str) -> None:
        self.conn, self.run_id = conn, run_id
        self.seen: dict[str, str] = {}  # call run id -> the state last shown
        self.asked: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="try-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._calls()  # the last calls' ends, read once more

    def _loop(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                self._calls()
                self._questions()
            except Exception as exc:  # a database outage: the run goes on, so does this
                common.err.print(f"(could not read run {self.run_id}: {exc})", markup=False)

    def _calls(self) -> None:
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

    def _questions(self) -> None:
        from orchestrator.waits import answer, inbox

        for wait in inbox(self.conn, self.run_id):
            if wait.id in self.asked or wait.kind != "question":
                continue
            self.asked.add(wait.id)
            choices = "".join(f"\n  {i}. {c}" for i, c in enumerate(wait.choices, 1))
            default = f" [default: {wait.default}]" if wait.default is not None else ""
            common.err.print(f"? {wait.prompt}{choices}{default}", markup=False)
            line = sys.stdin.readline().strip()
            if not line and wait.default is not None:
                line = str(wait.default)
            choice = int(line) if line.isdigit() and wait.choices else None
            try:
                answer(self.conn, wait.run_id, f"#{wait.id}", text=None if choice else line,
                       choice=choice, by=f"try:{_user()}")
            except Exception as exc:  # refused (a choice out of range): it stays open
                common.err.print(f"not answered: {exc}; `skillq answer {wait.run_id} "
                                 "TEXT` answers it", markup=False)


def _user() -> str:
    from orchestrator.publish import who

    return who()
