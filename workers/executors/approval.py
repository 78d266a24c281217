"""An approval step: the run waits for a person to approve or reject it (docs/waits.md).

Its first attempt opens the wait and ends ``waiting``, holding no worker slot; a
decision (or the deadline) puts it back in its queue, and this time it finds the wait
decided: approved, it succeeds with the approver's inputs as its outputs; rejected or
timed out, it fails with error_kind ``rejected``, which ends the run rejected unless its
on_failure says otherwise (lifecycle/planner/forward.py).
"""

from __future__ import annotations

from lifecycle import waits
from lifecycle.context import WorkerContext
from shared.attempt_id import AttemptId
from shared.builtin import APPROVAL
from shared.db.models import PipelineRun
from shared.db.session import transaction
from shared.db.wait_models import APPROVAL as APPROVAL_WAIT
from shared.manifest import Manifest
from shared.skill import Skill
from shared.states import REJECTED_KIND, StepState, WaitState
from workers.step_types import Claim, Result, WaitingOn


class ApprovalExecutor:
    kind = "approval"

    def handles(self, manifest: Manifest) -> bool:
        return manifest.name == APPROVAL

    def run(self, ctx: WorkerContext, job: Claim, skill: Skill) -> Result:
        attempt = AttemptId.parse(job.row_id)
        given = job.inputs
        asked = waits.Asked(
            kind=APPROVAL_WAIT, prompt=str(given.get("message") or "Approve?"),
            shown=given.get("show") or {}, default=given.get("defaults") or {},
            form=given.get("form") or [], timeout_s=given.get("timeout_s"),
            on_timeout=str(given.get("on_timeout") or "reject"))
        with transaction(ctx.database_url) as session:
            run = session.get(PipelineRun, job.run_id)
            owner = run.skill if run is not None else job.skill
            wait = waits.ask(session, attempt.calls_prefix + waits.APPROVAL_KEY, attempt,
                             owner, asked)
            state = WaitState(wait.state)
            outputs, reason, by = wait.answer, wait.reason, wait.decided_by
        if state is WaitState.OPEN:
            return Result(StepState.WAITING,
                          then=WaitingOn(deadline=asked.timeout_s is not None))
        if state is WaitState.APPROVED:
            return Result(StepState.SUCCEEDED, outputs=outputs or {})
        if state is WaitState.CANCELLED:
            return Result(StepState.FAILED, error="its run ended before a decision",
                          error_kind="cancelled")
        why = f"no decision within {asked.timeout_s:g} s" if state is WaitState.TIMED_OUT \
            else f"rejected by {by}: {reason}"
        return Result(StepState.FAILED, error=why, error_kind=REJECTED_KIND)

    def answer_from_cache(self, ctx: WorkerContext, job: Claim, skill: Skill
                          ) -> Result | None:
        return None  # a person's decision is never cached
