"""`skillq retry`: a new run of a failed or cancelled run, from where it stopped.

The new run takes the old one's frozen plan and inputs (what ran is what runs again, even
if the vault changed since: a fixed script is picked up by its step, a changed pipeline
is a new `skillq run`). A step whose every item succeeded, and whose upstream steps were
reused too, starts done: its attempts are copied, so its outputs are reused without
running it. A step all of whose upstream steps were reused keeps the items that
succeeded and runs the others (a fan-out's failed items); everything downstream of a
step that runs again runs again, since its inputs may change. The new run records
``retry_of`` (the old run) and ``triggered_by = "retry"``.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from lifecycle import transitions
from lifecycle.submit import new_run_id
from shared.db.models import PipelineRun, StepRun
from shared.errors import RunNotFound, RunRefused
from shared.plan import Plan
from shared.states import RunState, StepProgress, StepState, check_progress

RETRIED = (RunState.FAILED, RunState.CANCELLED, RunState.REJECTED)


def create_retry(session: Session, run_id: str, *, triggered_by: str = "retry") -> str:
    """Insert a pending retry of run ``run_id``; its id (the caller commits, then asks
    for an advance). RunRefused when that run is not one to retry."""
    old = session.get(PipelineRun, run_id)
    if old is None:
        raise RunNotFound(run_id)
    if old.parent_step_run_id is not None:
        raise RunRefused(f"run {run_id} is a nested run of step {old.parent_step_run_id}; "
                          f"retry the top-level run it belongs to")
    if RunState(old.state) not in RETRIED:
        raise RunRefused(f"run {run_id} is {old.state}: only a failed or cancelled run can be "
                          f"retried (`skillq wait {run_id}` follows one that has not ended)"
                          if not RunState(old.state).terminal else
                          f"run {run_id} succeeded: nothing to retry; `skillq run "
                          f"{old.skill}` starts a new run")
    plan = Plan.model_validate(old.plan)
    newest: dict[tuple[str, int], StepRun] = {}
    for row in session.scalars(select(StepRun).where(StepRun.run_id == run_id)).all():
        key = (row.step_id, row.item_index)
        if key not in newest or row.attempt > newest[key].attempt:
            newest[key] = row
    by_step: dict[str, list[StepRun]] = {}
    for (step_id, _), row in sorted(newest.items()):
        by_step.setdefault(step_id, []).append(row)

    done: set[str] = set()  # steps reused whole, found in dependency order
    changed = True
    while changed:
        changed = False
        for step in plan.steps:
            ledger = (old.progress or {}).get(step.id, {})
            rows = by_step.get(step.id, [])
            if step.id in done or ledger.get("state") != StepProgress.DONE \
                    or not set(step.after) <= done \
                    or len(rows) != ledger.get("items", 1) \
                    or any(r.state != StepState.SUCCEEDED for r in rows):
                continue
            done.add(step.id)
            changed = True
    kept = [r for step in plan.steps if set(step.after) <= done
            for r in by_step.get(step.id, []) if r.state == StepState.SUCCEEDED]
    # A step reused whole starts done in the new run, never launched there (waiting ->
    # done, the one change of its progress this makes).
    check_progress(StepProgress.WAITING, StepProgress.DONE)
    progress = {s: {"state": StepProgress.DONE.value,
                    "items": (old.progress or {})[s].get("items", 1)} for s in done}
    new_id = new_run_id()
    transitions.new_run(session, run_id=new_id, skill=old.skill, version=old.version,
                        source=old.source, vault=old.vault, plan=old.plan,
                        inputs=dict(old.inputs), triggered_by=triggered_by,
                        parent_step_run_id=None, retry_of=old.id, progress=progress)
    session.flush()  # the run's row before its attempts' (their foreign key)
    transitions.reuse_attempts(session, new_id, kept)
    return new_id
