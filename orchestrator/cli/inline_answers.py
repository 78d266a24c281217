"""An attended `skillq run` asks its person inline: while the run is followed in a
terminal, a question or approval it opens is put to them there (the answer is read from
the terminal), and whatever they leave unanswered stays in the inbox for `skillq
answer`, the dashboard or MCP. Only when stdin is a terminal: a script piping into
`skillq run` is never read from.

Through ``FollowedRun``'s ``open_waits`` and ``decide``, so the direct path and the local
API's thin client ask the same way; this module imports no more than follow.py does.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from typing import Any, Protocol

from orchestrator.cli import common

POLL_S = 1.0  # how often an attended run is looked at for new waits


class Asking(Protocol):
    run_id: str

    def open_waits(self) -> list[dict[str, Any]]:
        """The run's open waits (and those of the runs it started), as `skillq inbox
        --json` gives them."""
        ...

    def decide(self, wait: dict[str, Any], decision: str, body: dict[str, Any]) -> None:
        """``decision``: answer ({"text"} or {"choice"}), approve ({"inputs"}) or reject
        ({"reason"})."""
        ...


class InlineAnswers:
    def __init__(self, run: Asking, read: Callable[[], str] | None = None) -> None:
        self.run = run
        self.read = read or sys.stdin.readline
        self.asked: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="inline-answers",
                                        daemon=True)

    def __enter__(self) -> InlineAnswers:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()  # a prompt still waiting for a line is left to the process's end

    def _loop(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                waits = self.run.open_waits()
            except Exception:  # an outage or a lost API: following goes on without asking
                waits = []
            for wait in waits:
                if int(wait["id"]) not in self.asked and not self._stop.is_set():
                    self.asked.add(int(wait["id"]))
                    self._ask(wait)

    def _say(self, text: str) -> None:
        common.err.print(text, markup=False)

    def _line(self, prompt: str) -> str:
        common.err.print(prompt, end="", markup=False)
        return self.read().strip()

    def _ask(self, wait: dict[str, Any]) -> None:
        try:
            if wait["kind"] == "question":
                self._question(wait)
            else:
                self._approval(wait)
        except Exception as exc:  # refused (a bad choice): it stays open, and says how
            self._say(f"not decided: {exc}")

    def _question(self, wait: dict[str, Any]) -> None:
        self._say(f"\n? {wait['asks']}  (step {wait['step']} of run {wait['run_id']})")
        for i, choice in enumerate(wait["choices"], 1):
            self._say(f"  {i}. {choice}")
        default = wait.get("default")
        line = self._line("> " if default is None else f"[{default}] > ")
        if not line:
            if default is None:
                self._say(f"left open: `skillq answer {wait['run_id']} TEXT` answers it")
                return
            line = str(default)
        if line.isdigit() and wait["choices"]:
            self.run.decide(wait, "answer", {"choice": int(line)})
        else:
            self.run.decide(wait, "answer", {"text": line})

    def _approval(self, wait: dict[str, Any]) -> None:
        self._say(f"\n? {wait['asks']}  (approval at step {wait['step']} of run "
                  f"{wait['run_id']})")
        for name, value in (wait.get("shown") or {}).items():
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            self._say(f"  {name}: {shown}")
        line = self._line("approve? [y = yes, n = reject, empty = decide later] > ").lower()
        if line in ("y", "yes"):
            given: dict[str, Any] = {}
            for spec in wait.get("inputs") or []:
                default = spec.get("default")
                typed = self._line(f"  {spec['name']} ({spec['type']})"
                                   + (f" [{default}]" if default is not None else "") + " > ")
                if typed:
                    given[spec["name"]] = _value(typed, str(spec["type"]))
            self.run.decide(wait, "approve", {"inputs": given})
        elif line in ("n", "no"):
            reason = self._line("  why? > ") or "rejected in the terminal"
            self.run.decide(wait, "reject", {"reason": reason})
        else:
            self._say(f"left open: `skillq approve {wait['run_id']}` or `skillq reject "
                      f"{wait['run_id']} --reason ...` decides it")


def _value(text: str, type_: str) -> Any:
    """A typed input as a person types it: text as it is, anything else as JSON."""
    if type_ == "string":
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text  # the server names what does not fit
