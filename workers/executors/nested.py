"""An orchestrator step: its steps run as a nested run of their own, which settles this
step when it ends (lifecycle/run_end.py)."""

from __future__ import annotations

from lifecycle.context import WorkerContext
from shared.db.models import PipelineRun, StepRun
from shared.db.session import transaction
from shared.manifest import Manifest
from shared.skill import Skill
from shared.states import StepState
from shared.vault import open_vault
from workers.step_types import Claim, NestedRunStarted, Result


class NestedRunExecutor:
    kind = "nested run"

    def handles(self, manifest: Manifest) -> bool:
        return manifest.is_orchestrator

    def run(self, ctx: WorkerContext, job: Claim, skill: Skill) -> Result:
        from lifecycle.submit import create_run  # control plane: a nested pipeline run

        with transaction(ctx.database_url) as session:
            row = session.get(StepRun, job.row_id, with_for_update=True)
            parent = session.get(PipelineRun, job.run_id)
            assert row is not None and parent is not None
            vault = open_vault(job.vault, ttl_s=ctx.settings.discovery_ttl_s)
            child = create_run(session, vault, skill, job.inputs, source=parent.source,
                               triggered_by=parent.skill, parent_step_run_id=row.id,
                               workdir=job.workdir)
            row.child_run_id = child
        return Result(StepState.RUNNING, then=NestedRunStarted(child))

    def answer_from_cache(self, ctx: WorkerContext, job: Claim, skill: Skill
                          ) -> Result | None:
        return None  # a nested run's steps are cached each on its own
