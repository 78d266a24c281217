"""The worker's side of improvement notes: a production step that failed for good leaves
one, in the transaction that records the failure (so a note exists exactly when the
failure does). The skill's files are only read, never written."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from lifecycle.context import WorkerContext
from shared.db.models import PipelineRun, StepRun
from shared.diagnosis import Failure, diagnose
from shared.notes import StepFailure, leave_note, skill_facts
from shared.secrets import values_for
from shared.skillfiles import RunSource
from shared.states import StepState

if TYPE_CHECKING:
    from workers.step_types import Claim, Result


def note_failures(ctx: WorkerContext, session: Session,
                  done: Sequence[tuple[Claim, Result]]) -> list[int]:
    """Leave (or count) a note for each attempt in ``done`` that this transaction
    recorded as a final failure of a production run; the notes' ids.

    Call it after the attempts are recorded, in the same transaction. Retrying and lost
    attempts are not final and leave none; nor does an attempt whose row another
    delivery took over (its row is not ``failed`` here). Notes are written in one global
    order of their key, so two workers' batches never wait on each other's notes in a
    cycle.
    """
    failed = {job.row_id: (job, result) for job, result in done
              if result.state == StepState.FAILED and result.error_kind not in ("nested",)}
    if not failed:
        return []
    recorded = set(session.scalars(select(StepRun.id).where(
        StepRun.id.in_(list(failed)), StepRun.state == StepState.FAILED.value)))
    runs = {r.id: r for r in session.scalars(select(PipelineRun).where(
        PipelineRun.id.in_({failed[i][0].run_id for i in recorded}),
        PipelineRun.source == RunSource.PRODUCTION.value))}
    pending = []
    for row_id in recorded:
        job, result = failed[row_id]
        run = runs.get(job.run_id)
        if run is None:
            continue
        facts = skill_facts(job.vault, job.skill, ctx.settings.discovery_ttl_s)
        failure = StepFailure(
            skill=job.skill, version=job.version, step_id=job.step_id, pipeline=run.skill,
            run_id=job.run_id, step_run_id=job.row_id, error=result.error,
            error_kind=result.error_kind, exit_code=result.exit_code, inputs=job.inputs,
            worker=ctx.hostname, timeout_s=facts.timeout_s, retries=facts.retries)
        kind = diagnose(Failure(failure.error_kind, failure.error, failure.exit_code)).kind
        pending.append(((job.skill, job.version, job.step_id, str(kind), row_id), failure,
                        facts.auth))
    ids = []
    for _, failure, auth in sorted(pending, key=lambda p: p[0]):
        note_id = leave_note(session, failure, secrets=values_for(auth), declared=auth)
        if note_id is not None:
            ids.append(note_id)
    return ids
