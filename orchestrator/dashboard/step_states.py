"""What a run's page draws for each planned step, from its recorded attempts.

A step's state is derived from the newest attempt of each of its items (never from one
"newest" row of the whole step: in a fan-out, item 7 succeeding says nothing about item
3), and from how the run ended: the step the run failed at is failed (rejected, when a
person turned its approval down), whatever its other items did, and a step that never
started in a run that ended is "not run", not "waiting" (nothing will ever start it).

"waiting" is also a recorded state: an item that waits for the runs it started, or for
a person (an open question or approval, ``asks``); the view says which.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from shared.db.models import PipelineRun, StepRun
from shared.db.wait_models import APPROVAL, QUESTION
from shared.states import REJECTED_KIND, RunState, StepProgress, StepState

NOT_RUN = "not run"
WAITING = "waiting"
REJECTED = "rejected"
_OPEN = (StepState.PENDING, StepState.RUNNING, StepState.RETRYING, StepState.LOST,
         StepState.WAITING)


@dataclass(frozen=True)
class StepView:
    state: str  # a step state, or "waiting" / "not run" / "rejected"
    detail: str  # the state, with what its items did when that says more
    asking: bool = False  # it waits for a person: drawn so that it stands out

    @property
    def css(self) -> str:
        return "state-" + self.state.replace(" ", "-") + (" asking" if self.asking else "")


def newest_attempts(rows: Iterable[StepRun]) -> dict[str, list[StepRun]]:
    """Step id -> the newest attempt of each of its items, by item."""
    newest: dict[tuple[str, int], StepRun] = {}
    for row in rows:
        seen = newest.get((row.step_id, row.item_index))
        if seen is None or row.attempt > seen.attempt:
            newest[(row.step_id, row.item_index)] = row
    by_step: dict[str, list[StepRun]] = {}
    for (step_id, _), row in sorted(newest.items()):
        by_step.setdefault(step_id, []).append(row)
    return by_step


def _count(items: Sequence[StepRun], state: StepState) -> int:
    return sum(1 for r in items if r.state == state)


def _waiting_for(asks: Collection[str]) -> str:
    if APPROVAL in asks:
        return "waiting for approval"
    return "waiting for an answer" if QUESTION in asks else "waiting for its runs"


def step_view(run: PipelineRun, step_id: str, items: Sequence[StepRun],
              progress: dict[str, object] | None, asks: Collection[str] = ()) -> StepView:
    """``items``: the newest attempt of each item of the step (newest_attempts);
    ``asks``: the kinds of its open waits for a person (question, approval)."""
    ended = RunState(run.state).terminal
    if run.state == RunState.REJECTED and run.failed_step == step_id:
        return StepView(REJECTED, REJECTED)
    if run.state == RunState.FAILED and run.failed_step == step_id:
        failed = _count(items, StepState.FAILED) + _count(items, StepState.LOST)
        return StepView(StepState.FAILED, f"failed · {failed}/{len(items)} items"
                        if len(items) > 1 else "failed")
    # An attempt cancelled before it started (its run ended first) never ran.
    launched = [r for r in items if r.started_at is not None or r.state != StepState.CANCELLED]
    if not launched:
        if (progress or {}).get("state") == StepProgress.DONE:  # a fan-out over nothing
            return StepView(StepState.SUCCEEDED, "succeeded · no items")
        return StepView(NOT_RUN, NOT_RUN) if ended else StepView(WAITING, WAITING)
    states = {StepState(r.state) for r in items}
    if states & set(_OPEN):
        # The run ended with items still out: those waiting will never run; a running
        # one finishes, and is recorded, on its own.
        if ended and StepState.RUNNING not in states:
            return StepView(StepState.CANCELLED, "cancelled")
        state = next((s for s in (StepState.RUNNING, StepState.RETRYING, StepState.WAITING)
                      if s in states), StepState.PENDING)
        said = _waiting_for(asks) if state == StepState.WAITING else str(state)
        done = sum(1 for r in items if StepState(r.state).final)
        return StepView(state, f"{said} · {done}/{len(items)} done" if len(items) > 1
                        else said, asking=bool(asks) and state == StepState.WAITING)
    return _settled(items)


def _settled(items: Sequence[StepRun]) -> StepView:
    """Every item is final and the run did not fail here."""
    n = len(items)
    ok = _count(items, StepState.SUCCEEDED)
    skipped = _count(items, StepState.SKIPPED)
    failed = _count(items, StepState.FAILED)  # on_failure: continue kept going
    cancelled = _count(items, StepState.CANCELLED)
    if ok == n:
        where = items[0].daemon if n == 1 and items[0].daemon else None
        cached = n == 1 and items[0].cache_hit
        return StepView(StepState.SUCCEEDED, "succeeded" + (" (cached)" if cached else "")
                        + (f" · {where}" if where else ""))
    if not ok:
        worst: str = StepState.FAILED if failed else (StepState.SKIPPED if skipped
                                                      else StepState.CANCELLED)
        # An approval turned down under on_failure continue: the run went on, and the
        # step was rejected, not broken.
        if failed and all(r.error_kind == REJECTED_KIND for r in items
                          if r.state == StepState.FAILED):
            worst = REJECTED
        return StepView(worst, str(worst) + (f" · {n} items" if n > 1 else ""))
    parts = [f"{k}/{n} {label}" for k, label in ((skipped, "skipped"), (failed, "failed"),
                                                 (cancelled, "cancelled")) if k]
    return StepView(StepState.SUCCEEDED, "succeeded · " + ", ".join(parts))
