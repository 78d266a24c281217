"""Starting a pipeline run and waiting for it: the one path the CLI, `skillq test`,
schedules and the dashboard share.

``start_run`` checks what it can before anything is recorded (the skill and its callees
validate, the inputs fit the manifest, some online worker serves every queue the plan
needs), then records the run and sets it moving. ``wait_run`` follows it to the end.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from lifecycle.planner import Outcome
from lifecycle.recording import ended_run_files, write_files
from lifecycle.retry import create_retry
from lifecycle.routing import (
    Folder,
    NoRoute,
    OnlineDaemon,
    ask_for_software,
    folder_of,
    recent_daemons,
    route,
    unknown_software,
)
from lifecycle.step_counts import state_counts
from lifecycle.submit import create_run
from lifecycle.tasks import (
    Cancelled,
    advance_in,
    cancel,
    send_ahead,
    send_outcome,
)
from orchestrator.connect import Connection, client_context
from orchestrator.history import descendant_run_ids
from orchestrator.library.guard import refuse_disabled_run
from orchestrator.run_end_listener import RunEndListener, to_stderr
from orchestrator.submit import checked
from shared.db.models import PipelineRun
from shared.db.outage import FOLLOW_WAIT_S, FollowingRun
from shared.db.session import transaction
from shared.errors import NoWorker, RunNotFound, SkillqError
from shared.plan import Plan, PlanStep, build_plan
from shared.published import published_files, verify
from shared.published_copy import published_copy
from shared.queues import CONTROL_QUEUE
from shared.skill import Skill
from shared.states import RunState
from shared.vault import Vault, open_vault

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
    """Why some step of this run could not be routed to an online daemon, or None
    (``routes``, for a caller that does not launch the run next)."""
    return routes(conn, vault, plan)[0]


def routes(conn: Connection, vault: Vault, plan: Plan, inputs: Mapping[str, Any] | None = None
           ) -> tuple[str | None, list[OnlineDaemon]]:
    """Why some step of this run could not be routed to an online daemon, or None; and
    the online daemons as read for that, which ``launch`` routes the first steps by
    (one read of the registry per `skillq run`, not two).

    An agent step needs a daemon holding its model's credentials: refused here, naming
    the variable, rather than failing on a worker once dispatched.

    Software no daemon has looked for yet is asked for (``wanted_software``) and the
    answer awaited for a couple of heartbeats, so routing never guesses.

    ``inputs``: the run's; a folder among them (a ``directory`` input) is on one
    machine, and each step that takes a folder must find a daemon of that machine.
    """
    steps = plan_steps(vault, plan)
    try:
        folder = folder_of(dict(inputs or {}))
    except NoRoute as exc:
        return f"the run's inputs cannot be read by any one daemon: {exc}", []
    if conn.local_workers is not None:
        _start_classes(conn, conn.local_workers, vault, steps)
    started = time.monotonic()
    reuse_s = conn.settings.routing_reuse_s  # an earlier read serves when all is found
    while True:
        with transaction(conn.endpoints.database_url) as session:
            daemons, earlier = recent_daemons(session, conn.settings.daemon_offline_after_s,
                                              reuse_s)
            unknown = set().union(*(unknown_software(s.requires, daemons) for _, s in steps))
            if unknown and not earlier:
                ask_for_software(session, unknown)
        problems = []
        if not any(CONTROL_QUEUE in d.queues for d in daemons):
            problems.append(f"the planner needs queue '{CONTROL_QUEUE}': no online daemon "
                            f"serves it; start one with `skillq worker --queues {CONTROL_QUEUE}`")
        for path, step in steps:
            try:
                route(step.queue, step.requires, daemons, step.agent,
                      _folder_for(vault, step, folder))
            except NoRoute as exc:
                problems.append(f"step '{path}' ({step.skill}) needs queue '{step.queue}': "
                                f"{exc}")
        # Wait a little for a worker still starting, longer for daemons to look for
        # software they were just asked about (their next heartbeat).
        patience_s = max(RECHECK_S, 2 * conn.settings.heartbeat_s + 1) if unknown \
            else RECHECK_S
        if not (problems or unknown):
            break
        if earlier:  # found wanting on an earlier read: read now before waiting
            reuse_s = 0.0
            continue
        if time.monotonic() - started > patience_s:
            break
        time.sleep(0.2)
    if not problems:
        return None, daemons
    return "no online worker can run what this run needs: " + "; ".join(problems), daemons


def _folder_for(vault: Vault, step: PlanStep, folder: Folder | None) -> Folder | None:
    """``folder`` for a step whose skill takes a folder: where the run's folder is."""
    if folder is None or step.skill not in vault.skills:
        return None
    takes = any(spec.value_type.base == "directory"
                for spec in vault.skills[step.skill].manifest.inputs)
    return folder if takes else None


