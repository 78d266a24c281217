"""What the dashboard and the CLI say about runs, checked against the records they come
from: a real dashboard process in real Chromium, real workers, Redis and PostgreSQL
(tests/integration/conftest.py, test_dashboard.py for the dashboard helpers).

The vault is tests/integration/vaults/records: ``hail`` (a leaf that refuses Bob) and two
orchestrators fanning out over it, ``hail-all`` (abort on failure, then a step after it)
and ``hail-soft`` (skip failures). ``history`` makes every run first, through the CLI.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import VAULTS, Stack, copy_vault
from playwright.sync_api import Page, expect
from sqlalchemy import select, text
from test_dashboard import Served, serve, shot

from shared.db.notes_models import ImprovementNote

FINAL = ("succeeded", "failed", "skipped")  # a settled attempt: one run of a leaf


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_vault(VAULTS / "records", tmp_path_factory.mktemp("records") / "vault")


@pytest.fixture(scope="module")
def dashboard(stack: Stack, vault: Path) -> Iterator[Served]:
    stack.ensure_standard_workers()
    served = serve(stack, vault)
    yield served
    served.stop()


def cli(stack: Stack, vault: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return stack.cli(*args, "--vault", str(vault), cwd=vault.parent)


def run(stack: Stack, vault: Path, skill: str, key: str, value: object) -> str:
    """`skillq run SKILL --input key=value`, waited for; the run's id."""
    before = stack.run_ids(skill)
    shown = value if isinstance(value, str) else json.dumps(value)
    proc = cli(stack, vault, "run", skill, "--input", f"{key}={shown}")
    run_id = stack.new_run(skill, before)
    assert proc.returncode in (0, 1), proc.stderr
    stack.wait_run(run_id)
    return run_id


def notes_of(stack: Stack, step_id: str) -> list[ImprovementNote]:
    with stack.db() as session:
        found = list(session.scalars(select(ImprovementNote).where(
            ImprovementNote.skill == "hail", ImprovementNote.step_id == step_id)
            .order_by(ImprovementNote.id)))
        session.expunge_all()
        return found


@dataclass(frozen=True)
class History:
    resolved: str  # failed at `each`; its note was resolved before the next failure
    counted: str  # failed at `each` again: a new note...
    latest: str  # ...which this third failure counted on (the note's run id is this one)
    soft: str  # hail-soft: Bob skipped, the rest succeeded
    direct: str  # hail run directly
    tested: str  # `skillq test hail`'s case that is meant to fail
    first_note: int
    second_note: int


@pytest.fixture(scope="module")
def history(stack: Stack, vault: Path, dashboard: Served) -> History:
    resolved = run(stack, vault, "hail-all", "names", ["Bob", "Ada"])
    [first] = notes_of(stack, "each")
    done = stack.cli("notes", "resolve", str(first.id), cwd=vault.parent)
    assert done.returncode == 0, done.stderr
    counted = run(stack, vault, "hail-all", "names", ["Bob", "Ada"])
    latest = run(stack, vault, "hail-all", "names", ["Bob"])
    soft = run(stack, vault, "hail-soft", "names", ["Bob", "Ada"])
    direct = run(stack, vault, "hail", "name", "Ada")
    before = stack.run_ids("hail")
    tests = cli(stack, vault, "test", "hail")
    assert tests.returncode == 0, tests.stdout + tests.stderr  # both cases met expectations
    tested = next(r for r in stack.runs_of("hail")
                  if r.id not in before and r.triggered_by == "test:refuses-bob")
    assert tested.state == "failed" and tested.source == "test_window"
    second = [n for n in notes_of(stack, "each") if n.id != first.id]
    assert [(n.count, n.run_id) for n in second] == [(2, latest)]
    return History(resolved, counted, latest, soft, direct, tested.id, first.id,
                   second[0].id)


def node(page: Page, step: str) -> tuple[str, str]:
    """A step's node in the run graph: its state class and its state text."""
    found = page.locator(f"#graph svg g.node[data-key='{step}']")
    expect(found).to_have_count(1)
    css = [c for c in (found.get_attribute("class") or "").split() if c.startswith("state-")]
    return " ".join(css), found.locator("text.node-detail").text_content() or ""


def test_run_page_draws_each_step_from_its_items(stack: Stack, dashboard: Served,
                                                 history: History, page: Page) -> None:
    items = [s.state for s in stack.steps(history.resolved, "each")]
    assert items == ["failed", "succeeded"]  # item 0 (Bob) failed, item 1 (Ada) did not
    assert stack.run(history.resolved).failed_step == "each"
    assert stack.steps(history.resolved, "after") == []  # never started
    page.goto(f"{dashboard.url}/runs/{history.resolved}")
    shot(page, "records-run-failed-fan-out")
    assert [node(page, "each"), node(page, "after")] == [
        ("state-failed", "failed · 1/2 items"), ("state-not-run", "not run")]

    assert [s.state for s in stack.steps(history.soft, "soft")] == ["skipped", "succeeded"]
    page.goto(f"{dashboard.url}/runs/{history.soft}")
    shot(page, "records-run-skipped-item")
    assert node(page, "soft") == ("state-succeeded", "succeeded · 1/2 skipped")
    expect(page.locator("tr.step-row[data-step='soft'][data-state='skipped']")).to_have_count(1)
    assert node(page, "after")[0] == "state-succeeded"


