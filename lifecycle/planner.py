"""The planner: moves one pipeline run forward from what PostgreSQL records.

Fan-out lists are known only at run time and Celery's own fan-in (chords) counts a
redelivered task twice under at-least-once delivery, so fan-in is tracked here: each
call locks the run's row and decides what is ready, what finished, what died and what
retries next. It is idempotent: calling it twice in a row dispatches nothing new. The
caller commits, then sends the returned dispatches.

It runs once per settled step, per failed item and per watch, so it reads only what it
needs, each an index range on ix_step_runs_run_step_state (migration 0015), never every
attempt of the run: the attempts of its running steps that want something (a retry or
a lost item without its next attempt, a retry falling due, a running item whose
heartbeat stopped), whether a running step has an item still open, its failed items
once it has none, and a finished step's outputs when a later step or the run's outputs
refer to them. A 100,000-item fan-out's advance costs what a 10-item one's does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import String, bindparam, func, select
from sqlalchemy.orm import Session, defer, make_transient_to_detached

from lifecycle import step_counts, transitions
from lifecycle.dispatch import Dispatch
from lifecycle.recording import FilesDue
from lifecycle.routing import NoRoute, OnlineDaemon, Route, folder_of, recent_daemons, route
from lifecycle.run_end import count_run, finish_parent
from shared.attempt_id import AttemptId
from shared.cache import input_hash
from shared.db import deferred
from shared.db.models import PipelineRun, StepRun
from shared.db.txn_context import context
from shared.manifest import OnFailure
from shared.notes import note_lost_step
from shared.plan import Plan, PlanStep
from shared.refs import RefSyntaxError, parse_template
from shared.resolve import ResolveError, Scope, resolve
from shared.settings import Settings
from shared.states import RunState, StepState
from shared.store import pack, unpack

MAX_LOST = 3  # re-dispatches after a dead worker before the step is given up
# Items of a step known to be quick go several to a message, so a wide fan-out of cheap
# steps pays the broker and the records per batch, not per item: a batch is sized to
# about settings.batch_target_ms (200 ms) of the skill's recent average duration, at most
# MAX_BATCH items, so the work spreads over as many messages as it has such slices (and,
# when it is more than one slice, over at least MIN_MESSAGES, for a second worker process
# to share it). A skill with no history, or a slow one, goes one item per message.
MAX_BATCH = 64
MIN_MESSAGES = 2
HISTORY_WINDOW = 20


@dataclass
class Outcome:
    dispatch: list[Dispatch] = field(default_factory=list)
    advance_runs: list[str] = field(default_factory=list)  # parents to move on
    finished: bool = False  # the run ended in this advance
    watch_in_s: float | None = None
    settled_skills: set[str] = field(default_factory=set)  # their benchmarks.json is due
    files: FilesDue | None = None  # what lifecycle/tasks.py rewrites after the commit


class _ItemError(Exception):
    """An item's inputs could not be resolved at launch."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index
        self.message = message


def _now() -> datetime:
    return datetime.now(UTC)


FINAL = [s for s in StepState if s.final]


# A finished step's items' outcomes in item order (built once: every run's end asks it).
_VALUES = (select(StepRun.state, StepRun.outputs)
           .where(StepRun.run_id == bindparam("run_id", type_=String),
                  StepRun.step_id == bindparam("step_id", type_=String),
                  step_counts.in_state(*FINAL)).order_by(StepRun.item_index))


class _Values(Mapping[str, Any]):
    """Finished steps' values, read from their records only when a reference asks: a
    step after a wide fan-out that does not refer to it never loads its outputs."""

    def __init__(self, work: _Advance, done: list[PlanStep]) -> None:
        self.work = work
        self.done = {s.id: s for s in done}

    def __getitem__(self, step_id: str) -> Any:
        return self.work.value(self.done[step_id])

    def __iter__(self) -> Iterator[str]:
        return iter(self.done)

    def __len__(self) -> int:
        return len(self.done)


