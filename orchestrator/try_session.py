"""The test window's session (seed 000's `/test-skill NAME`): a person's request in their
own words, turned into calls of one skill by an agent that has only that skill.

Each request is one run of the built-in skillq-try (source ``test_window``), an ask whose
library is the skill tried: its execute_skill calls are ``test_window`` runs of the
skill, and its questions wait for the person like any agent step's (lifecycle/waits.py).
The session keeps the conversation: each request carries the ones before it and their
answers, and nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select

from orchestrator.connect import Connection
from orchestrator.launch import launch_routed
from shared.builtin import TRY, builtin_skill
from shared.db.models import PipelineRun
from shared.db.session import transaction
from shared.errors import InputError
from shared.plan import build_plan
from shared.problems import Problem
from shared.skillfiles import RunSource
from shared.store import unpack
from shared.vault import Vault

TRIGGER = "try"


@dataclass(frozen=True, slots=True)
class Exchange:
    request: str
    answer: str


def request_text(name: str, request: str, earlier: Sequence[Exchange]) -> str:
    """What the agent reads: the session so far, then the new request with the skill
    invoked (its instructions go into the prompt: shared/agent_prompt/ask.py)."""
    if not request.strip():
        raise InputError([Problem("skillq try", "REQUEST", "say what to try, e.g. skillq "
                                  f"try {name} \"run it on these 3 items\"")])
    parts = [f"Earlier in this session:\n\nPerson: {e.request}\nYou: {e.answer}"
             for e in earlier]
    return "\n\n".join([*parts, f"/{name} {request}"])


def start_try(conn: Connection, vault: Vault, name: str, request: str,
              earlier: Sequence[Exchange] = (), *, workdir: str | None = None,
              triggered_by: str = TRIGGER) -> str:
    """Record one request of the session and set it moving; its run id."""
    vault.get(name)  # SkillNotFound, naming the vault, before anything is recorded
    skill = builtin_skill(TRY)
    assert skill is not None  # shipped with the package
    given = {"text": request_text(name, request, earlier), "skill": name}
    plan = build_plan(skill, vault.skills, given, workdir=workdir)
    return launch_routed(conn, vault, skill, given, plan=plan,
                         source=RunSource.TEST_WINDOW.value, triggered_by=triggered_by,
                         workdir=workdir)


@dataclass(frozen=True, slots=True)
class Call:
    """A call of the tried skill the session's agent made: a run of its own."""

    run_id: str
    skill: str
    state: str
    inputs: dict[str, object]
    error: str | None


def calls_of(conn: Connection, run_id: str) -> list[Call]:
    """The runs the request's execute_skill calls started, oldest first."""
    prefix = f"{run_id}/"  # agent_call is "<run>/<step>/<item>#<tool call id>"
    with transaction(conn.endpoints.database_url) as session:
        rows = session.scalars(select(PipelineRun).where(
            PipelineRun.agent_call.startswith(prefix, autoescape=True))
            .order_by(PipelineRun.created_at)).all()
        # inputs past the inline limit are stored by reference: shown as given
        return [Call(r.id, r.skill, r.state, dict(unpack(session, r.inputs) or {}), r.error)
                for r in rows]
