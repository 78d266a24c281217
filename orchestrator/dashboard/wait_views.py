"""What the pages show of waits for a person (shared/db/wait_models.py): a question or
approval where its step is on the run page, and the open count of the nav's Inbox badge.
The inbox itself and the decisions go through orchestrator/waits.py (pages_waits.py)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session
from starlette.requests import Request

from lifecycle.waits import form_manifest
from orchestrator.dashboard.context import Dashboard, dashboard
from orchestrator.dashboard.run_form import fields
from orchestrator.history import RunTree
from orchestrator.waits import Waiting, waiting
from shared.db.wait_models import APPROVAL, QUESTION, Wait
from shared.states import WaitState

log = logging.getLogger(__name__)

INPUT_PREFIX = "input."  # an approval input's form field: "input.final_text"
LONG_TEXT = 60  # a value longer than this is edited in a text area


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True)
class InputField:
    """One field of an approval's form, filled with its default (or what was typed)."""

    name: str
    type: str
    widget: str  # text | textarea | boolean
    value: str
    description: str


@dataclass(frozen=True)
class WaitView:
    row: Wait  # its state, answer, reason, who decided and when
    asked: Waiting  # what it asks, its shown values unpacked, its inputs' defaults
    inputs: list[InputField]

    @property
    def open(self) -> bool:
        return self.row.state == WaitState.OPEN

    @property
    def shown(self) -> list[tuple[str, str]]:
        return [(k, as_text(v)) for k, v in self.asked.shown.items()]

    @property
    def decision(self) -> str:
        """What was decided, in a few words (an answer's value, an approval's inputs)."""
        state = WaitState(self.row.state)
        if state is WaitState.ANSWERED:
            return f"answered: {as_text(self.row.answer)}"
        if state is WaitState.APPROVED:
            return "approved" + (f" with {as_text(self.row.answer)}" if self.row.answer else "")
        if state is WaitState.REJECTED:
            return f"rejected: {self.row.reason or ''}"
        if state is WaitState.TIMED_OUT:
            return "nobody decided by its deadline" + (
                f"; its default held: {as_text(self.row.default)}"
                if self.row.kind == QUESTION and self.row.default is not None else "")
        return "closed: its run ended first"


def input_fields(row: Wait, typed: Mapping[str, str] | None = None) -> list[InputField]:
    """An approval's inputs as form fields, read as `skillq approve` reads them
    (lifecycle/waits.py form_manifest): filled with what the person typed when the form
    comes back refused, else with each input's default."""
    manifest = form_manifest(row)
    values = {s.name: typed.get(INPUT_PREFIX + s.name, "") if typed is not None
              else as_text(s.default) if s.has_default else "" for s in manifest.inputs}
    found = []
    for field in fields(manifest, values):
        long = len(field.value) > LONG_TEXT or "\n" in field.value
        found.append(InputField(field.name, field.type, "textarea" if long and
                                field.widget == "text" else field.widget, field.value,
                                field.description))
    return found


def views(session: Session, tree: RunTree, typed: Mapping[str, str] | None = None
          ) -> dict[int, WaitView]:
    """Every wait of the run and of the runs it started, by id; ``typed``: a refused
    approval form's fields, shown again in the form of the wait it names."""
    found: dict[int, WaitView] = {}
    for row in all_waits(tree):
        asked = waiting(session, row)
        mine = typed is not None and typed.get("wait", "").removeprefix("#") == str(row.id)
        found[row.id] = WaitView(row, asked, input_fields(row, typed if mine else None)
                                 if row.kind == APPROVAL else [])
    return found


def all_waits(tree: RunTree) -> list[Wait]:
    return [*tree.waits, *(w for c in tree.children.values() for w in all_waits(c))]


def open_kinds(waits: Iterable[Wait]) -> dict[str, set[str]]:
    """Step id -> the kinds of its open waits (question, approval)."""
    found: dict[str, set[str]] = {}
    for w in waits:
        if w.state == WaitState.OPEN:
            found.setdefault(w.step_id, set()).add(w.kind)
    return found


def open_count(session: Session) -> int:
    """Open waits across runs: a count over the partial index of open waits."""
    return int(session.scalar(select(func.count()).select_from(Wait).where(
        Wait.state == WaitState.OPEN.value)) or 0)


def nav_count(request: Request) -> int | None:
    """The Inbox badge's number; None (no badge) when the database cannot say: the page
    that shows it may not need the database at all."""
    try:
        with dashboard(request).db() as session:
            return open_count(session)
    except SQLAlchemyError as exc:
        log.warning("the inbox count is not shown: %s", exc)
        return None


def decided_by(dash: Dashboard) -> str:
    """Who decides, as the wait records it: the dashboard's user when it asks for one."""
    credentials = dash.config.credentials
    return f"dashboard:{credentials.user}" if credentials is not None else "dashboard"
