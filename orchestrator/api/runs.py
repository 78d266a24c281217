"""What the local API does with a run: the same checks and submit as `skillq run`
(orchestrator/run_report.py), the same result object, the same cancel.

Paths in a request (the vault, the working folder, an inputs file's folder) are on this
machine: the API listens on loopback only, so its client is a `skillq` on the same
machine and the server reads the files it names itself, as the command would. Problems
are shown relative to the client's folder (shared/problems.py ``shown_from``), so an
error reads exactly as the command's own.

A server that does not answer is an answer too, never a failure (``ServerDown``, HTTP
503): a long-poll that cannot read the run says the database is unreachable, and its
client waits as `skillq run` waits (shared/db/outage.py FollowingRun); a submit that
meets a database or broker outage has recorded nothing, and its client takes the direct
path, which does what it does when a server is down at the start.

The vault is the one on disk now, as a fresh `skillq run` reads it (``current_vault``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kombu.exceptions import KombuError

from orchestrator.api.run_ends import RunEnds
from orchestrator.connect import Connection
from orchestrator.launch import POLL_S, Progress, cancel_run, run_progress, start_run
from orchestrator.run_report import failure_message, result_json, success_line
from orchestrator.submit import checked
from shared.db.models import PipelineRun
from shared.db.outage import first_line, is_outage
from shared.errors import DatabaseUnreachable, SkillqError
from shared.inputs import parse_cli_inputs
from shared.problems import display_base, shown_from
from shared.skill import SIDECAR, SUB_SKILLS
from shared.states import RunState
from shared.vault import Vault, open_vault, skill_folders

MAX_WAIT_S = 30.0  # one long-poll's cap: a client asks again, a dead one frees its thread


class BadRequest(SkillqError):
    """A request body that is not what `skillq run` sends (the client's bug, not a user's)."""

    exit_code = 2


SERVERS = {"database": ("PostgreSQL", "SKILLQ_DATABASE_URL"),
           "broker": ("the broker", "SKILLQ_BROKER_URL")}


class ServerDown(SkillqError):
    """The database or the broker did not answer, and nothing was done: the message is
    the one the CLI prints of an outage before anything ran (orchestrator/cli/app.py);
    ``detail`` the server's own first line, ``bound_s`` this API's
    SKILLQ_DATABASE_OUTAGE_S (a client that sets none waits that long)."""

    exit_code = DatabaseUnreachable.exit_code

    def __init__(self, server: str, exc: BaseException, bound_s: float) -> None:
        self.server, self.detail, self.bound_s = server, first_line(exc), bound_s
        what, variable = SERVERS[server]
        super().__init__(f"the {server} is unreachable ({self.detail}); check that {what} "
                         f"runs (`skillq status`, or {variable})")


@contextlib.contextmanager
def database_answers(conn: Connection) -> Iterator[None]:
    """A database outage met inside: ServerDown, an answer rather than a failure."""
    try:
        yield
    except Exception as exc:
        if not is_outage(exc):
            raise
        raise ServerDown("database", exc, conn.settings.database_outage_s) from None


def broker_answers(conn: Connection) -> None:
    """ServerDown unless the broker answers now. A run's first messages go after its
    commit: a broker found down then leaves a run recorded that its command never
    follows (the workers' sweep sends it a minute later), so it is asked before anything
    is recorded, on a pooled connection (Redis: one PING, one short round trip)."""
    with conn.app.producer_or_acquire() as producer:
        link = producer.connection
        try:
            client = getattr(link.default_channel, "client", None)  # connects if it is not
            if client is not None:  # Redis: a pooled connection may be a dead one
                client.ping()
        except (*link.connection_errors, *link.channel_errors, KombuError, OSError) as exc:
            raise ServerDown("broker", exc, conn.settings.database_outage_s) from None


# What a vault's read depends on, as it was when this process last read it from disk.
_read_at: dict[tuple[Path, str], tuple[int, ...]] = {}
_read_lock = threading.Lock()


def manifests_stamp(root: Path) -> tuple[int, ...]:
    """The vault folder's own (skills added, removed, renamed) and each skill's manifest
    files' (what load_skill reads) change stamps: a few stats a skill. Not benchmarks.json
    nor the folders themselves, which every run's windows rewrite."""
    stamp: list[int] = []
    for path in (root, *(folder / name for folder in skill_folders(root)
                         for name in ("SKILL.md", "skill.md", SIDECAR, SUB_SKILLS))):
        try:
            st = path.stat()
        except OSError:
            stamp += (0, 0, 0)
            continue
        stamp += (st.st_mtime_ns, st.st_size, st.st_ino)
    return tuple(stamp)


def current_vault(root: Path, name: str, ttl_s: float) -> Vault:
    """The vault as a `skillq run` started now would read it, holding ``name`` if it is
    there: open_vault's copy (kept SKILLQ_DISCOVERY_TTL_S) while no manifest changed since
    this process read the vault and it has the skill asked for; read again otherwise, so
    a skill created or edited a moment ago runs as it is on disk."""
    if not root.is_dir():
        return open_vault(root, ttl_s=ttl_s)  # VaultError, naming it
    key = (root.resolve(), display_base())
    stamp = manifests_stamp(root)  # before the read: an edit during it shows next time
    with _read_lock:
        unchanged = _read_at.get(key) == stamp
    if unchanged:
        loaded = open_vault(root, ttl_s=ttl_s)
        if name.removeprefix("/") in loaded.skills:
            return loaded
    loaded = open_vault(root, ttl_s=0)  # read now, and kept for the next run
    with _read_lock:
        _read_at[key] = stamp
    return loaded


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
    """run_cmds.run's checks and submit, for a command started in ``req.workdir``.

    ServerDown when the database or the broker is down: nothing recorded (a database
    outage ends the run's transaction before its commit), so the client takes the
    direct path, which starts a stopped embedded server, as it would have."""
    with shown_from(str(req.workdir)), database_answers(conn):
        loaded = current_vault(req.vault, req.skill, conn.settings.discovery_ttl_s)
        skill = loaded.get(req.skill)
        checked(loaded, skill)
        given = parse_cli_inputs(skill.manifest, req.pairs, req.inputs_file_path,
                                 files_from=req.workdir, inputs_data=req.inputs_file)
        broker_answers(conn)
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
    `skillq run` itself reads them (orchestrator/launch.py wait_run). A database outage
    is answered at once (ServerDown): the client waits it out, asking again."""
    deadline = time.monotonic() + min(max(wait_s, 0.0), MAX_WAIT_S)
    with ends.watch(run_id) as ended, database_answers(conn):
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
    with database_answers(conn):
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
