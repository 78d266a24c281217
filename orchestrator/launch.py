"""Starting a pipeline run and waiting for it: the one path the CLI, `skillq test`,
schedules and the dashboard share.

``start_run`` checks what it can before anything is recorded (the skill and its callees
validate, the inputs fit the manifest, some online worker serves every queue the plan
needs), then records the run and sets it moving. ``wait_run`` follows it to the end.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from lifecycle.context import WorkerContext
from lifecycle.routing import (
    NoRoute,
    ask_for_software,
    online_daemons,
    route,
    unknown_software,
)
from lifecycle.submit import create_run
from lifecycle.tasks import RUN_DONE_CHANNEL, advance_in, send_outcome
from orchestrator.connect import Connection
from orchestrator.history import descendant_run_ids, latest_states
from orchestrator.library.guard import refuse_disabled_run
from orchestrator.submit import checked
from shared.db.models import PipelineRun
from shared.db.session import transaction
from shared.errors import FolderChanged, NoWorker, SkillqError
from shared.plan import Plan, PlanStep, build_plan
from shared.queues import CONTROL_QUEUE
from shared.skill import Skill
from shared.states import RunState
from shared.vault import Vault

POLL_S = 0.25




@dataclass(frozen=True)
class Progress:
    run_id: str
    counts: dict[str, int]  # newest attempt's state -> step items, nested runs included

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def done(self) -> int:
        return sum(self.counts.get(s, 0) for s in ("succeeded", "skipped", "failed"))


RECHECK_S = 2.0  # a worker that has just started may still be announcing itself


def plan_steps(vault: Vault, plan: Plan, prefix: str = "") -> list[tuple[str, PlanStep]]:
    """Every step a run of ``plan`` may launch, nested orchestrators' steps included."""
    found = []
    for step in plan.steps:
        found.append((prefix + step.id, step))
        if step.kind == "orchestrator":
            inner = build_plan(vault.skills[step.skill], vault.skills, {})
            found += plan_steps(vault, inner, f"{prefix}{step.id}/")
    return found


def unrunnable(conn: Connection, vault: Vault, plan: Plan) -> str | None:
    """Why some step of this run could not be routed to an online daemon, or None.

    Software no daemon has looked for yet is asked for (``wanted_software``) and the
    answer awaited for a couple of heartbeats, so routing never guesses.
    """
    steps = plan_steps(vault, plan)
    started = time.monotonic()
    while True:
        with transaction(conn.endpoints.database_url) as session:
            daemons = online_daemons(session, conn.settings.daemon_offline_after_s)
            unknown = set().union(*(unknown_software(s.requires, daemons) for _, s in steps))
            if unknown:
                ask_for_software(session, unknown)
        problems = []
        if not any(CONTROL_QUEUE in d.queues for d in daemons):
            problems.append(f"the planner needs queue '{CONTROL_QUEUE}': no online daemon "
                            f"serves it; start one with `skillq worker --queues {CONTROL_QUEUE}`")
        for path, step in steps:
            try:
                route(step.queue, step.requires, daemons)
            except NoRoute as exc:
                problems.append(f"step '{path}' ({step.skill}) needs queue '{step.queue}': "
                                f"{exc}")
        # Wait a little for a worker still starting, longer for daemons to look for
        # software they were just asked about (their next heartbeat).
        patience_s = max(RECHECK_S, 2 * conn.settings.heartbeat_s + 1) if unknown \
            else RECHECK_S
        if not (problems or unknown) or time.monotonic() - started > patience_s:
            break
        time.sleep(0.2)
    if not problems:
        return None
    return "no online worker can run what this run needs: " + "; ".join(problems)


def refuse_draft(conn: Connection, skill: Skill) -> None:
    """A published orchestrator edited by hand is a draft: not for production runs
    (workers check every leaf's folder; an orchestrator is planned here)."""
    from workers.published import published_files, verify

    files = published_files(client_context(conn), skill.name, skill.manifest.version)
    if files is None:
        return
    found = verify(skill.folder, files)
    if found:
        raise FolderChanged(skill.name, skill.manifest.version, skill.folder, found)


def start_run(conn: Connection, vault: Vault, skill: Skill, given: Mapping[str, Any], *,
              source: str, triggered_by: str | None = None,
              workdir: str | None = None) -> str:
    """Record a run of ``skill`` with ``given`` inputs and set it moving; its id.

    Raises ValidationFailed / InputError / SkillDisabled (nothing recorded) or NoWorker.
    """
    checked(vault, skill)
    refuse_disabled_run(conn.endpoints.database_url, vault, skill)
    plan = build_plan(skill, vault.skills, dict(given), workdir=workdir)
    if source == "production" and skill.manifest.is_orchestrator:
        refuse_draft(conn, skill)  # its steps' folders are checked by their workers
    missing = unrunnable(conn, vault, plan)
    if missing:
        raise NoWorker(missing)
    return launch(conn, vault, skill, given, plan=plan, source=source,
                  triggered_by=triggered_by, workdir=workdir)


def launch(conn: Connection, vault: Vault, skill: Skill, given: Mapping[str, Any], *,
           plan: Plan, source: str, triggered_by: str | None = None,
           workdir: str | None = None) -> str:
    """Record the run and take its first planning step here, in the same transaction,
    so its first steps go straight to their queues (no control-queue round trip)."""
    ctx = client_context(conn)
    with transaction(conn.endpoints.database_url) as session:
        run_id = create_run(session, vault, skill, given, source=source,
                            triggered_by=triggered_by, workdir=workdir, plan=plan)
        session.flush()
        out = advance_in(session, ctx, run_id)
    send_outcome(conn.app, ctx, run_id, out)
    return run_id


def client_context(conn: Connection) -> WorkerContext:
    return WorkerContext(settings=conn.settings, database_url=conn.endpoints.database_url,
                         vault=conn.settings.vault.resolve(), hostname=socket.gethostname(),
                         pid=os.getpid())


def run_progress(conn: Connection, run_id: str, *, counts: bool = True
                 ) -> tuple[PipelineRun, Progress]:
    """The run record, and (unless it has ended or ``counts`` is False) its step counts."""
    with transaction(conn.endpoints.database_url) as session:
        run = session.get(PipelineRun, run_id)
        if run is None:
            raise SkillqError(f"no run {run_id}; `skillq runs` lists them")
        counted = latest_states(session, descendant_run_ids(session, run_id)) \
            if counts and not RunState(run.state).terminal else {}
        session.expunge(run)
    return run, Progress(run_id, counted)


def wait_run(conn: Connection, run_id: str, *,
             on_progress: Callable[[Progress], None] | None = None,
             timeout_s: float | None = None) -> PipelineRun:
    """Follow a run until it is terminal; the final record (detached from its session).

    The planner NOTIFYs when a run ends, so the end is seen at once; progress is read
    every POLL_S meanwhile.
    """
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    with _listening(conn.endpoints.database_url) as pg:
        while True:
            run, progress = run_progress(conn, run_id, counts=on_progress is not None)
            if RunState(run.state).terminal:
                return run
            if on_progress is not None:
                on_progress(progress)
            if deadline is not None and time.monotonic() > deadline:
                raise SkillqError(f"run {run_id} still {run.state} after {timeout_s:g} s")
            for note in pg.notifies(timeout=POLL_S):
                if note.payload == run_id:
                    break


@contextlib.contextmanager
def _listening(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    dsn = make_url(database_url).set(drivername="postgresql")
    with psycopg.connect(dsn.render_as_string(hide_password=False), autocommit=True) as pg:
        pg.execute(f"LISTEN {RUN_DONE_CHANNEL}")
        yield pg
