"""Launching: a ready step's items (its fan-out resolved, each item's inputs, routed,
recorded pending, batched into messages), and an attempt sent when it is due."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from lifecycle import transitions
from lifecycle.dispatch import Dispatch
from lifecycle.planner import decisions, records
from lifecycle.planner.values import scope
from lifecycle.planner.work import Work
from lifecycle.routing import NoRoute, Route, folder_of, recent_daemons, route
from shared.cache import input_hash
from shared.db.models import StepRun
from shared.plan import PlanStep
from shared.refs import RefSyntaxError, parse_template
from shared.resolve import ResolveError, resolve
from shared.states import StepProgress
from shared.store import pack


class ItemError(Exception):
    """An item's inputs could not be resolved at launch."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index
        self.message = message


def launch(work: Work, step: PlanStep) -> bool:
    """Launch the step's items; True when none was left to run (a retry reused them
    all, or it fans out over nothing). ItemError, ResolveError: the run is to fail."""
    now_scope = scope(work)
    items: list[Any] = [None]
    if step.fans_out:
        listed = resolve(step.for_each, now_scope)
        if not isinstance(listed, list):
            raise ResolveError(f"for_each gave {type(listed).__name__}, not a list")
        items = listed
    if work.progress.start(step.id, len(items)) is StepProgress.DONE:
        return True  # done at once: a fan-out over nothing (no empty chord)
    session, run = work.session, work.run
    # A retry's run (lifecycle/retry.py) starts with the items that succeeded in the
    # run it retries already recorded: those are not run again.
    reused = records.reused_items(session, run, step.id)
    # Every item's inputs first: a reference failing at item 7 must not leave items
    # 0-6 dispatched into a run that has failed.
    prepared: list[tuple[int, Any, str]] = []
    for index, item in enumerate(items):
        number = index if step.fans_out else transitions.LONE_ITEM
        if number in reused:
            continue
        item_scope = replace(now_scope, item=item, has_item=step.fans_out)
        inputs = {}
        for key, expr in step.with_.items():
            try:
                inputs[key] = resolve(expr, item_scope)
            except ResolveError as exc:
                if _optional_input(expr, run.inputs):
                    continue  # not given: the called skill's default applies
                raise ItemError(number, str(exc)) from None
        prepared.append((number, inputs, ""))
    if not prepared:
        return True
    where = route_step(work, step, [inputs for _, inputs, _ in prepared])  # none can? fail
    target_ms = work.settings.batch_target_ms
    size = decisions.batch_size(len(prepared), target_ms, records.recent_avg_ms(
        session, step.skill) if decisions.may_batch(len(prepared), target_ms) else None)
    inline = work.settings.inline_output_bytes
    for n, (index, inputs, _) in enumerate(prepared):  # stored before COPY takes over
        prepared[n] = (index, pack(session, inputs, inline), input_hash(inputs))
    ids = records.first_attempts(session, run, step, prepared, where, size)
    for start in range(0, len(ids), size):
        work.out.dispatch.append(Dispatch(tuple(ids[start:start + size]),
                                          where.queue_for(start // size), step.skill))
    work.open_steps.add(step.id)  # its items were just inserted pending
    return False


def route_step(work: Work, step: PlanStep, given: Sequence[Mapping[str, Any]] = (),
               reuse_s: float | None = None) -> Route:
    """Where the step's items (inputs ``given``) go. ResolveError: no daemon can run it."""
    if work.daemons is None or reuse_s is not None:
        with work.session.no_autoflush:  # a new run's row waits for the commit
            work.daemons, work.earlier_read = recent_daemons(
                work.session, work.settings.daemon_offline_after_s,
                work.settings.routing_reuse_s if reuse_s is None else reuse_s)
    try:
        return route(step.queue, step.requires, work.daemons, step.agent, folder_of(*given))
    except NoRoute as exc:
        if work.earlier_read:  # refused on an earlier read: only a fresh one may
            return route_step(work, step, given, reuse_s=0.0)
        raise ResolveError(f"no daemon can run it: {exc}") from None


def send_when_due(work: Work, row: StepRun) -> None:
    """Send a pending attempt now, or leave it (not_before set) for a later advance.

    Retries wait here, not as countdown messages: a worker keeps countdown messages
    in its memory, and they would die with it.
    """
    if row.not_before is not None and row.not_before > work.now:
        work.next_due = min(work.next_due or row.not_before, row.not_before)
        return
    row.not_before = None  # sent: a pending row without not_before is in its queue
    # A retry, a re-dispatch or an agent step resumed goes ahead of the queue's
    # backlog: it has waited once.
    work.out.dispatch.append(Dispatch((row.id,), row.queue, row.skill,
                                      urgent=row.attempt > 1 or row.started_at is not None))


def _optional_input(expr: Any, given: dict[str, Any]) -> bool:
    """A lone ${inputs.x} whose optional input x was not given."""
    if not isinstance(expr, str):
        return False
    try:
        ref = parse_template(expr).single
    except RefSyntaxError:
        return False
    return ref is not None and ref.kind == "input" and ref.name not in given