def _start_classes(conn: Connection, home: Path, vault: Vault,
                   steps: list[tuple[str, PlanStep]]) -> None:
    """On a local stack, the worker classes this run needs, started if they are not: an
    agent step may execute any skill of the vault, so it needs the vault's classes."""
    from orchestrator.local_stack import classes_for_queues, classes_for_vault, ensure_workers

    classes = classes_for_queues(step.queue for _, step in steps)
    if any(step.agent is not None for _, step in steps):
        classes += [c for c in classes_for_vault(vault.root) if c not in classes]
    ensure_workers(home, conn.endpoints, classes)


def as_published(conn: Connection, skill: Skill) -> Skill:
    """The orchestrator a production run plans: a published one edited by hand is a draft,
    and production runs its published version, rebuilt from the store, until the draft
    is published (workers do the same for every leaf; an orchestrator is planned here)."""
    files = published_files(conn.endpoints.database_url, skill.name, skill.manifest.version)
    if files is None or not verify(skill.folder, files):
        return skill
    return published_copy(conn.settings.home, conn.endpoints.database_url, files)


def start_run(conn: Connection, vault: Vault, skill: Skill, given: Mapping[str, Any], *,
              source: str, triggered_by: str | None = None,
              workdir: str | None = None, waiting: bool = False,
              budget_usd: float | None = None) -> str:
    """Record a run of ``skill`` with ``given`` inputs and set it moving; its id.
    ``waiting``: as ``launch``; ``budget_usd``: what each of its agent steps may spend
    at most (an eval's share of its budget).

    Raises ValidationFailed / InputError / SkillDisabled (nothing recorded) or NoWorker.
    """
    checked(vault, skill)
    refuse_disabled_run(conn.endpoints.database_url, vault, skill)
    if source == "production" and skill.manifest.is_orchestrator:
        skill = as_published(conn, skill)  # its steps' folders are checked by their workers
    plan = build_plan(skill, vault.skills, dict(given), workdir=workdir
                      ).with_budget(budget_usd)
    return launch_routed(conn, vault, skill, given, plan=plan, source=source,
                         triggered_by=triggered_by, workdir=workdir, waiting=waiting)


def launch_routed(conn: Connection, vault: Vault, skill: Skill, given: Mapping[str, Any], *,
                  plan: Plan, source: str, triggered_by: str | None = None,
                  workdir: str | None = None, waiting: bool = False) -> str:
    """``launch`` the run once ``plan`` is routed (NoWorker, nothing recorded, when a
    step has nowhere to go): the path of a run whose plan its caller made (a built-in
    skill's, with its model, budget or daemon)."""
    missing, daemons = routes(conn, vault, plan, given)
    if missing:
        raise NoWorker(missing)
    return launch(conn, vault, skill, given, plan=plan, source=source,
                  triggered_by=triggered_by, workdir=workdir, waiting=waiting,
                  daemons=daemons)


