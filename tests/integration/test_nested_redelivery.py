"""A step carried by its nested run is never started again by a redelivered message.

An orchestrator step's attempt stays running, with ``child_run_id`` set, from the moment
its worker starts the nested run until that run ends (and settles it); no process keeps
its heartbeat fresh meanwhile. A second delivery of its message (a pool process killed
after the nested run's commit and before the ack, a broker's visibility timeout) must
not take it over as an orphan: taking it over runs it again, which starts a second
nested run beside the first.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import Stack
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lifecycle import transitions
from lifecycle.canvas import dispatch_steps
from lifecycle.context import WorkerContext
from lifecycle.dispatch import Dispatch
from lifecycle.submit import create_run
from lifecycle.tasks import advance_in
from shared.db.models import PipelineRun, StepRun
from shared.db.session import transaction
from shared.settings import Settings
from shared.store import unpack
from shared.vault import load_vault
from workers.claim import claim

pytestmark = pytest.mark.integration
HOSTNAME = "nested-redelivery-host"


def _run(session: Session, parent: str | None = None) -> PipelineRun:
    run = transitions.new_run(
        session, run_id=f"run-n{uuid.uuid4().hex[:14]}", skill="nested-probe", version=1,
        source="production", vault="/nowhere",
        plan={"skill": "nested-probe", "version": 1, "steps": [], "workdir": None},
        inputs={}, triggered_by="test", parent_step_run_id=parent)
    transitions.start_run(run)
    return run


def _ctx(url: str, home: Path, vault: Path) -> WorkerContext:
    """A worker's context on HOSTNAME, as this test process."""
    return WorkerContext(settings=Settings(_env_file=None, home=home, vault=vault,
                                           database_url=url),
                         database_url=url, vault=vault, hostname=HOSTNAME, pid=os.getpid())


@pytest.mark.parametrize("its_worker", ["stale heartbeat", "dead process on this host"])
def test_a_redelivered_message_of_a_step_carried_by_its_nested_run_is_not_run_again(
        stack: Stack, tmp_path: Path, its_worker: str) -> None:
    url = stack.endpoints.database_url
    ctx = _ctx(url, tmp_path, tmp_path)
    if its_worker == "stale heartbeat":
        worker, pid = "gone@elsewhere", 4242
        claimed_at = datetime.now(UTC) - timedelta(seconds=10 * ctx.settings.dead_after_s)
    else:
        proc = subprocess.Popen(["true"])
        proc.wait()  # reaped: a pid nobody holds now
        worker, pid, claimed_at = f"w@{HOSTNAME}", proc.pid, datetime.now(UTC)
    with transaction(url) as session:
        parent_id = _run(session).id
        row_id = f"{parent_id}/child/-1/1"
        transitions.launch_attempts(session, [{
            "id": row_id, "run_id": parent_id, "step_id": "child", "item_index": -1,
            "attempt": 1, "skill": "nested-probe", "version": 1, "state": "pending",
            "source": "production", "queue": "control", "inputs": {}, "input_hash": "h",
            "not_before": None, "route": "test"}])
    with transaction(url) as session:
        assert transitions.claim_pending(session, [row_id], worker=worker, pid=pid,
                                         daemon=None, now=claimed_at)
    with transaction(url) as session:
        child_id = _run(session, parent=row_id).id
        row = session.get(StepRun, row_id)
        assert row is not None
        row.child_run_id = child_id  # as workers/executors/nested.py leaves it
    try:
        due: list[str] = []
        taken = claim(ctx, [row_id], f"test@{HOSTNAME}", due.append).jobs
        assert taken == [], "a step carried by its nested run was taken over, to run again"
        # Nor declared lost (its nested run settles it): that run is planned again,
        # which starts it should the worker that created it have died before it did.
        assert due == [child_id]
        with transaction(url) as session:
            row = session.get(StepRun, row_id)
            assert row is not None
            assert (row.state, row.worker, row.child_run_id) == ("running", worker, child_id)
            assert session.scalar(select(func.count()).select_from(PipelineRun).where(
                PipelineRun.parent_step_run_id == row_id)) == 1
    finally:
        with transaction(url) as session:
            transitions.cancel_run(session, parent_id, "test over")


OUTER = """---
name: outer
description: "Run inner over the words (a nested run as its only step)."
version: 1
inputs:
  - name: words
    type: string[]
    required: true
    description: "Words."
outputs:
  - name: words
    type: string[]
    description: The nested run's.
    from: ${steps.child.outputs.words}
steps:
  - id: child
    skill: inner
    with:
      words: ${inputs.words}
---

# outer

A test orchestrator whose one step is a nested run of inner.
"""


def test_a_nested_run_its_worker_created_but_never_started_is_started_by_a_redelivery(
        healthy: Stack, vault: Path) -> None:
    """The worker that started the nested run died after its commit and before the
    nested run's first advance: the nested run is pending with nothing sent, and the
    step's message comes back. The real worker that takes it starts that nested run
    (and no other), which settles the step and ends the run."""
    (vault / "outer").mkdir()
    (vault / "outer" / "SKILL.md").write_text(OUTER)
    (vault / "outer" / "sub-skills.json").write_text(
        '{"sub_skills": [{"skill_id": "inner", "role": "step"}]}')
    url = healthy.endpoints.database_url
    ctx = _ctx(url, healthy.home, vault)
    loaded = load_vault(vault)
    inputs = {"words": ["a", "b"]}
    with transaction(url) as session:
        run_id = create_run(session, loaded, loaded.get("outer"), inputs,
                            source="production", triggered_by="test")
        out = advance_in(session, ctx, run_id)  # planned, its message not sent
    ((row_id,),) = [d.step_run_ids for d in out.dispatch]
    queue = out.dispatch[0].queue
    proc = subprocess.Popen(["true"])
    proc.wait()  # the worker's pool process, gone
    with transaction(url) as session:
        assert transitions.claim_pending(session, [row_id], worker=f"w@{HOSTNAME}",
                                         pid=proc.pid, daemon=None, now=datetime.now(UTC))
        row = session.get(StepRun, row_id)
        assert row is not None
        row.child_run_id = create_run(session, loaded, loaded.get("inner"), inputs,
                                      source="production", triggered_by="outer",
                                      parent_step_run_id=row_id)
        child_id = row.child_run_id
    dispatch_steps(healthy.app, [Dispatch((row_id,), queue, "inner")])  # the redelivery

    run = healthy.wait_run(run_id)
    assert run.state == "succeeded", run.error
    assert healthy.run(child_id).state == "succeeded"
    with transaction(url) as session:
        children = session.scalars(select(PipelineRun.id).where(
            PipelineRun.parent_step_run_id == row_id)).all()
        assert children == [child_id]
        row = session.get(StepRun, row_id)
        assert row is not None and row.state == "succeeded"
        assert unpack(session, run.outputs) == inputs
