"""`skillq ask` in the control plane: the library read, the prompt previewed, the run of
the built-in skillq-ask skill started (source ``ask``), and its answer followed as it
streams (shared/ask_stream.py).

The CLI and the dashboard's Ask page both come here, and both read tokens through
shared/slash_tokens.py's ``resolve``, as the worker does before it sends: one resolution
for the preview, the estimate and the request.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from sqlalchemy import func, or_, select

from lifecycle.run_costs import Usage, run_usage
from orchestrator.connect import Connection
from orchestrator.launch import launch_routed
from shared import ask_stream
from shared.agent_prompt.ask import AskPrompt, ask_prompt, invoked_mcp_servers
from shared.builtin import ASK, builtin_skill
from shared.db import libpq
from shared.db.agent_models import AgentTurn
from shared.db.models import StepRun
from shared.db.session import transaction
from shared.errors import InputError
from shared.library_tokens import LibraryState, library_states, token_entries
from shared.model_spec import resolve as resolve_model
from shared.plan import build_plan
from shared.problems import Problem
from shared.settings import Settings
from shared.skill import Skill
from shared.skillfiles import RunSource
from shared.slash_tokens import Resolution
from shared.vault import Vault

SOURCE = RunSource.ASK.value


def ask_skill() -> Skill:
    skill = builtin_skill(ASK)
    assert skill is not None  # shipped with the package
    return skill


def checked_text(text: str) -> str:
    if not text.strip():
        raise InputError([Problem("skillq ask", "TEXT", "give the request's text, e.g. "
                                  "skillq ask \"what can you do?\" (a /slug in it invokes "
                                  "that skill)")])
    return text


def states_of(database_url: str, vault: Vault) -> dict[str, LibraryState]:
    with transaction(database_url) as session:
        return library_states(session, str(vault.root.resolve()))


def preview(settings: Settings, vault: Vault, text: str,
            states: dict[str, LibraryState]) -> AskPrompt:
    """The prompt a worker would send for ``text`` now (for a model with tool calls)."""
    return ask_prompt(ask_skill(), checked_text(text), vault.skills,
                      token_entries(vault.skills, states),
                      prompt_budget_chars=settings.agent_prompt_budget_chars,
                      catalog_budget_chars=settings.agent_catalog_budget_chars)


@dataclass(frozen=True)
class Asked:
    run_id: str
    resolution: Resolution


def start_ask(conn: Connection, vault: Vault, text: str, *, model: str | None = None,
              triggered_by: str = "cli", workdir: str | None = None) -> Asked:
    """Record a run of skillq-ask for ``text`` and set it moving. The run's input is the
    text as sent (display tokens as slugs): the invoked skills' instructions are added
    by the worker, for its request only."""
    resolution = preview(conn.settings, vault, text,
                         states_of(conn.endpoints.database_url, vault)).resolution
    skill = ask_skill()
    given = {"text": resolution.text}
    plan = build_plan(skill, vault.skills, given, workdir=workdir).with_mcp_servers(
        invoked_mcp_servers(resolution, vault.skills))
    if model:
        resolve_model(model, where="the model asked for")  # AgentError: the forms it takes
        plan = plan.with_requested_model(model)
    run_id = launch_routed(conn, vault, skill, given, plan=plan, source=SOURCE,
                           triggered_by=triggered_by, workdir=workdir)
    return Asked(run_id, resolution)


def usage_of(conn: Connection, run_id: str) -> Usage:
    """What the ask used, as `skillq run-show` reads it: the charged step items of its
    tree, and for an item of its own that no attempt was charged for (its worker died
    mid-step) the turns recorded for it, which were paid for all the same."""
    with transaction(conn.endpoints.database_url) as session:
        found = run_usage(session, [run_id]).get(run_id, Usage())
        charged = set(session.execute(
            select(StepRun.step_id, StepRun.item_index).where(
                StepRun.run_id == run_id,
                or_(StepRun.tokens_in > 0, StepRun.tokens_out > 0, StepRun.cost_usd > 0))
        ).tuples())
        turns = session.execute(
            select(AgentTurn.step_id, AgentTurn.item_index, func.sum(AgentTurn.tokens_in),
                   func.sum(AgentTurn.tokens_out), func.sum(AgentTurn.cost_usd))
            .where(AgentTurn.run_id == run_id)
            .group_by(AgentTurn.step_id, AgentTurn.item_index)).tuples()
        for step_id, item, t_in, t_out, cost in turns:
            if (step_id, item) not in charged:
                found = Usage(found.cost_usd + float(cost or 0),
                              found.tokens_in + int(t_in or 0),
                              found.tokens_out + int(t_out or 0))
        return found


class AnswerStream:
    """Listens for the pieces of answer text the worker streams, from before the run is
    started (so its first piece is not missed) until ``finish``; ``write`` gets each
    piece of the run ``follow`` names, on a thread of its own."""

    def __init__(self, database_url: str, write: Callable[[str], None]) -> None:
        self._pg: psycopg.Connection[Any] | None = libpq.listening(
            database_url, ask_stream.CHANNEL, connect_timeout_s=10)
        self._write = write
        self._lock = threading.Lock()
        self._run: str | None = None
        self._early: list[ask_stream.Piece] = []  # pieces before the run id was known
        self._stopped = threading.Event()
        self.printed = ""
        self._thread = threading.Thread(target=self._listen, name="ask-stream", daemon=True)
        self._thread.start()

    def follow(self, run_id: str) -> None:
        with self._lock:
            self._run = run_id
            early, self._early = self._early, []
            for piece in early:
                self._show(piece)

    def _show(self, piece: ask_stream.Piece) -> None:
        if piece.run == self._run and not self._stopped.is_set():
            self._write(piece.text)
            self.printed += piece.text

    def _listen(self) -> None:
        pg = self._pg
        assert pg is not None
        try:
            while not self._stopped.is_set():
                for note in pg.notifies(timeout=0.2, stop_after=50):
                    piece = ask_stream.decode(note.payload)
                    if piece is None:
                        continue
                    with self._lock:
                        if self._run is None:
                            self._early.append(piece)
                        else:
                            self._show(piece)
        except psycopg.Error:
            pass  # an outage ends the stream, not the ask: the answer is in the record

    def finish(self, answer: str | None) -> str:
        """Stop listening; what of ``answer`` is still to be shown (all of it when the
        stream showed something else, or nothing)."""
        with self._lock:
            self._stopped.set()
        self._thread.join(timeout=2)
        self.close()
        if answer is None or self.printed.endswith(answer):
            return ""
        return ("\n" if self.printed and not self.printed.endswith("\n") else "") + answer

    def close(self) -> None:
        self._stopped.set()
        pg, self._pg = self._pg, None
        if pg is not None and not self._thread.is_alive():
            pg.close()
