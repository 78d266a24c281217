"""A skill builder's tools beyond its files (workers/agent/draft_tools.py): validate the
draft with skillq's own rules (``check_draft``), and run its test cases through the
queues (``run_tests``).

``run_tests`` starts one run per case of the draft's benchmarks.json, source ``build``,
from the build's own vault of drafts (workers/build/drafts.py), and defers like
execute_skill: the step holds no worker slot while the cases run, and on its next
attempt the call finds them ended and answers with each verdict (shared/case_judge.py).
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
from shared.case_judge import REFUSED, Outcome, judge
from shared.db.models import PipelineRun
from shared.db.session import transaction
from shared.errors import SkillqError
from shared.folderhash import hash_folder
from shared.skill import Skill
from shared.skillfiles import RunSource
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
        vault = load_vault(self.folder.parent)
        with transaction(self.database_url) as session:
            outcomes = {c.id: self._case(session, vault, skill, c, f"{call}/{c.id}")
                        for c in cases}
        running = [o.run_id for o in outcomes.values()
                   if o.run_id and o.state not in _ENDED]
        if running:
            self.waiting.extend(r for r in running if r)
            raise CallDeferred(metadata={"run_ids": running})
        verdicts = [judge(c, outcomes[c.id], skill.name) for c in cases]
        report = [{"test": v.test_id, "passed": v.passed, "problems": list(v.problems),
                   "run_id": v.outcome.run_id} for v in verdicts]
        with transaction(self.database_url) as session:
            build = builds.get(session, self.build_id, for_update=True)
            if build is not None:
                builds.record_tests(build, self.folder.name, hash_folder(self.folder), report)
        return {"passed": all(v.passed for v in verdicts), "cases": report}

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
                             "and, for a failure, why."),
        ]


_ENDED = frozenset({RunState.SUCCEEDED.value, RunState.FAILED.value, RunState.CANCELLED.value,
                    RunState.REJECTED.value, REFUSED})
