"""`skillq ask` on the worker: the built-in skill's step (shared/builtin/), its prompt
built from the library as the client previewed it, its answer streamed as it comes.

The request text arrives as the run's ``text`` input with its display tokens already
rewritten to slugs (the client resolved them); this resolves it again against the
library as it is now, so a skill disabled meanwhile is not invoked. The invoked skills'
instructions go into this step's prompt and nowhere else: the turns record responses,
the run its normalized text.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import psycopg

from shared import ask_stream
from shared.agent_prompt.ask import ask_prompt
from shared.agent_prompt.prompt import StepPrompt
from shared.db import libpq
from shared.library_tokens import LibraryState, token_entries
from shared.settings import Settings
from shared.skill import Skill

log = logging.getLogger(__name__)


def prompt_builder(settings: Settings, skill: Skill, text: str, skills: Mapping[str, Skill],
                   states: Mapping[str, LibraryState]) -> Callable[[bool], StepPrompt]:
    entries = token_entries(skills, states)

    def build(tool_calls: bool) -> StepPrompt:
        return ask_prompt(skill, text, skills, entries,
                          prompt_budget_chars=settings.agent_prompt_budget_chars,
                          catalog_budget_chars=settings.agent_catalog_budget_chars,
                          tool_calls=tool_calls).prompt
    return build


class TextStream:
    """NOTIFYs each piece of answer text for the waiting client; a database fault stops
    the stream, never the step (the answer is recorded with the run either way)."""

    def __init__(self, database_url: str, run_id: str) -> None:
        self._database_url = database_url
        self._run = run_id
        self._seq = 0
        self._pg: psycopg.Connection[Any] | None = None
        self._broken = False

    def __call__(self, text: str) -> None:
        if self._broken:
            return
        try:
            if self._pg is None:
                self._pg = libpq.connect(self._database_url, connect_timeout_s=5)
            for payload in ask_stream.encode(self._run, self._seq, text):
                self._pg.execute("SELECT pg_notify(%s, %s)", (ask_stream.CHANNEL, payload))
                self._seq += 1
        except psycopg.Error as exc:
            log.warning("run %s: streaming its answer stopped (%s); the answer is recorded "
                        "in full", self._run, exc)
            self._broken = True
            self.close()

    def close(self) -> None:
        pg, self._pg = self._pg, None
        if pg is not None:
            pg.close()