def test_run_page_shows_only_the_notes_its_failures_counted_on(
        stack: Stack, dashboard: Served, history: History, page: Page) -> None:
    mine = {history.resolved: history.first_note, history.counted: history.second_note,
            history.latest: history.second_note}
    for run_id, note_id in mine.items():
        page.goto(f"{dashboard.url}/runs/{run_id}")
        notes = page.locator(".failed-attempt .note")
        expect(notes).to_have_count(1)
        expect(notes).to_have_attribute("data-note", str(note_id))
    shot(page, "records-run-own-note")
    # The case meant to fail is a test run: it leaves no note, and shows none.
    page.goto(f"{dashboard.url}/runs/{history.tested}")
    expect(page.locator(".failed-attempt .note")).to_have_count(0)
    expect(page.locator(".failed-attempt")).to_contain_text("only production runs leave them")


def leaf_counts(stack: Stack) -> tuple[int, int, int]:
    """hail's settled attempts (as a step and run directly), and the production ones:
    all of them, production ones, production successes."""
    with stack.db() as session:
        row = session.execute(text(
            "SELECT count(*), count(*) FILTER (WHERE source = 'production'), count(*) "
            "FILTER (WHERE source = 'production' AND state = 'succeeded') FROM step_runs "
            "WHERE skill = 'hail' AND state = ANY(:final)"), {"final": list(FINAL)}).one()
        return int(row[0]), int(row[1]), int(row[2])


def test_a_leaf_counts_its_runs_as_a_step(stack: Stack, vault: Path, dashboard: Served,
                                          history: History, page: Page) -> None:
    runs, _, _ = leaf_counts(stack)
    # 5 attempts in hail-all's three runs, 3 in hail-soft's, 1 direct, 2 test cases.
    assert runs == 11
    direct_runs = [r for r in stack.runs_of("hail") if r.parent_step_run_id is None]
    assert len(direct_runs) == 3  # the direct run and the two test cases: counted once each

    page.goto(dashboard.url + "/")
    shot(page, "records-skills")
    expect(page.locator("tr.skill-row[data-skill=hail] td.runs")).to_have_text(str(runs))
    expect(page.locator("tr.skill-row[data-skill=hail-all] td.runs")).to_have_text("3")
    expect(page.locator("tr.skill-row[data-skill=hail-soft] td.runs")).to_have_text("1")
    page.goto(dashboard.url + "/skills/hail")
    shot(page, "records-skill-hail")
    expect(page.locator("#total-runs")).to_have_text(str(runs))
    bench = json.loads((vault / "hail" / "benchmarks.json").read_text())
    assert bench["aggregates"]["total_runs"] == runs
    shown = cli(stack, vault, "show", "hail")
    assert shown.returncode == 0, shown.stderr
    assert f"runs: {runs} · " in shown.stdout, shown.stdout


def bench_line(stack: Stack, vault: Path, *args: str) -> list[str]:
    """`skillq bench hail ...`'s row of v1, its cells (piped, it prints tab-separated)."""
    proc = cli(stack, vault, "bench", "hail", *args)
    assert proc.returncode == 0, proc.stderr
    return next(ln.split("\t") for ln in proc.stdout.splitlines() if ln.startswith("v1\t"))


def test_success_rates_are_over_production_runs(stack: Stack, vault: Path,
                                                dashboard: Served, history: History,
                                                page: Page) -> None:
    runs, production, succeeded = leaf_counts(stack)
    assert (runs, production, succeeded) == (11, 9, 5)
    rate = f"{succeeded / production * 100:.0f}%"
    # What counting the test case meant to fail as a failed run would give instead.
    assert rate not in (f"{6 / 11 * 100:.0f}%", f"{2 / 3 * 100:.0f}%")

    # benchmarks.json keeps the seed's aggregates; its success rate is production's.
    bench = json.loads((vault / "hail" / "benchmarks.json").read_text())
    assert bench["aggregates"]["success_rate"] == round(succeeded / production, 4)
    shown = cli(stack, vault, "show", "hail")
    assert f"runs: {runs} · success {rate}" in shown.stdout, shown.stdout
    line = bench_line(stack, vault)
    assert str(runs) in line and rate in line, line
    # The test cases by their verdicts: both met their expectation.
    assert "100%" in bench_line(stack, vault, "--source", "test_window")

    page.goto(dashboard.url + "/")
    expect(page.locator("tr.skill-row[data-skill=hail] td.success")).to_have_text(rate)
    expect(page.locator("tr.skill-row[data-skill=hail-all] td.success")).to_have_text("0%")
    expect(page.locator("tr.skill-row[data-skill=hail-soft] td.success")).to_have_text("100%")
    page.goto(dashboard.url + "/skills/hail")
    expect(page.locator("#success-rate")).to_have_text(rate)
