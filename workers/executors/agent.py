"""An instruction-only skill, run by a model (workers/agent/, imported when a step runs:
only the processes that run agent steps load the model runtime)."""

from __future__ import annotations

from datetime import UTC, datetime

from lifecycle import policy
from lifecycle.context import WorkerContext
from shared.inputs import with_defaults
from shared.manifest import Manifest
from shared.skill import Skill
from shared.states import StepState
from workers.executors.base import declared_secrets
from workers.step_types import Claim, Result, WaitingOn


class AgentExecutor:
    kind = "agent"

    def handles(self, manifest: Manifest) -> bool:
        return manifest.kind == "instructions"

    def run(self, ctx: WorkerContext, job: Claim, skill: Skill) -> Result:
        from workers.agent.step import run_step

        secrets = declared_secrets(skill)
        if isinstance(secrets, Result):
            return secrets
        done = run_step(ctx, row_id=job.row_id, attempt=job.attempt, vault_root=job.vault,
                        workdir=job.workdir, skill=skill,
                        inputs=with_defaults(skill.manifest, job.inputs), secrets=secrets,
                        worker=ctx.hostname)
        state = StepState.WAITING if done.waiting else \
            StepState.SUCCEEDED if done.ok else StepState.FAILED
        result = Result(state, outputs=done.outputs, error=done.error,
                        error_kind=done.error_kind, cost_usd=done.cost_usd,
                        tokens_in=done.tokens_in, tokens_out=done.tokens_out,
                        # what the prompt left out to fit its budgets: on record
                        stderr_tail="\n".join(f"warning: {w}" for w in done.warnings) or None,
                        then=WaitingOn(tuple(done.waiting_on), deadline=bool(done.waits))
                        if done.waiting else None)
        if done.transient:
            decided = policy.after(policy.Ended(policy.Cause.MODEL_UNAVAILABLE, job.attempt),
                                   datetime.now(UTC))
            if isinstance(decided, policy.Retry):
                result.state, result.not_before = StepState.RETRYING, decided.not_before
        return result

    def answer_from_cache(self, ctx: WorkerContext, job: Claim, skill: Skill
                          ) -> Result | None:
        return None  # a model's answer is never cached