def launch(conn: Connection, vault: Vault, skill: Skill, given: Mapping[str, Any], *,
           plan: Plan, source: str, triggered_by: str | None = None,
           workdir: str | None = None, waiting: bool = False,
           daemons: list[OnlineDaemon] | None = None) -> str:
    """Record the run and take its first planning step here, in the same transaction,
    so its first steps go straight to their queues (no control-queue round trip); a
    lone first step's message goes before the commit, behind the run's fence
    (lifecycle/launch_fence.py), so the commit overlaps its way to the worker.
    ``daemons``: the online daemons as the caller just read them (``routes``), to route
    the first steps by instead of reading them again.

    ``waiting``: this process follows the run with ``wait_run`` next, which sends the
    run's watchdog message only once the run outlasts its first wait (POLL_S): a run
    that ends sooner never needed one, and the step's message travels alone. Should the
    process die within that wait, every worker's sweep (workers/sweeper.py) still finds
    the run by its ``watch_at``, as it finds a watch message lost with a worker."""
    ctx = client_context(conn)
    with transaction(conn.endpoints.database_url) as session:
        run_id = create_run(session, vault, skill, given, source=source,
                            triggered_by=triggered_by, workdir=workdir, plan=plan)
        out = advance_in(session, ctx, run_id, daemons=daemons)
        out = send_ahead(conn.app, session, run_id, out)
    if waiting and out.watch_in_s is not None:
        watch = Outcome(watch_in_s=out.watch_in_s)
        out = replace(out, watch_in_s=None)
        _watch_later[run_id] = lambda: send_outcome(conn.app, ctx, run_id, watch)
    send_outcome(conn.app, ctx, run_id, out)
    return run_id


# run id -> the send of its watchdog message, held while ``wait_run`` sees if it is due
_watch_later: dict[str, Callable[[], None]] = {}


def _send_watch(run_id: str) -> None:
    send = _watch_later.pop(run_id, None)
    if send is not None:
        send()


def cancel_run(conn: Connection, run_id: str, reason: str) -> Cancelled:
    """Cancel a run from the client (lifecycle/tasks.py ``cancel``): RunNotFound when no
    record has it; a run that had ended is left as it ended (``ended_now`` False)."""
    return cancel(conn.app, client_context(conn), run_id, reason)


def start_retry(conn: Connection, run_id: str) -> str:
    """Record a retry of run ``run_id`` (lifecycle/retry.py) and set it moving; its id.

    Checked first as a run is: some online worker serves every queue its plan needs
    (NoWorker), and the old run is one to retry (RunRefused); nothing is recorded
    otherwise."""
    with transaction(conn.endpoints.database_url) as session:
        old = session.get(PipelineRun, run_id)
        if old is None:
            raise RunNotFound(run_id)
        plan, root = Plan.model_validate(old.plan), Path(old.vault)
    if root.is_dir():
        try:
            missing = unrunnable(conn, open_vault(root, ttl_s=conn.settings.discovery_ttl_s),
                                 plan)
        except KeyError:  # a nested orchestrator gone from the vault: its step will say so
            missing = None
        if missing:
            raise NoWorker(missing)
    ctx = client_context(conn)
    with transaction(conn.endpoints.database_url) as session:
        new_id = create_retry(session, run_id)
        session.flush()
        out = advance_in(session, ctx, new_id)
    send_outcome(conn.app, ctx, new_id, out)
    return new_id


def run_progress(conn: Connection, run_id: str, *, counts: bool = True
                 ) -> tuple[PipelineRun, Progress]:
    """The run record, and (unless it has ended or ``counts`` is False) its step counts."""
    with transaction(conn.endpoints.database_url) as session:
        run = session.get(PipelineRun, run_id)
        if run is None:
            raise RunNotFound(run_id)
        # Kept per step as states change (lifecycle/step_counts.py): a few rows, not a
        # GROUP BY over every attempt (slow in a wide fan-out, and asked every POLL_S).
        counted = state_counts(session, descendant_run_ids(session, run_id)) \
            if counts and not RunState(run.state).terminal else {}
        session.expunge(run)
    return run, Progress(run_id, counted)


