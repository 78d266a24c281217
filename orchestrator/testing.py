"""`skillq test`: a skill's benchmarks.json cases run through the real queues.

Every case of a skill starts at once (source ``test_window``, triggered_by
``test:<id>``) and they are awaited together. Each run is judged against the case's
``expected``; one ``test_results`` row per case records the verdict, beside the run
records themselves. ``run_tests`` is what `skillq publish` calls.

What a case checks (docs/testing.md):
- ``success``: the run succeeded (true) or failed (false);
- ``error_contains``: the run's error includes this text (a failing case);
- ``output_contains``: each text appears in the outputs (in a string value, or in the
  outputs' JSON text for numbers and keys);
- ``max_duration_ms``: a leaf's script time (its final attempt, as benchmarks.json
  records it), or an orchestrator's wall time from start to end;
- any other key: that output equals the value exactly (JSON equality; true is not 1).
A case whose inputs are refused before anything runs (a deliberately wrong input) has no
run: it passes when it expects failure and the refusal matches ``error_contains``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from orchestrator.connect import Connection
from orchestrator.launch import files_current, run_progress, start_run
from shared.case_judge import REFUSED, CaseResult, Outcome, judge
from shared.db.models import PipelineRun, StepRun
from shared.db.notes_models import TestResult
from shared.db.session import transaction
from shared.errors import NoWorker, SkillqError, TestCaseError
from shared.inputs import local_paths
from shared.skill import Skill
from shared.skillfiles import RunSource, TestCase
from shared.states import RunState
from shared.store import unpack
from shared.vault import Vault

POLL_S = 0.25
START_THREADS = 8  # starting a run waits on a worker round trip: start cases side by side


@dataclass(frozen=True, slots=True)
class TestReport:
    __test__ = False  # not a pytest class

    skill: str
    version: int
    cases: tuple[CaseResult, ...]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.cases)

    @property
    def failed(self) -> tuple[CaseResult, ...]:
        return tuple(c for c in self.cases if not c.passed)


ProgressFn = Callable[[int, int], None]  # (finished cases, all cases)


# -- running ---------------------------------------------------------------------------------

def cases_of(skill: Skill, test_id: str | None = None) -> tuple[TestCase, ...]:
    """The cases to run; TestCaseError for an unknown id or a skill without cases."""
    tests = skill.benchmarks.tests if skill.benchmarks is not None else ()
    if not tests:
        raise TestCaseError(f"{skill.name} has no test cases: add them to "
                            f"{skill.folder / 'benchmarks.json'} under \"tests\"")
    if test_id is None:
        return tests
    chosen = tuple(t for t in tests if t.id == test_id)
    if not chosen:
        known = ", ".join(t.id for t in tests)
        raise TestCaseError(f"{skill.name} has no test case '{test_id}' (it has: {known})")
    return chosen


@dataclass(frozen=True, slots=True)
class _Started:
    skill: Skill
    case: TestCase
    run_id: str | None
    refused: str | None = None


def _start(conn: Connection, vault: Vault, skill: Skill, case: TestCase) -> _Started:
    try:  # a case's folder or file paths are relative to the skill's own folder
        given = local_paths(skill.manifest, case.inputs, skill.folder)
        run_id = start_run(conn, vault, skill, given, source=RunSource.TEST_WINDOW,
                           triggered_by=f"test:{case.id}")
    except NoWorker:
        raise  # the machine, not the skill: no verdict can be given
    except SkillqError as exc:  # inputs refused, skill invalid or disabled: nothing ran
        return _Started(skill, case, None, str(exc))
    return _Started(skill, case, run_id)


def _duration_ms(session: Session, run: PipelineRun) -> float | None:
    if run.plan.get("outputs_of"):  # a leaf: its script's time, as benchmarks.json has it
        ms = session.scalar(select(StepRun.duration_ms).where(StepRun.run_id == run.id)
                            .order_by(StepRun.attempt.desc()).limit(1))
        return float(ms) if ms is not None else None
    if run.started_at is None or run.finished_at is None:
        return None
    return (run.finished_at - run.started_at).total_seconds() * 1000


def outcome_of(conn: Connection, run: PipelineRun) -> Outcome:
    """An ended run as a case's judge reads it."""
    with transaction(conn.endpoints.database_url) as session:
        outputs = unpack(session, run.outputs) if run.outputs is not None else None
        duration = _duration_ms(session, run)
    return Outcome(state=run.state, outputs=outputs, error=run.error, duration_ms=duration,
                   run_id=run.id)


