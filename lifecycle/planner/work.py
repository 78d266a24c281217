"""One advance's working state, what it hands its caller (``Outcome``), and the one
thing every part of it may do: fail the run."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from lifecycle import transitions
from lifecycle.dispatch import Dispatch
from lifecycle.planner.decisions import Progress
from lifecycle.recording import FilesDue
from lifecycle.routing import OnlineDaemon
from lifecycle.run_end import count_run
from shared.db.models import PipelineRun
from shared.db.txn_context import context
from shared.plan import Plan
from shared.settings import Settings
from shared.states import RunState


@dataclass
class Outcome:
    dispatch: list[Dispatch] = field(default_factory=list)
    advance_runs: list[str] = field(default_factory=list)  # parents to move on
    finished: bool = False  # the run ended in this advance
    watch_in_s: float | None = None
    settled_skills: set[str] = field(default_factory=set)  # their benchmarks.json is due
    files: FilesDue | None = None  # what lifecycle/tasks.py rewrites after the commit


def now_utc() -> datetime:
    return datetime.now(UTC)


class Work:
    """An advance of one run, its row locked: what it has read and decided so far."""

    def __init__(self, session: Session, run: PipelineRun, settings: Settings,
                 daemons: list[OnlineDaemon] | None = None) -> None:
        self.session = session
        self.run = run
        self.settings = settings
        self.plan = Plan.model_validate(run.plan)
        self.progress = Progress(run.progress)
        self.open_steps: set[str] = set()  # seen with an item open: they stay so here
        self.out = Outcome()
        self.values: dict[str, Any] = {}  # finished steps' values, as read (values.py)
        self.now = now_utc()
        self.next_due: datetime | None = None  # the earliest retry waiting for its time
        # The online daemons to route by: the caller's read, else read once, when a step
        # is routed (launch.py); earlier_read: they are this process's earlier read.
        self.daemons = daemons
        self.earlier_read = False
        # Steps (never fan-outs: LONE_ITEM) whose only item this transaction recorded
        # succeeded: their stored outputs
        self.lone: dict[str, Any] = {
            step: outputs for (run_id, step), outputs in
            context(session).succeeded_lone.items() if run_id == run.id}

    def fail(self, step_id: str, item: int | None, error: str, *,
             rejected: bool = False) -> None:
        """The run fails at the step (its item, when one is named), with ``error``;
        ``rejected``: it ends rejected (a person turned its approval step down)."""
        run = self.run
        where = f"step '{step_id}'" + (f" item {item}" if item is not None and item >= 0 else "")
        transitions.fail_run(self.session, run,
                             error=f"{where} {'rejected' if rejected else 'failed'}: {error}",
                             step=step_id, item=item if item is not None and item >= 0 else None,
                             state=RunState.REJECTED if rejected else RunState.FAILED)
        self.out.finished = True
        count_run(self.session, run, self.plan)
