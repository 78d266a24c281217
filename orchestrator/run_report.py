"""What a person is told of an ended run: the `--json` object, the success line and the
failure line. `skillq run` on either path, the local API and the MCP server all say it
in these words, and none of them owns them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shared.states import RunState

if TYPE_CHECKING:
    from orchestrator.connect import Connection
    from shared.db.models import PipelineRun


def result_json(conn: Connection, run: PipelineRun) -> dict[str, Any]:
    """What `--json` prints for an ended run."""
    if run.state != RunState.SUCCEEDED:
        return {"run_id": run.id, "state": run.state, "error": run.error,
                "step": run.failed_step, "item": run.failed_item}
    from shared.db.session import transaction
    from shared.store import unpack

    with transaction(conn.endpoints.database_url) as session:
        outputs: Any = unpack(session, run.outputs)
    return {"run_id": run.id, "state": run.state, "outputs": outputs}


def failure_message(run: PipelineRun) -> str:
    """What `skillq run` says (as ``error: ...``, exit 1) of a run that did not succeed."""
    what = {RunState.CANCELLED: "was cancelled", RunState.REJECTED: "was rejected"}.get(
        RunState(run.state), "aborted")
    return f"run {run.id} of {run.skill} {what}: {run.error}"


def success_line(run: PipelineRun) -> str:
    return f"✓ {run.skill} succeeded (run {run.id})"
