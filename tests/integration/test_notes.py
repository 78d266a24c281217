"""Improvement notes on the real PostgreSQL: the repository (leave_note, set_status) and a
production failure leaving one through the workers, never touching the skill's files."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import VAULTS, RunResult, Stack, copy_vault
from sqlalchemy import select

from shared import secrets
from shared.db.models import PipelineRun, StepRun
from shared.db.notes_models import ImprovementNote
from shared.errors import NoteError
from shared.notes import (
    Status,
    StepFailure,
    leave_note,
    list_notes,
    note_lost_step,
    open_counts,
    set_status,
)

pytestmark = pytest.mark.integration


def failure(skill: str, **changes: object) -> StepFailure:
    base = dict(skill=skill, version=1, step_id="fetch", pipeline="digest", run_id="run-a",
                step_run_id="run-a/fetch/-1/1", error="boom: item 'a'", error_kind="failed",
                exit_code=1, inputs={"url": "https://x.test/?k=tok-123", "token": "plain"})
    base.update(changes)
    return StepFailure(**base)  # type: ignore[arg-type]


def test_repeats_count_on_one_note_and_closing_reopens(stack: Stack) -> None:
    skill = f"repo-{uuid.uuid4().hex[:8]}"
    with stack.db() as session:
        first = leave_note(session, failure(skill), secrets={"token": "tok-123"},
                           declared=["token"])
    with stack.db() as session:
        again = leave_note(session, failure(skill, run_id="run-b", error="boom: item 'b'"),
                           secrets={"token": "tok-123"}, declared=["token"])
        other = leave_note(session, failure(skill, error_kind="timeout", error="timed out"),
                           secrets={})
    assert first == again and other != first
    with stack.db() as session:
        note = session.get(ImprovementNote, first)
        assert note is not None
        assert (note.count, note.run_id, note.error) == (2, "run-b", "boom: item 'b'")
        assert note.inputs == {"url": "https://x.test/?k=***", "token": "***"}
        assert (note.diagnosis, note.status) == ("nonzero_exit", "open")
        assert note.last_seen > note.first_seen
        assert open_counts(session, [skill]) == {skill: 2}
        set_status(session, first, Status.RESOLVED)
    with stack.db() as session:
        with pytest.raises(NoteError, match="already resolved"):
            set_status(session, first, Status.DISMISSED)
        with pytest.raises(NoteError, match="no improvement note"):
            set_status(session, 2**31 - 1, Status.DISMISSED)
        reopened = leave_note(session, failure(skill), secrets={})  # a regression: new note
        assert reopened not in (first, None)
        set_status(session, reopened, Status.WONTFIX)
    with stack.db() as session:
        assert leave_note(session, failure(skill), secrets={}) == reopened  # counted quietly
        assert [n.id for n in list_notes(session, skill)] == [other]
        assert {n.id for n in list_notes(session, skill, include_closed=True)} == {
            first, reopened, other}
        assert leave_note(session, failure(skill, error_kind="nested"), secrets={}) is None


def folder_bytes(folder: Path) -> dict[str, str]:
    """Every file's SHA-256, except the runs window skillq writes into benchmarks.json."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != "benchmarks.json"}