def files_current(conn: Connection, runs: Iterable[PipelineRun]) -> None:
    """Rewrite the benchmarks.json windows of these ended runs' skills here, once each,
    from the database: for a client that followed them by polling (`skillq test`), so
    never heard their workers say the files were written (``wait_run`` does)."""
    ctx = client_context(conn)
    done: set[tuple[Path, str]] = set()
    for run in runs:
        due = ended_run_files(ctx, run)
        fresh = tuple(s for s in due.skills if (due.vault, s) not in done)
        done.update((due.vault, s) for s in fresh)
        if fresh:
            write_files(ctx, replace(due, skills=fresh, run_ended=False))


def wait_run(conn: Connection, run_id: str, *,
             on_progress: Callable[[Progress], None] | None = None,
             timeout_s: float | None = None,
             on_outage: Callable[[str], None] | None = None,
             on_end: Callable[[PipelineRun], None] | None = None) -> PipelineRun:
    """Follow a run until it is terminal; the final record (detached from its session).

    The planner NOTIFYs when a run ends, so the end is seen at once; progress is read
    every POLL_S meanwhile. The run does not need this client, so a database outage is
    waited out (shared/db/outage.py FollowingRun): reconnecting with backoff (up to
    OUTAGE_RETRY_MAX_S apart), telling ``on_outage`` (default: stderr) once when it
    starts and once when it ends, and raising DatabaseUnreachable after
    SKILLQ_DATABASE_OUTAGE_S.

    ``on_end`` is given the record as soon as it is read; the wait then lasts until the
    run's benchmarks.json windows show it. Its worker writes them just after the run's
    final commit (lifecycle/recording.py), so they do not hold up the result, and
    `skillq run` still returns with them current.
    """
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    # the policy the thin client follows through the local API too (run_client.py)
    outage = FollowingRun(run_id, conn.settings.database_outage_s, on_outage or to_stderr)
    listener = RunEndListener(conn.endpoints.database_url)
    looked = woken = False

    def look() -> PipelineRun | None:
        """The run once it has ended; else None, after waiting up to POLL_S for it to.

        Each look asks the listening connection for the run's state alone (one indexed
        row), and reads the record only once it has ended. Progress counts wait for the
        second look: a run that ends within POLL_S (most one-step runs) is never
        counted while its worker is busy with it, on a machine it shares."""
        nonlocal looked, woken
        try:
            listener.open(run_id)
            if woken:  # its end was announced: the record, read at once
                woken = False
                ended = listener.ended(run_id)
                if ended is not None:
                    return ended
            state = listener.state(run_id)
            if state is None:
                raise RunNotFound(run_id)
            if RunState(state).terminal:
                ended = listener.ended(run_id)
                if ended is not None:
                    return ended
            if looked:
                _send_watch(run_id)  # it outlasted the first wait (launch's ``waiting``)
            if on_progress is not None and looked:
                run, progress = run_progress(conn, run_id)
                if RunState(run.state).terminal:
                    return run
                on_progress(progress)
            looked = True
            if deadline is not None and time.monotonic() > deadline:
                raise SkillqError(f"run {run_id} still {state} after {timeout_s:g} s")
            woken = listener.wait(run_id, POLL_S)
            return None
        except Exception:
            listener.close()  # maybe broken: the next look opens a fresh one
            raise

    try:
        while True:
            run = outage.call(look)  # DatabaseUnreachable after SKILLQ_DATABASE_OUTAGE_S
            if run is not None:
                _watch_later.pop(run_id, None)  # it ended: nothing left to watch
                if on_end is not None:
                    on_end(run)
                listener.await_files(conn, run)
                listener.release()
                return run
    finally:
        listener.close()
        if run_id in _watch_later:  # not followed to its end here: the run needs it
            with contextlib.suppress(Exception):  # the sweep covers a watch never sent
                _send_watch(run_id)


OUTAGE_RETRY_MAX_S = FOLLOW_WAIT_S  # a waiting client sees the run's end this soon after one