def _wait_all(conn: Connection, started: Sequence[_Started], on_progress: ProgressFn | None,
              timeout_s: float | None) -> dict[str, PipelineRun]:
    pending = {s.run_id for s in started if s.run_id is not None}
    finished: dict[str, PipelineRun] = {}
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    total = len(started)
    refused = total - len(pending)
    while True:
        for run_id in sorted(pending):
            run, _ = run_progress(conn, run_id)
            if RunState(run.state).terminal:
                finished[run_id] = run
        pending -= finished.keys()
        if on_progress is not None:
            on_progress(refused + len(finished), total)
        if not pending:
            return finished
        if deadline is not None and time.monotonic() > deadline:
            raise SkillqError(f"test runs still running after {timeout_s:g} s: "
                              + ", ".join(sorted(pending)))
        time.sleep(POLL_S)


def record_results(session: Session, reports: Sequence[TestReport]) -> None:
    """One test_results row per case (the dashboard's "last result" of each case)."""
    session.add_all(TestResult(
        skill=r.skill, version=r.version, test_id=c.test_id, run_id=c.outcome.run_id,
        passed=c.passed, problems=list(c.problems), duration_ms=c.outcome.duration_ms)
        for r in reports for c in r.cases)


def run_suites(conn: Connection, vault: Vault, suites: Sequence[tuple[Skill,
               Sequence[TestCase]]], *, on_progress: ProgressFn | None = None,
               timeout_s: float | None = None) -> list[TestReport]:
    """Start every case of every suite at once, wait for all, judge and record them."""
    jobs = [(skill, case) for skill, cases in suites for case in cases]
    with ThreadPoolExecutor(max_workers=max(1, min(START_THREADS, len(jobs)))) as pool:
        started = list(pool.map(lambda job: _start(conn, vault, *job), jobs))
    runs = _wait_all(conn, started, on_progress, timeout_s)
    by_skill: dict[str, list[CaseResult]] = {}
    for s in started:
        outcome = Outcome(REFUSED, error=s.refused) if s.run_id is None \
            else outcome_of(conn, runs[s.run_id])
        by_skill.setdefault(s.skill.name, []).append(judge(s.case, outcome, s.skill.name))
    reports = [TestReport(skill.name, skill.manifest.version,
                          tuple(by_skill.get(skill.name, ()))) for skill, _ in suites]
    with transaction(conn.endpoints.database_url) as session:
        record_results(session, reports)
    files_current(conn, runs.values())  # polled, not heard: their files' notices unheard
    return reports


def run_tests(conn: Connection, vault: Vault, skill: Skill, test_id: str | None = None, *,
              on_progress: ProgressFn | None = None,
              timeout_s: float | None = None) -> TestReport:
    """Run ``skill``'s test cases (or the one named ``test_id``) through the queues.

    Raises TestCaseError (no cases / unknown id) and NoWorker (nothing serves a queue
    the runs need); a failing case is a verdict in the report, not an exception.
    """
    return run_suites(conn, vault, [(skill, cases_of(skill, test_id))],
                      on_progress=on_progress, timeout_s=timeout_s)[0]


def last_results(session: Session, skill: str) -> Mapping[str, TestResult]:
    """Each test case's newest result, by test id."""
    newest = (select(TestResult.test_id, func.max(TestResult.id).label("id"))
              .where(TestResult.skill == skill).group_by(TestResult.test_id).subquery())
    rows = session.scalars(select(TestResult).join(newest, TestResult.id == newest.c.id))
    return {r.test_id: r for r in rows}