def test_production_failure_leaves_one_note(healthy: Stack, run_skill: Callable[..., RunResult],
                                            tmp_path: Path) -> None:
    vault = copy_vault(VAULTS / "lifecycle", tmp_path / "vault")
    token = f"flop-{uuid.uuid4().hex}"
    secrets.store(healthy.home / secrets.SECRETS_FILE, "flop_token", token)
    before = folder_bytes(vault / "flop")

    def live_v1() -> list[ImprovementNote]:
        with healthy.db() as session:  # v1: the lost-step test below leaves a flop v7 note
            found = list(session.scalars(select(ImprovementNote).where(
                ImprovementNote.skill == "flop", ImprovementNote.version == 1,
                ImprovementNote.status == "open")))
            session.expunge_all()
        return found

    # Another test on this stack may have failed flop v1 already: its note counts on.
    counted = sum(n.count for n in live_v1())
    runs: list[RunResult] = [run_skill("flop", vault, inputs={"note": f"key {token} here"})
                             for _ in range(2)]
    for run in runs:
        assert run.code == 1 and run.run_id is not None, run

    notes = live_v1()
    assert len(notes) == 1, [(n.id, n.run_id) for n in notes]
    note = notes[0]
    assert (note.count, note.status, note.step_id, note.version) == (
        counted + 2, "open", "flop", 1)
    assert note.run_id == runs[1].run_id and note.diagnosis == "nonzero_exit"
    assert note.inputs == {"note": "key *** here"}
    assert token not in json.dumps([note.error, note.summary, note.inputs])
    assert "exit 75" in note.suggested_fix
    assert folder_bytes(vault / "flop") == before  # notes never edit the skill

    show = healthy.cli("show", "flop", "--vault", str(vault), cwd=tmp_path)
    assert "open improvement note(s): `skillq notes flop`" in show.stdout, show.stderr
    listed = healthy.cli("notes", "flop", "--json", cwd=tmp_path)
    assert note.id in [n["id"] for n in json.loads(listed.stdout)], listed.stderr

    resolved = healthy.cli("notes", "resolve", str(note.id), cwd=tmp_path)
    assert resolved.returncode == 0 and "is now resolved" in resolved.stdout, resolved.stderr
    again = healthy.cli("notes", "dismiss", str(note.id), cwd=tmp_path)
    assert again.returncode == 2 and "already resolved" in again.stderr
    assert "Traceback" not in again.stderr
    still_open = json.loads(healthy.cli("notes", "flop", "--json", cwd=tmp_path).stdout)
    assert note.id not in [n["id"] for n in still_open]
    closed = json.loads(healthy.cli("notes", "flop", "--all", "--json", cwd=tmp_path).stdout)
    assert (note.id, "resolved") in [(n["id"], n["status"]) for n in closed]


def test_retried_attempts_leave_no_note_only_the_final_failure(
        healthy: Stack, run_skill: Callable[..., RunResult], vault: Path,
        tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    counter.mkdir()

    def exhausted() -> list[ImprovementNote]:
        with healthy.db() as session:
            found = [n for n in list_notes(session, "flaky")
                     if n.diagnosis == "transient_exhausted"]
            session.expunge_all()
            return found

    before = sum(n.count for n in exhausted())  # another test may have left one
    # retries: 3, so attempts 1-3 retry and the 4th is the final failure.
    result = run_skill("flaky", vault, inputs={"counter_dir": str(counter), "succeed_on": 9})
    assert result.code == 1 and result.run_id is not None, result
    assert [r.state for r in healthy.steps(result.run_id)] == ["retrying"] * 3 + ["failed"]
    [note] = exhausted()
    assert note.count == before + 1  # one final failure: one count, retries none
    assert note.step_run_id == f"{result.run_id}/flaky/-1/4"


def test_a_step_given_up_as_lost_leaves_a_note(stack: Stack, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLQ_HOME", str(stack.home))  # as the planner's process has it
    vault = copy_vault(VAULTS / "lifecycle", tmp_path / "vault")
    token = f"lost-{uuid.uuid4().hex}"
    secrets.store(stack.home / secrets.SECRETS_FILE, "flop_token", token)
    run_id = f"run-{uuid.uuid4().hex[:16]}"
    run = PipelineRun(id=run_id, skill="flop", version=7, state="failed",
                      source="production", vault=str(vault), plan={}, inputs={},
                      input_hash="sha256:x", progress={})
    row = StepRun(id=f"{run_id}/flop/-1/3", run_id=run_id, step_id="flop", item_index=-1,
                  attempt=3, skill="flop", version=7, state="lost", source="production",
                  queue="default", inputs={"note": f"with {token}"}, input_hash="sha256:x",
                  error="worker w@h stopped sending heartbeats", error_kind="lost")
    with stack.db() as session:
        session.add(run)
        session.flush()
        session.add(row)
        session.flush()
        note_id = note_lost_step(session, run, row)
        run.source = "test_window"
        assert note_lost_step(session, run, row) is None  # only production leaves notes
    with stack.db() as session:
        note = session.get(ImprovementNote, note_id)
        assert note is not None
        assert (note.diagnosis, note.step_run_id) == ("lost", row.id)
        assert note.inputs == {"note": "with ***"}