class _Advance:
    def __init__(self, session: Session, run: PipelineRun, settings: Settings) -> None:
        self.session = session
        self.run = run
        self.settings = settings
        self.plan = Plan.model_validate(run.plan)
        self.progress: dict[str, dict[str, Any]] = {k: dict(v) for k, v in
                                                    (run.progress or {}).items()}
        self.open_steps: set[str] = set()  # seen with an item open: they stay so here
        self.out = Outcome()
        self.values: dict[str, Any] = {}
        self.now = _now()
        self.next_due: datetime | None = None  # the earliest retry waiting for its time
        self.daemons: list[OnlineDaemon] | None = None  # read once, when a step is routed
        self.earlier_read = False  # the daemons are this process's earlier read
        # Steps (never fan-outs: LONE_ITEM) whose only item this transaction recorded
        # succeeded: their stored outputs
        self.lone: dict[str, Any] = {
            step: outputs for (run_id, step), outputs in
            context(session).succeeded_lone.items() if run_id == run.id}

    # -- attempts -----------------------------------------------------------------
    def _next_attempt(self, row: StepRun, due: datetime | None) -> None:
        # Routed again: the daemon that ran the last attempt may be the one that died.
        try:
            where = self._route(self.plan.step(row.step_id), [row.inputs])
        except ResolveError as exc:
            self._fail(row.step_id, row.item_index, str(exc))
            return
        new = transitions.add_attempt(
            self.session, follows=row,
            id=str(AttemptId(row.run_id, row.step_id, row.item_index, row.attempt + 1)),
            run_id=row.run_id, step_id=row.step_id, item_index=row.item_index,
            attempt=row.attempt + 1, skill=row.skill, version=row.version, source=row.source,
            queue=where.queue_for(row.item_index + 1), route=where.reason, inputs=row.inputs,
            input_hash=row.input_hash, not_before=due)
        self._send_when_due(new)

    def _send_when_due(self, row: StepRun) -> None:
        """Send a pending attempt now, or leave it (not_before set) for a later advance.

        Retries wait here, not as countdown messages: a worker keeps countdown messages
        in its memory, and they would die with it.
        """
        if row.not_before is not None and row.not_before > self.now:
            self.next_due = min(self.next_due or row.not_before, row.not_before)
            return
        row.not_before = None  # sent: a pending row without not_before is in its queue
        # A retry, a re-dispatch or an agent step resumed goes ahead of the queue's
        # backlog: it has waited once.
        self.out.dispatch.append(Dispatch((row.id,), row.queue, row.skill,
                                          urgent=row.attempt > 1 or row.started_at is not None))

    def _running(self) -> list[str]:
        return [s.id for s in self.plan.steps
                if self.progress.get(s.id, {}).get("state") == "running"]

    def revive(self) -> None:
        """Retry what failed transiently; re-dispatch what a dead worker held.

        Reads first (the rows, their items' losses), then changes: no query in the loop,
        so a thousand items of a dead worker's batches cost one flush, not a thousand."""
        # A step whose only item just succeeded here has nothing to revive.
        steps = [s for s in self._running() if s not in self.lone]
        if not steps:
            return
        now = self.now
        dead_before = now - timedelta(seconds=self.settings.dead_after_s)
        wanting = step_counts.wanting(self.session, self.run.id, steps, dead_before)
        lost = step_counts.losses(self.session, self.run.id, wanting)
        for row in wanting:
            if self.out.finished:
                return
            losses = lost.get((row.step_id, row.item_index), 0)
            if row.state == StepState.RETRYING:
                self._next_attempt(row, row.not_before)
            elif row.state == StepState.PENDING:  # not_before set: a retry, or resumed
                self._send_when_due(row)
            elif row.state == StepState.LOST:  # declared by its worker (a pool death)
                self._after_loss(row, losses)
            else:  # running, its heartbeat stopped
                assert row.heartbeat_at is not None
                transitions.declare_lost(
                    row, f"worker {row.worker} stopped sending heartbeats (none since "
                    f"{row.heartbeat_at:%H:%M:%S}); re-dispatched", now)
                self._after_loss(row, losses + 1)

    def _after_loss(self, row: StepRun, losses: int) -> None:
        if losses >= MAX_LOST:
            self._fail(row.step_id, row.item_index, f"its worker died {MAX_LOST} times "
                       "running it")
            note_lost_step(self.session, self.run, row)  # an improvement note
            return
        self._next_attempt(row, None)

    # -- values ---------------------------------------------------------------------
    def value(self, step: PlanStep) -> Any:
        """A finished step's value: its items' outputs in order (None for a failed one
        under on_failure: continue). A finished step's items all have a final attempt,
        and no item has two."""
        if step.id in self.values:
            return self.values[step.id]
        if step.id in self.lone:
            stored = self.lone[step.id]
            self.values[step.id] = None if stored is None else unpack(self.session,
                                                                      json.loads(stored))
            return self.values[step.id]
        results = []
        for state, outputs in self.session.execute(
                _VALUES, {"run_id": self.run.id, "step_id": step.id}):
            if state == StepState.SUCCEEDED:
                results.append(unpack(self.session, outputs))
            elif step.on_failure is OnFailure.CONTINUE:
                results.append(None)
        value = results if step.fans_out else (results[0] if results else None)
        self.values[step.id] = value
        return value

    def scope(self, item: Any = None, has_item: bool = False) -> Scope:
        done = [s for s in self.plan.steps if self.progress.get(s.id, {}).get("state") == "done"]
        return Scope(inputs=self.run.inputs, steps=_Values(self, done),
                     fan_out=frozenset(s.id for s in done if s.fans_out),
                     array_outputs={s.id: frozenset(s.array_outputs) for s in done},
                     item=item, has_item=has_item)

    # -- the run ----------------------------------------------------------------------
    def _fail(self, step_id: str, item: int | None, error: str) -> None:
        run = self.run
        where = f"step '{step_id}'" + (f" item {item}" if item is not None and item >= 0 else "")
        transitions.fail_run(self.session, run, error=f"{where} failed: {error}", step=step_id,
                             item=item if item is not None and item >= 0 else None)
        self.out.finished = True
        count_run(self.session, run, self.plan)

    def _launch(self, step: PlanStep) -> bool:
        """Launch the step's items; True when none was left to run (a retry reused them
        all, or it fans out over nothing)."""
        scope = self.scope()
        items: list[Any] = [None]
        if step.fans_out:
            listed = resolve(step.for_each, scope)
            if not isinstance(listed, list):
                raise ResolveError(f"for_each gave {type(listed).__name__}, not a list")
            items = listed
        self.progress[step.id] = {"state": "running", "items": len(items)}
        if not items:  # a fan-out over nothing continues at once (no empty chord)
            self.progress[step.id]["state"] = "done"
            return True
        # A retry's run (lifecycle/retry.py) starts with the items that succeeded in the
        # run it retries already recorded: those are not run again. (Only a retry's run
        # has attempts before its steps launch.)
        reused = set(self.session.scalars(select(StepRun.item_index).where(
            StepRun.run_id == self.run.id, StepRun.step_id == step.id,
            step_counts.in_state(StepState.SUCCEEDED)))) \
            if self.run.retry_of is not None else set()
        # Every item's inputs first: a reference failing at item 7 must not leave items
        # 0-6 dispatched into a run that has failed.
        prepared: list[tuple[int, Any, str]] = []
        for index, item in enumerate(items):
            number = index if step.fans_out else transitions.LONE_ITEM
            if number in reused:
                continue
            item_scope = replace(scope, item=item, has_item=step.fans_out)
            inputs = {}
            for key, expr in step.with_.items():
                try:
                    inputs[key] = resolve(expr, item_scope)
                except ResolveError as exc:
                    if _optional_input(expr, self.run.inputs):
                        continue  # not given: the called skill's default applies
                    raise _ItemError(number, str(exc)) from None
            prepared.append((number, inputs, ""))
        if not prepared:
            return True
        where = self._route(step, [inputs for _, inputs, _ in prepared])  # none can? fail
        size = self._batch_size(step.skill, len(prepared))
        inline = self.settings.inline_output_bytes
        for n, (index, inputs, _) in enumerate(prepared):  # stored before COPY takes over
            prepared[n] = (index, pack(self.session, inputs, inline), input_hash(inputs))
        ids = [AttemptId.text(self.run.id, step.id, index, 1) for index, _, _ in prepared]
        # Rows are made as COPY takes them, not held all at once (a wide fan-out's are
        # most of what an advance holds); prepared keeps only what each row needs.
        transitions.launch_attempts(self.session, (
            {"id": ids[n], "run_id": self.run.id, "step_id": step.id, "item_index": index,
             "attempt": 1, "skill": step.skill, "version": step.version,
             "state": StepState.PENDING.value, "source": self.run.source,
             "queue": where.queue_for(n // size), "inputs": packed, "input_hash": digest,
             "not_before": None, "route": where.reason}
            for n, (index, packed, digest) in enumerate(prepared)),
            at_commit=transitions.is_new(self.session, self.run.id))
        for start in range(0, len(ids), size):
            self.out.dispatch.append(Dispatch(tuple(ids[start:start + size]),
                                              where.queue_for(start // size), step.skill))
        self.open_steps.add(step.id)  # its items were just inserted pending
        return False

    def _route(self, step: PlanStep, given: Sequence[Mapping[str, Any]] = (),
               reuse_s: float | None = None) -> Route:
        if self.daemons is None or reuse_s is not None:
            with self.session.no_autoflush:  # a new run's row waits for the commit
                self.daemons, self.earlier_read = recent_daemons(
                    self.session, self.settings.daemon_offline_after_s,
                    self.settings.routing_reuse_s if reuse_s is None else reuse_s)
        try:
            return route(step.queue, step.requires, self.daemons, step.agent, folder_of(*given))
        except NoRoute as exc:
            if self.earlier_read:  # refused on an earlier read: only a fresh one may
                return self._route(step, given, reuse_s=0.0)
            raise ResolveError(f"no daemon can run it: {exc}") from None

    def _batch_size(self, skill: str, items: int) -> int:
        if items < 2 or not self.settings.batch_target_ms:
            return 1
        recent = (select(StepRun.duration_ms)
                  .where(StepRun.skill == skill, StepRun.state == StepState.SUCCEEDED.value,
                         StepRun.finished_at.is_not(None))
                  .order_by(StepRun.finished_at.desc()).limit(HISTORY_WINDOW).subquery())
        avg_ms = self.session.scalar(select(func.avg(recent.c.duration_ms)))
        if avg_ms is None:
            return 1
        by_time = int(self.settings.batch_target_ms / max(float(avg_ms), 0.1))
        if items <= by_time:  # all of it is one slice of work: one message, no hand-off
            return min(MAX_BATCH, items)
        by_spread = -(-items // MIN_MESSAGES)
        return max(1, min(MAX_BATCH, by_time, by_spread))

    def _settle(self, step: PlanStep) -> bool:
        """Mark a running step done when every item is final; False if the run failed.

        After revive(), an item whose newest attempt is not final has one pending,
        running or waiting (a retrying or lost attempt has its next one, or the run
        failed), so "every item final" is "no attempt open": one index probe."""
        if step.id in self.open_steps:
            return True
        if step.id in self.lone:  # its one item succeeded here
            self.progress[step.id]["state"] = "done"
            self.out.settled_skills.add(step.skill)
            return True
        if step_counts.any_open(self.session, self.run.id, step.id):
            self.open_steps.add(step.id)
            return True
        failed, first = step_counts.failed_items(self.session, self.run.id, step.id)
        items = self.progress[step.id].get("items", 1)
        if first is not None:
            every = failed == items
            if step.on_failure is OnFailure.ABORT or (every and (
                    step.fans_out or step.on_failure is OnFailure.SKIP)):
                self.out.settled_skills.add(step.skill)
                error = first.error or "failed"
                if every and items > 1:
                    error = f"every one of its {items} items failed; the first: {error}"
                self._fail(step.id, first.item_index, error)
                return False
            if step.on_failure is OnFailure.SKIP:
                transitions.skip_failed_items(self.session, self.run.id, step.id)
        self.progress[step.id]["state"] = "done"
        self.out.settled_skills.add(step.skill)
        return True

    def step_forward(self) -> None:
        changed = True
        while changed and not self.out.finished:
            changed = False
            for step in self.plan.steps:
                state = self.progress.get(step.id, {}).get("state", "waiting")
                if state == "running":
                    if not self._settle(step):
                        return
                    changed |= self.progress[step.id]["state"] == "done"
                elif state == "waiting" and all(
                        self.progress.get(d, {}).get("state") == "done" for d in step.after):
                    try:
                        nothing_to_run = self._launch(step)
                    except _ItemError as exc:
                        self._fail(step.id, exc.index, exc.message)
                        return
                    except ResolveError as exc:
                        self._fail(step.id, None, str(exc))
                        return
                    changed |= nothing_to_run
        if all(self.progress.get(s.id, {}).get("state") == "done" for s in self.plan.steps):
            self._succeed()

    def _succeed(self) -> None:
        run = self.run
        try:
            if self.plan.outputs_of is not None:
                outputs = self.value(self.plan.step(self.plan.outputs_of))
            else:
                scope = self.scope()
                outputs = {name: resolve(expr, scope) for name, expr in self.plan.outputs.items()}
        except ResolveError as exc:
            self._fail("outputs", None, str(exc))
            return
        transitions.succeed_run(run, pack(self.session, outputs,
                                          self.settings.inline_output_bytes))
        self.out.finished = True
        # Not flushed first: the counts read only attempts' costs, which this advance
        # leaves as they were, and the run's row goes in one UPDATE with its progress.
        with self.session.no_autoflush:
            count_run(self.session, run, self.plan)


def _optional_input(expr: Any, given: dict[str, Any]) -> bool:
    """A lone ${inputs.x} whose optional input x was not given."""
    if not isinstance(expr, str):
        return False
    try:
        ref = parse_template(expr).single
    except RefSyntaxError:
        return False
    return ref is not None and ref.kind == "input" and ref.name not in given


# A run's inputs hold its fan-out lists (large in a wide fan-out) and its outputs their
# results: read when a step is launched or the run ends, not on every advance.
LAZY = (defer(PipelineRun.inputs), defer(PipelineRun.outputs))


def lock_run(session: Session, run_id: str) -> PipelineRun | None:
    """The run's row, locked for this transaction: what ``advance`` plans from."""
    # A run this session recorded (as `skillq run` plans the first step in the
    # transaction that records the run) is no other transaction's to see yet: the object
    # itself, whole (its first launch reads the inputs).
    new = context(session).new_runs.get(run_id)
    if new is not None and new in session:
        return new
    run = session.get(PipelineRun, run_id, options=LAZY, with_for_update=True)
    if run is not None:
        deferred.held(session, run)  # its UPDATE goes in the commit's pipeline
    return run


def locked_run(session: Session, columns: dict[str, Any]) -> PipelineRun:
    """The run whose row ``transitions.claim_lone`` locked, in this session as
    ``lock_run`` would give it (its inputs and outputs read if used). The session has
    not loaded it before.

    Made as the ORM makes an object it loads, its columns set as loaded values: the
    instrumented constructor records each as a change first (CPU spent for nothing on
    every lone cache hit's path)."""
    run: PipelineRun = PipelineRun.__mapper__.class_manager.new_instance()
    run.__dict__.update(columns)
    make_transient_to_detached(run)
    session.add(run)
    deferred.held(session, run)
    return run


def advance(session: Session, run_id: str, settings: Settings, *,
            locked: PipelineRun | None = None,
            daemons: list[OnlineDaemon] | None = None) -> Outcome:
    """``locked``: the run, as ``lock_run`` gave it earlier in this transaction;
    ``daemons``: the online daemons to route by, as the caller has just read them."""
    run = locked if locked is not None else lock_run(session, run_id)
    if run is None or RunState(run.state).terminal:
        return Outcome()  # ended before: a late nudge changes nothing
    if run.state == RunState.PENDING:
        transitions.start_run(run)
    work = _Advance(session, run, settings)
    work.daemons = daemons
    work.revive()
    if not work.out.finished:
        work.step_forward()
    run.progress = work.progress
    if work.out.finished:
        run.watch_at = None  # nothing left to watch
        parent = finish_parent(session, run)
        if parent is not None:
            work.out.advance_runs.append(parent)
    else:
        now = _now()
        # One watchdog per run, so a dead worker is noticed with nobody watching; sooner
        # when a retry falls due. A lost watch message is caught by every worker's sweep.
        wanted = now + timedelta(seconds=settings.dead_after_s / 2)
        if work.next_due is not None:
            wanted = min(wanted, max(work.next_due, now))
        if run.watch_at is None or run.watch_at <= now or wanted < run.watch_at:
            run.watch_at = wanted
            work.out.watch_in_s = (wanted - now).total_seconds()
    return work.out
