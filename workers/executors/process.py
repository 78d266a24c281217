"""What a script step and a screen step share: a process of the skill's own, run with
the secrets it declares, answered from the cache when it caches, and its end read by
lifecycle/policy.py (retried, cached, or failed). script.py and screen.py say how the
process is started."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lifecycle import policy
from lifecycle.context import WorkerContext
from shared import cache
from shared.db.session import transaction
from shared.inputs import with_defaults
from shared.manifest import Manifest
from shared.secrets import redact, redact_value
from shared.skill import Skill
from shared.states import StepState
from workers import attempt_end
from workers.executors.base import declared_secrets
from workers.script_executor import ScriptResult, ScriptStatus
from workers.step_types import Claim, Result, ScreenLock

_CAUSES = {ScriptStatus.TRANSIENT: policy.Cause.TRANSIENT_EXIT,
           ScriptStatus.TIMEOUT: policy.Cause.TIMEOUT}


class ProcessExecutor:
    kind = "process"

    def handles(self, manifest: Manifest) -> bool:
        raise NotImplementedError

    def launch(self, ctx: WorkerContext, job: Claim, skill: Skill, inputs: dict[str, Any],
               secrets: Mapping[str, str], workdir: Path | None
               ) -> tuple[ScriptResult, ScreenLock | None]:
        """Run the step's process to its end."""
        raise NotImplementedError

    def run(self, ctx: WorkerContext, job: Claim, skill: Skill) -> Result:
        secrets = declared_secrets(skill)
        if isinstance(secrets, Result):
            return secrets
        m = skill.manifest
        inputs = with_defaults(m, job.inputs)
        key = cache.cache_key(skill.name, m.version, inputs)
        if m.cache.enabled:
            hit = _cached(ctx, job, key)
            if hit is not None:
                return hit
        workdir = Path(job.workdir) if job.workdir and Path(job.workdir).is_dir() else None
        try:
            done, lock = self.launch(ctx, job, skill, inputs, secrets, workdir)
        finally:
            attempt_end.end(job.row_id)  # nothing the attempt started outlives it
        return _result(job, m, key, done, lock, secrets)

    def answer_from_cache(self, ctx: WorkerContext, job: Claim, skill: Skill
                          ) -> Result | None:
        if not job.cached or not skill.manifest.cache.enabled:
            return None
        if isinstance(declared_secrets(skill), Result):
            return None  # it fails on running, without a secret, before its cache
        key = cache.cache_key(skill.name, skill.manifest.version,
                              with_defaults(skill.manifest, job.inputs))
        return _hit(job.cached[key]) if key in job.cached else None


def _hit(outputs: Any) -> Result:
    return Result(StepState.SUCCEEDED, outputs=outputs, cache_hit=True, duration_ms=0.0)


def _cached(ctx: WorkerContext, job: Claim, key: str) -> Result | None:
    if job.cached is not None:  # looked up with its claim, or for its whole batch
        return _hit(job.cached[key]) if key in job.cached else None
    with transaction(ctx.database_url) as session:
        found = cache.lookup(session, key)
    return _hit(found.outputs) if found is not None else None


def _result(job: Claim, m: Manifest, key: str, done: ScriptResult, lock: ScreenLock | None,
            secrets: Mapping[str, str]) -> Result:
    result = Result(StepState.SUCCEEDED, exit_code=done.exit_code,
                    stdout_tail=redact(done.stdout_tail, secrets),
                    stderr_tail=redact(done.stderr_tail, secrets),
                    duration_ms=float(done.duration_ms), screen=lock)
    if done.status == ScriptStatus.SUCCESS:
        # A secret a script echoes into its outputs must not reach the records either.
        result.outputs = redact_value(done.outputs, secrets) if secrets else done.outputs
        result.then = policy.cache_write(m, key)
        return result
    result.error = redact(done.error or done.status.value, secrets)
    cause = _CAUSES.get(done.status, policy.Cause.ERROR)
    decided = policy.after(policy.Ended(cause, job.attempt,
                                        retries=m.run.retries if m.run else 0),  # actions: 0
                           datetime.now(UTC))
    if isinstance(decided, policy.Retry):
        result.state, result.not_before = StepState.RETRYING, decided.not_before
        result.error_kind = "transient"
        return result
    result.state = StepState.FAILED
    result.error_kind = "transient_exhausted" if cause is policy.Cause.TRANSIENT_EXIT \
        else done.status.value
    return result
