"""What the local API does with a run: the same checks and submit as `skillq run`
(orchestrator/cli/run_cmds.py), the same result object, the same cancel.

Paths in a request (the vault, the working folder, an inputs file's folder) are on this
machine: the API listens on loopback only, so its client is a `skillq` on the same
machine and the server reads the files it names itself, as the command would. Problems
are shown relative to the client's folder (shared/problems.py ``shown_from``), so an
error reads exactly as the command's own.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.api.run_ends import RunEnds
from orchestrator.cli.run_cmds import failure_message, result_json, success_line
from orchestrator.connect import Connection
from orchestrator.launch import POLL_S, Progress, cancel_run, run_progress, start_run
from orchestrator.submit import checked
from shared.db.models import PipelineRun
from shared.errors import SkillqError
from shared.inputs import parse_cli_inputs
from shared.problems import shown_from
from shared.states import RunState
from shared.vault import open_vault

MAX_WAIT_S = 30.0  # one long-poll's cap: a client asks again, a dead one frees its thread


class BadRequest(SkillqError):
    """A request body that is not what `skillq run` sends (the client's bug, not a user's)."""

    exit_code = 2


@dataclass(frozen=True)
class RunRequest:
    skill: str
    vault: Path
    pairs: list[str]
    inputs_file: dict[str, Any] | None
    inputs_file_path: Path | None
    workdir: Path
    triggered_by: str

    @classmethod
    def parse(cls, body: Any) -> RunRequest:
        if not isinstance(body, dict):
            raise BadRequest("the body must be one JSON object")

        def text(key: str) -> str:
            value = body.get(key)
            if not isinstance(value, str) or not value:
                raise BadRequest(f"'{key}' must be a non-empty string")
            return value

        def folder(key: str) -> Path:
            path = Path(text(key))
            if not path.is_absolute():
                raise BadRequest(f"'{key}' must be an absolute path")
            return path

        pairs = body.get("pairs") or []
        if not isinstance(pairs, list) or not all(isinstance(p, str) for p in pairs):
            raise BadRequest("'pairs' must be a list of NAME=VALUE strings")
        data, named = body.get("inputs_file"), None
        if data is not None:
            if not isinstance(data, dict):
                raise BadRequest("'inputs_file' must be the inputs file's JSON object")
            named = folder("inputs_file_dir") / text("inputs_file_name")
        return cls(skill=text("skill"), vault=folder("vault"), pairs=pairs, inputs_file=data,
                   inputs_file_path=named, workdir=folder("workdir"),
                   triggered_by=text("triggered_by"))


def submit(conn: Connection, req: RunRequest) -> str:
    """run_cmds.run's checks and submit, for a command started in ``req.workdir``."""
    with shown_from(str(req.workdir)):
        loaded = open_vault(req.vault, ttl_s=conn.settings.discovery_ttl_s)
        skill = loaded.get(req.skill)
        checked(loaded, skill)
        given = parse_cli_inputs(skill.manifest, req.pairs, req.inputs_file_path,
                                 files_from=req.workdir, inputs_data=req.inputs_file)
        return start_run(conn, loaded, skill, given, source="production",
                         triggered_by=req.triggered_by, workdir=str(req.workdir))


def token_of(run: PipelineRun, progress: Progress) -> str:
    """What a client last saw: a long-poll answers as soon as this changes."""
    counts = ",".join(f"{s}={n}" for s, n in sorted(progress.counts.items()))
    return f"{run.state};{counts}"


def snapshot(conn: Connection, run: PipelineRun, progress: Progress) -> dict[str, Any]:
    found: dict[str, Any] = {"run_id": run.id, "state": run.state, "total": progress.total,
                             "done": progress.done, "counts": progress.counts,
                             "token": token_of(run, progress), "ended": False}
    if RunState(run.state).terminal:
        # what `skillq run` prints at the end: the --json object, and its line on stderr
        # (success) or the error it exits 1 with (otherwise)
        found.update(ended=True, result=result_json(conn, run),
                     success=success_line(run) if run.state == RunState.SUCCEEDED else None,
                     failure=None if run.state == RunState.SUCCEEDED else
                     failure_message(run))
    return found


def poll(conn: Connection, ends: RunEnds, run_id: str, after: str | None,
         wait_s: float) -> dict[str, Any]:
    """The run's progress once it differs from ``after``, it ends, or ``wait_s`` passes.

    The end wakes the wait at once (its NOTIFY); step counts are read every POLL_S, as
    `skillq run` itself reads them (orchestrator/launch.py wait_run)."""
    deadline = time.monotonic() + min(max(wait_s, 0.0), MAX_WAIT_S)
    with ends.watch(run_id) as ended:
        while True:
            ended.clear()
            run, progress = run_progress(conn, run_id)  # RunNotFound: the client says so
            found = snapshot(conn, run, progress)
            left = deadline - time.monotonic()
            if found["ended"] or found["token"] != after or left <= 0:
                return found
            ended.wait(min(POLL_S, left))


def cancel(conn: Connection, run_id: str, reason: str) -> dict[str, Any]:
    """`skillq cancel`'s semantics, and the run as it is afterwards."""
    done = cancel_run(conn, run_id, reason)
    run, progress = run_progress(conn, run_id, counts=False)
    return {"run_id": done.run_id, "state": done.state, "stopped": list(done.stopped),
            "ended_now": done.ended_now, "run": snapshot(conn, run, progress)}


def reason_of(body: Mapping[str, Any]) -> str:
    reason = body.get("reason")
    if not isinstance(reason, str) or not reason.strip() or len(reason) > 500:
        raise BadRequest("'reason' must say, in under 500 characters, why the run is "
                         "cancelled")
    return reason
