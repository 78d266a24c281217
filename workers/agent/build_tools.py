"""A skill builder's tools beyond its files (workers/agent/draft_tools.py): validate the
draft with skillq's own rules (``check_draft``), and run its test cases through the
queues (``run_tests``).

``run_tests`` starts one run per case of the draft's benchmarks.json, source ``build``,
from the build's own vault of drafts (workers/build/drafts.py), and defers like
execute_skill: the step holds no worker slot while the cases run, and on its next
attempt the call finds them ended and answers with each verdict (shared/case_judge.py).
An agent skill's case is its eval: it runs ``eval_runs`` times (SKILLQ_BUILD_EVAL_RUNS),
all started together, and passes only when every run passed (pass^N = 1); a script
skill's case runs once.
Every verdict is recorded with the folder's hash as it was tested, and the build decides
on these what is built (workers/build/outcomes.py): a draft is built only when its last
run of its cases passed and it has not changed since.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_ai import RunContext, Tool
from pydantic_ai.exceptions import CallDeferred
from sqlalchemy import select
from sqlalchemy.orm import Session

from lifecycle import builds
from lifecycle.submit import create_run
from shared.attempt_id import AttemptId
from shared.case_judge import REFUSED, CaseResult, Outcome, judge
from shared.db.models import PipelineRun
from shared.db.session import transaction
from shared.errors import SkillqError
from shared.folderhash import hash_folder
from shared.manifest import Approach
from shared.skill import Skill
from shared.skillfiles import RunSource, TestCase
from shared.states import RunState
from shared.store import unpack
from shared.vault import load_vault

NO_ARGS = {"type": "object", "additionalProperties": False, "properties": {}}


@dataclass
class DraftTests:
    database_url: str
    row_id: str  # the builder's attempt
    build_id: str
    folder: Path  # the draft: <build root>/<skill>
    daemon: str | None = None  # the build's --daemon: its cases run there too
    eval_runs: int = 1  # an agent skill's runs of each case, every one to pass
    waiting: list[str] = field(default_factory=list)

    def _draft(self) -> tuple[Skill | None, list[str]]:
        vault = load_vault(self.folder.parent)
        skill = next((s for s in vault.skills.values() if s.folder == self.folder), None)
        return skill, [f"{p.field}: {p.message}" if p.field else p.message
                       for p in vault.problems_in(self.folder)]

    def check_draft(self) -> str:
        skill, problems = self._draft()
        if problems or skill is None:
            return "error: the draft does not validate:\n- " + "\n- ".join(
                problems or ["SKILL.md is missing or unreadable"])
        cases = len(skill.benchmarks.tests) if skill.benchmarks else 0
        return f"valid: {skill.name} v{skill.manifest.version}, {cases} test case(s)"

    def run_tests(self, rc: RunContext[None]) -> dict[str, Any]:
        skill, problems = self._draft()
        if problems or skill is None:
            return {"error": "the draft does not validate; fix it first: "
                    + "; ".join(problems or ["SKILL.md is missing or unreadable"])}
        cases = skill.benchmarks.tests if skill.benchmarks else ()
        if not cases:
            return {"error": "benchmarks.json has no test cases: add the plan's under "
                    "\"tests\""}
        call = f"{AttemptId.parse(self.row_id).calls_prefix}{rc.tool_call_id}"
        runs = self.eval_runs if _is_agent(skill) else 1
        vault = load_vault(self.folder.parent)
        with transaction(self.database_url) as session:
            outcomes = {c.id: [self._case(session, vault, skill, c,
                                          f"{call}/{c.id}" + (f"/{i}" if i else ""))
                               for i in range(runs)] for c in cases}
        running = [o.run_id for found in outcomes.values() for o in found
                   if o.run_id and o.state not in _ENDED]
        if running:
            self.waiting.extend(r for r in running if r)
            raise CallDeferred(metadata={"run_ids": running})
        report = [_case_report(c, [judge(c, o, skill.name) for o in outcomes[c.id]])
                  for c in cases]
        with transaction(self.database_url) as session:
            build = builds.get(session, self.build_id, for_update=True)
            if build is not None:
                builds.record_tests(build, self.folder.name, hash_folder(self.folder), report)
        return {"passed": all(c["passed"] for c in report), "cases": report}

    def _case(self, session: Session, vault: Any, skill: Skill, case: Any, key: str
              ) -> Outcome:
        run = session.scalar(select(PipelineRun).where(PipelineRun.agent_call == key))
        if run is None:
            try:
                run_id = create_run(session, vault, skill, dict(case.inputs),
                                    source=RunSource.BUILD.value,
                                    triggered_by=f"test:{case.id}", daemon=self.daemon,
                                    parent_step_run_id=self.row_id, agent_call=key)
            except SkillqError as exc:  # its inputs refused: judged as `skillq test` does
                return Outcome(REFUSED, error=str(exc))
            return Outcome(RunState.PENDING.value, run_id=run_id)
        took = (run.finished_at - run.started_at).total_seconds() * 1000 \
            if run.finished_at and run.started_at else None
        return Outcome(run.state, outputs=unpack(session, run.outputs), error=run.error,
                       duration_ms=took, run_id=run.id)

    def tools(self) -> list[Tool[None]]:
        return [
            Tool.from_schema(self.check_draft, name="check_draft", json_schema=NO_ARGS,
                             description="Validate the draft folder with skillq's own "
                             "rules; the problems found, each naming its file and field."),
            Tool.from_schema(self.run_tests, name="run_tests", json_schema=NO_ARGS,
                             takes_ctx=True,
                             description="Run every test case of the draft's "
                             "benchmarks.json through skillq's queues; each case's verdict "
                             "and, for a failure, why. An agent skill's case is its eval: "
                             f"it runs {self.eval_runs} time(s) and passes only when every "
                             "run passes."),
        ]


def _is_agent(skill: Skill) -> bool:
    """An agent skill (instructions a model follows): its cases are its eval."""
    return skill.manifest.kind == "instructions" and \
        skill.manifest.effective_approach is Approach.AGENT


def _case_report(case: TestCase, verdicts: list[CaseResult]) -> dict[str, Any]:
    """One case's verdict over its runs: passed only when every run passed (pass^N = 1),
    with the problems of the runs that failed, each once."""
    failed = [v for v in verdicts if not v.passed]
    report: dict[str, Any] = {
        "test": case.id, "passed": not failed,
        "problems": list(dict.fromkeys(p for v in failed for p in v.problems)),
        "run_id": (failed or verdicts)[0].outcome.run_id}
    if len(verdicts) > 1:
        passed = len(verdicts) - len(failed)
        report.update(runs=len(verdicts), runs_passed=passed,
                      run_ids=[v.outcome.run_id for v in verdicts],
                      eval=f"case {case.id}: {passed} of {len(verdicts)} runs passed" +
                      ("; an agent skill's case must pass every run of its eval"
                       if failed else ""))
    return report


_ENDED = frozenset({RunState.SUCCEEDED.value, RunState.FAILED.value, RunState.CANCELLED.value,
                    RunState.REJECTED.value, REFUSED})
