"""A run page's step states, derived from the attempts' records (no services: the rows
are built in memory; tests/integration/test_run_records.py checks the page itself)."""

from __future__ import annotations

from datetime import UTC, datetime

from orchestrator.dashboard.step_states import newest_attempts, step_view
from shared.db.models import PipelineRun, StepRun

WHEN = datetime(2026, 11, 30, 7, 0, tzinfo=UTC)


def run(state: str, failed_step: str | None = None) -> PipelineRun:
    return PipelineRun(id="run-1", state=state, failed_step=failed_step)


def attempt(step: str, item: int, number: int, state: str, started: bool = True) -> StepRun:
    return StepRun(id=f"run-1/{step}/{item}/{number}", run_id="run-1", step_id=step,
                   item_index=item, attempt=number, state=state,
                   started_at=WHEN if started else None, daemon=None, cache_hit=False)


def view(r: PipelineRun, step: str, rows: list[StepRun],
         progress: dict[str, object] | None = None) -> tuple[str, str]:
    found = step_view(r, step, newest_attempts(rows).get(step, []), progress)
    return found.css, found.detail


def test_the_newest_attempt_of_each_item_counts() -> None:
    rows = [attempt("s", 0, 1, "retrying"), attempt("s", 0, 2, "succeeded"),
            attempt("s", 1, 1, "succeeded")]
    assert [r.attempt for r in newest_attempts(rows)["s"]] == [2, 1]
    assert view(run("succeeded"), "s", rows) == ("state-succeeded", "succeeded")


def test_the_step_a_run_failed_at_is_failed_whatever_its_last_item_did() -> None:
    rows = [attempt("s", 0, 1, "failed"), attempt("s", 1, 1, "succeeded")]
    assert view(run("failed", "s"), "s", rows) == ("state-failed", "failed · 1/2 items")


def test_a_step_that_never_started_waits_or_was_not_run() -> None:
    assert view(run("running"), "later", []) == ("state-waiting", "waiting")
    assert view(run("failed", "s"), "later", []) == ("state-not-run", "not run")
    never = [attempt("later", -1, 1, "cancelled", started=False)]
    assert view(run("cancelled"), "later", never) == ("state-not-run", "not run")
    assert view(run("succeeded"), "empty", [], {"state": "done", "items": 0}) == (
        "state-succeeded", "succeeded · no items")


def test_items_left_out_when_the_run_ended_are_cancelled_unless_still_running() -> None:
    queued = [attempt("s", 0, 1, "succeeded"), attempt("s", 1, 1, "pending", started=False)]
    assert view(run("failed", "other"), "s", queued) == ("state-cancelled", "cancelled")
    going = [attempt("s", 0, 1, "succeeded"), attempt("s", 1, 1, "running")]
    assert view(run("failed", "other"), "s", going) == ("state-running", "running · 1/2 done")
    assert view(run("running"), "s", queued) == ("state-pending", "pending · 1/2 done")


def test_skipped_and_continued_items_are_named() -> None:
    rows = [attempt("s", 0, 1, "skipped"), attempt("s", 1, 1, "succeeded"),
            attempt("s", 2, 1, "failed")]
    assert view(run("succeeded"), "s", rows) == (
        "state-succeeded", "succeeded · 1/3 skipped, 1/3 failed")
    assert view(run("succeeded"), "s", [attempt("s", 0, 1, "skipped")]) == (
        "state-skipped", "skipped")


def test_a_waiting_item_says_what_it_waits_for() -> None:
    waiting = [attempt("s", -1, 1, "waiting")]
    assert view(run("running"), "s", waiting) == ("state-waiting", "waiting for its runs")
    found = step_view(run("running"), "s", waiting, None, {"approval"})
    assert (found.css, found.detail) == ("state-waiting asking", "waiting for approval")
    fan = [attempt("s", 0, 1, "succeeded"), attempt("s", 1, 1, "waiting")]
    found = step_view(run("running"), "s", newest_attempts(fan)["s"], None, {"question"})
    assert (found.css, found.detail) == ("state-waiting asking",
                                         "waiting for an answer · 1/2 done")
    assert view(run("cancelled"), "s", waiting) == ("state-cancelled", "cancelled")


def test_a_turned_down_approval_is_rejected() -> None:
    turned_down = attempt("review", -1, 1, "failed")
    turned_down.error_kind = "rejected"
    assert view(run("rejected", "review"), "review", [turned_down]) == (
        "state-rejected", "rejected")
    # on_failure continue: the run went on past it
    assert view(run("succeeded"), "review", [turned_down]) == ("state-rejected", "rejected")
    broken = attempt("s", -1, 1, "failed")
    assert view(run("succeeded"), "s", [broken]) == ("state-failed", "failed")
