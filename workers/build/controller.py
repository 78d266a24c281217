"""A skill build's step (`skillq build`, shared/builtin/skillq-build): skillq's own, with
no model of its own, on the control queue. Each attempt reads where the build is
(lifecycle/builds.py) and takes it as far as it can go now, then waits, holding no worker
slot, for what it started:

    planning  the planner agent runs (skillq-planner), writing the plan through
              update_plan; a plan that passed its checks is proposed
    proposed  an approval wait shows plan.md: approved, it builds; revised (`skillq plan
              revise`), the planner runs again with the person's words; rejected, it ends
    building  one builder agent (skillq-builder) per new sub-skill, wave by wave: the
              independent ones at once, a dependent one once those it depends on are
              settled (outcomes.py says which are built); then the orchestrator is compiled
              from the plan (compile.py)

The runs it starts are its own execute_skill-like calls (``agent_call`` named from its
step item), so each ends by waking it, and cancelling the build cancels them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from lifecycle import builds, waits
from lifecycle.context import WorkerContext
from lifecycle.submit import create_run
from shared.attempt_id import AttemptId
from shared.build_compile import plan_md
from shared.build_plan import BuildPlan
from shared.builtin import BUILD, BUILDER, PLANNER, builtin_skill
from shared.db.build_models import Build
from shared.db.models import PipelineRun
from shared.db.session import transaction
from shared.db.wait_models import APPROVAL as APPROVAL_WAIT
from shared.errors import SkillqError
from shared.manifest import BUILD_SKILL, Manifest
from shared.skill import Skill
from shared.states import REJECTED_KIND, BuildStage, RunState, StepState, WaitState
from shared.vault import Vault, open_vault
from workers.build import outcomes
from workers.build.briefs import builder_brief, planner_brief
from workers.build.budget import BudgetSpent, budget_left
from workers.build.compile import finish
from workers.step_types import Claim, Result, WaitingOn


class BuildExecutor:
    kind = "build"

    def handles(self, manifest: Manifest) -> bool:
        return manifest.name == BUILD_SKILL

    def run(self, ctx: WorkerContext, job: Claim, skill: Skill) -> Result:
        vault = open_vault(job.vault, ttl_s=ctx.settings.discovery_ttl_s)
        with transaction(ctx.database_url) as session:
            # locked: a builder's test verdicts are written to the same row
            given = job.inputs  # as the client that started it records them: either may be first
            run = session.get(PipelineRun, job.run_id)
            build = builds.open_build(session, job.run_id,
                                      vault=run.vault if run is not None else str(job.vault),
                                      task=str(given.get("task") or ""),
                                      note_id=int(given.get("note_id") or 0) or None,
                                      improves=str(given.get("improves") or "") or None,
                                      daemon=str(given.get("daemon") or "") or None)
            return _Attempt(ctx, session, job, vault, build).advance()

    def answer_from_cache(self, ctx: WorkerContext, job: Claim, skill: Skill
                          ) -> Result | None:
        return None  # a build is never cached


@dataclass
class _Attempt:
    ctx: WorkerContext
    session: Session
    job: Claim
    vault: Vault
    build: Build

    @property
    def prefix(self) -> str:
        return AttemptId.parse(self.job.row_id).calls_prefix

    def advance(self) -> Result:
        try:
            return self._advance()
        except BudgetSpent as exc:
            return self._fail(str(exc), "budget")
        except SkillqError as exc:  # a stage refused before it started (its model, say)
            return self._fail(str(exc))

    def _advance(self) -> Result:
        while True:
            stage = BuildStage(self.build.stage)
            if stage is BuildStage.PLANNING:
                result = self._planning()
            elif stage is BuildStage.PROPOSED:
                result = self._proposed()
            elif stage is BuildStage.BUILDING:
                return self._building()
            else:
                return _ended(self.build)
            if result is not None:
                return result

    def _fail(self, error: str, kind: str = "build_failed") -> Result:
        builds.move(self.build, BuildStage.FAILED, error=error)
        return Result(StepState.FAILED, error=error, error_kind=kind)

    def _call(self, key: str, skill: str, inputs: dict[str, Any], share: int = 1
              ) -> PipelineRun | str:
        """The run ``key`` names, ended; else the id of the run to wait for (started now,
        or by an earlier attempt, which this one takes over). ``share``: how many runs
        start beside it, splitting what is left of the budget."""
        run = self.session.scalar(select(PipelineRun).where(PipelineRun.agent_call == key))
        if run is None:
            left = budget_left(self.session, self.build.run_id, self.job.inputs)
            found = builtin_skill(skill)
            assert found is not None  # shipped with the package
            model = str(self.job.inputs.get("model") or "") or None
            # --daemon: each stage runs on the build's daemon, as the build itself does
            return create_run(self.session, self.vault, found, inputs, source=self.job.source,
                              triggered_by=BUILD, parent_step_run_id=self.job.row_id,
                              workdir=self.job.workdir, agent_call=key, model=model,
                              daemon=self.build.daemon,
                              budget_usd=None if left is None else left / share)
        if not RunState(run.state).terminal:
            self.session.execute(update(PipelineRun).where(PipelineRun.id == run.id)
                                 .values(parent_step_run_id=self.job.row_id))
            return str(run.id)
        return run

    def _planning(self) -> Result | None:
        text = planner_brief(self.build, str(self.job.inputs.get("note") or ""))
        run = self._call(f"{self.prefix}plan-{self.build.round}", PLANNER,
                         {"build": self.build.run_id, "text": text})
        if isinstance(run, str):
            return Result(StepState.WAITING, then=WaitingOn(run_ids=(run,)))
        if run.state != RunState.SUCCEEDED:
            return self._fail(f"the planner {run.state}: {run.error or 'no error recorded'}")
        if self.build.plan is None or self.build.problems:
            found = "; ".join(self.build.problems) or "it never called update_plan"
            return self._fail(f"the planner ended without a plan that passed its checks: "
                              f"{found}")
        builds.move(self.build, BuildStage.PROPOSED)
        return None

    def _proposed(self) -> Result | None:
        plan = builds.plan_of(self.build)
        assert plan is not None
        asked = waits.Asked(
            kind=APPROVAL_WAIT, shown={"plan": plan_md(plan)},
            prompt=f"Build {plan.name} as planned? Approve to build it, or send it back "
            f"with `skillq plan revise {self.build.run_id} \"...\"`.")
        wait = waits.ask(self.session, f"{self.prefix}plan-{self.build.round}-approval",
                         AttemptId.parse(self.job.row_id), BUILD, asked)
        state = WaitState(wait.state)
        if state is WaitState.OPEN:
            return Result(StepState.WAITING, then=WaitingOn())
        if state is WaitState.APPROVED:
            builds.approved(self.build)
        elif state is WaitState.ANSWERED:
            builds.revised(self.build, str((wait.answer or {}).get("revise") or ""))
        elif state is WaitState.CANCELLED:
            return self._fail("its run ended before a decision", "cancelled")
        else:
            why = wait.reason or "no decision by its deadline"
            builds.move(self.build, BuildStage.REJECTED, error=f"plan rejected: {why}")
            return Result(StepState.FAILED, error=f"the plan was rejected by "
                          f"{wait.decided_by}: {why}", error_kind=REJECTED_KIND)
        return None

    def _building(self) -> Result:
        plan = builds.plan_of(self.build)
        assert plan is not None
        for wave in plan.build_order():
            running = [r for r in (self._build_one(plan, name, len(wave)) for name in wave)
                       if r]
            if running:
                return Result(StepState.WAITING, then=WaitingOn(run_ids=tuple(running)))
        return finish(self.session, self.build, plan, self.vault)

    def _build_one(self, plan: BuildPlan, name: str, share: int) -> str | None:
        """The run building ``name`` to wait for, or None once it is settled."""
        if outcomes.settled(self.build, name):
            return None
        planned = plan.skill(name)
        assert planned is not None
        broken = outcomes.unbuilt_dependencies(self.build, planned)
        if broken:
            builds.record_skill(self.build, name, outcomes.skipped(broken))
            return None
        brief = builder_brief(self.session, self.build, plan, planned)
        run = self._call(f"{self.prefix}build-{name}", BUILDER,
                         {"build": self.build.run_id, "skill": name, "text": brief}, share)
        if isinstance(run, str):
            return run
        outcomes.settle(self.session, self.build, name, run)
        return None


def _ended(build: Build) -> Result:
    stage = BuildStage(build.stage)
    if stage is BuildStage.BUILT:
        return outcomes.result(build)
    kind = REJECTED_KIND if stage is BuildStage.REJECTED else "build_failed"
    return Result(StepState.FAILED, error=build.error or f"the build {stage}",
                  error_kind=kind)
