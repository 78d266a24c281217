"""The skill library against the real stack (tests/integration/conftest.py): a disabled
skill is refused before anything is recorded, delete is refused while other skills refer
to the skill and then soft-deletes it, the freed name serves a new skill while the old
history stays apart, default skills are reconciled, and a vault archive carries folders
and history from one database into a fresh one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import RunResult, Stack
from sqlalchemy import create_engine, select, update
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool
from support.databases import fresh_database

from orchestrator.archive.tables import TABLES, artifact_keys, encode_row
from orchestrator.defaults import DEFAULTS_VERSION, shipped_folders
from orchestrator.library import repo
from orchestrator.library.dependents import find_dependents
from orchestrator.library.history import runs_of
from shared.db.library_models import LibrarySkill
from shared.db.models import Artifact, PipelineRun
from shared.folderhash import hash_folder
from shared.vault import load_vault

pytestmark = pytest.mark.integration

RunSkill = Callable[..., RunResult]


def authored_hash(folder: Path) -> str:
    return hash_folder(folder, authored=True)  # what the defaults and archives compare


def library_rows(stack: Stack, vault: Path, slug: str) -> list[LibrarySkill]:
    with stack.db() as session:
        rows = list(session.scalars(select(LibrarySkill).where(
            LibrarySkill.vault == str(vault.resolve()), LibrarySkill.slug == slug)
            .order_by(LibrarySkill.created_at)).all())
        session.expunge_all()
        return rows


def runs_in(stack: Stack, vault: Path) -> list[PipelineRun]:
    with stack.db() as session:
        rows = list(session.scalars(select(PipelineRun).where(
            PipelineRun.vault == str(vault.resolve()))).all())
        session.expunge_all()
        return rows


def test_a_disabled_skill_and_its_callers_are_refused_before_any_record(
        healthy: Stack, run_skill: RunSkill, vault: Path, tmp_path: Path) -> None:
    # `outer` reaches echo only through `inner`: the check follows callees at any depth.
    (vault / "outer").mkdir()
    (vault / "outer" / "SKILL.md").write_text(
        "---\nname: outer\ndescription: Calls inner only. Use it to test depth.\nsteps:\n"
        "  - id: wrap\n    skill: inner\n    with:\n      words: [a]\n---\n\nWraps inner.\n")
    refused = healthy.cli("disable", "echo", "--vault", str(vault), cwd=tmp_path)
    assert refused.returncode == 1 and "--force" in refused.stderr, refused.stderr
    assert healthy.cli("disable", "echo", "--force", "--vault", str(vault),
                       cwd=tmp_path).returncode == 0

    leaf = run_skill("echo", vault, inputs={"text": "hi"})
    assert leaf.code == 1 and leaf.run_id is None, leaf
    assert "'echo' is disabled" in leaf.stderr and "skillq enable echo" in leaf.stderr
    assert "Traceback" not in leaf.stderr
    deep = run_skill("outer", vault)
    assert deep.code == 1 and deep.run_id is None, deep
    assert "'echo' is disabled (called by 'inner' step shout)" in deep.stderr, deep
    assert runs_in(healthy, vault) == []  # no run at all, nested ones included

    listed = healthy.cli("list", "--vault", str(vault), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    echo_row = next(line.split() for line in listed.stdout.splitlines()
                    if line.split()[:1] == ["echo"])
    assert "disabled" in echo_row, echo_row
    catalog = healthy.cli("catalog", "--vault", str(vault), cwd=tmp_path).stdout
    assert "echo:" not in catalog and "stamp:" in catalog

    assert healthy.cli("enable", "echo", "--vault", str(vault), cwd=tmp_path).returncode == 0
    again = run_skill("echo", vault, "--json", inputs={"text": "hi"})
    assert again.code == 0 and again.json() == {"text": "hi"}, again


def test_delete_names_dependents_then_frees_the_name_and_keeps_history(
        healthy: Stack, run_skill: RunSkill, vault: Path, tmp_path: Path) -> None:
    old_run = run_skill("echo", vault, inputs={"text": "old"})
    assert old_run.code == 0 and old_run.run_id, old_run
    assert healthy.cli("pin", "echo", "--vault", str(vault), cwd=tmp_path).returncode == 0

    referrers = {r.skill for r in find_dependents(load_vault(vault), "echo")}
    assert referrers == {"branches", "continue-single", "empty-fan", "inner", "nested",
                         "slow-chain"}
    refused = healthy.cli("delete", "echo", "--vault", str(vault), cwd=tmp_path)
    assert refused.returncode == 1, refused
    for name in referrers:
        assert f"{name} (step " in refused.stderr, (name, refused.stderr)
    assert (vault / "echo" / "SKILL.md").is_file() and not library_rows(
        healthy, vault, "echo")[0].deleted_at

    forced = healthy.cli("delete", "echo", "--force", "--vault", str(vault), cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert not (vault / "echo").exists()
    [archived] = (vault / ".deleted").iterdir()
    assert archived.name.startswith("echo-") and (archived / "echo.py").is_file()
    assert "echo" not in load_vault(vault).skills

    # A new skill takes the name: it runs, and each history stays with its own skill.
    (vault / "echo").mkdir()
    for name in ("SKILL.md", "echo.py"):
        (vault / "echo" / name).write_bytes((archived / name).read_bytes())
    new_run = run_skill("echo", vault, inputs={"text": "new"})
    assert new_run.code == 0 and new_run.run_id, new_run
    assert healthy.cli("label", "echo", "Echo Two", "--vault", str(vault),
                       cwd=tmp_path).returncode == 0
    show = healthy.cli("show", "echo", "--vault", str(vault), cwd=tmp_path).stdout
    assert show.startswith("Echo Two (echo)") and "pinned" not in show.splitlines()[0]

    tomb, live = library_rows(healthy, vault, "echo")
    assert tomb.name is None and tomb.deleted_at and tomb.pinned_order is None
    assert tomb.archived_path == f".deleted/{archived.name}"
    assert live.name == "echo" and live.label == "Echo Two" and live.deleted_at is None
    with healthy.db() as session:
        assert [r.id for r in runs_of(session, tomb)] == [old_run.run_id]
        assert [r.id for r in runs_of(session, live)] == [new_run.run_id]


def test_defaults_install_leave_edits_alone_and_update_untouched_ones(
        healthy: Stack, run_skill: RunSkill, tmp_path: Path) -> None:
    vault = tmp_path / "fresh"
    vault.mkdir()
    first = healthy.cli("defaults", "--vault", str(vault), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    shipped = shipped_folders()
    assert f"{len(shipped)} installed" in first.stdout
    assert load_vault(vault).valid and set(load_vault(vault).skills) == set(shipped)

    (vault / "text-stats" / "SKILL.md").write_text(
        (vault / "text-stats" / "SKILL.md").read_text() + "\nMy own note.\n")
    # What an older skillq would have left: older content, its hash in the row.
    old_md = vault / "csv-to-json" / "SKILL.md"
    old_md.write_text(old_md.read_text().replace("Fields stay strings", "Fields are text"))
    with healthy.db() as session:
        session.execute(update(LibrarySkill).where(
            LibrarySkill.vault == str(vault.resolve()), LibrarySkill.name == "csv-to-json")
            .values(default_hash=authored_hash(vault / "csv-to-json"),
                    default_version=DEFAULTS_VERSION - 1))
    assert healthy.cli("delete", "http-fetch", "--vault", str(vault),
                       cwd=tmp_path).returncode == 0

    second = healthy.cli("defaults", "--vault", str(vault), cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    lines = dict(line.split(": ", 1) for line in second.stdout.splitlines() if ": " in line)
    assert lines["text-stats"].startswith("left alone (edited since it was installed")
    assert lines["csv-to-json"].startswith("updated")
    assert lines["http-fetch"].startswith("left alone (you deleted it")
    assert "My own note." in (vault / "text-stats" / "SKILL.md").read_text()
    assert authored_hash(vault / "csv-to-json") == authored_hash(shipped["csv-to-json"])
    assert not (vault / "http-fetch").exists()
    assert not [p for p in vault.iterdir() if p.name.startswith((".installing", ".replaced"))]
    # The updated default is a working skill, through the real queues.
    parsed = run_skill("csv-to-json", vault, "--json", inputs={"text": "a,b\n1,2\n"})
    assert parsed.code == 0, parsed
    assert parsed.json() == {"columns": ["a", "b"], "rows": [{"a": "1", "b": "2"}], "count": 1}


# -- export and import -------------------------------------------------------------------

def snapshot(url: str, vault: Path, run_ids: set[str]) -> dict[str, list[dict[str, Any]]]:
    """Every archived table's rows for these runs and this vault, as JSON-ready dicts
    (vault columns left out: they name the vault the history lives in)."""
    engine = create_engine(url, poolclass=NullPool)
    found: dict[str, list[dict[str, Any]]] = {}
    try:
        with Session(engine) as session:
            keys = set()
            for spec in TABLES:
                table = spec.table
                if table.name == "pipeline_runs":
                    query = select(table).where(table.c.id.in_(run_ids))
                elif table.name == "step_runs":
                    query = select(table).where(table.c.run_id.in_(run_ids))
                elif table.name == "artifacts":
                    query = select(table).where(table.c.key.in_(keys))
                elif table.name == "library_skills":
                    query = select(table).where(table.c.vault == str(vault.resolve()))
                else:
                    continue
                rows = [encode_row(table, r) for r in session.execute(query).mappings()]
                for row in rows:
                    row.pop(spec.vault_column or "", None)
                    keys.update(artifact_keys(row))
                found[table.name] = sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))
    finally:
        engine.dispose()
    return found


def test_export_and_import_carry_folders_and_history_into_a_fresh_database(
        healthy: Stack, run_skill: RunSkill, vault: Path, tmp_path: Path) -> None:
    big = run_skill("big-pipe", vault, inputs={"size": 5000})  # outputs go by reference
    echo = run_skill("echo", vault, inputs={"text": "kept"})
    assert big.code == 0 and echo.code == 0, (big, echo)
    with healthy.db() as session:  # the repository functions the dashboard will call
        key = repo.vault_key(vault)
        repo.pin(session, key, "big-pipe")
        repo.set_label(session, key, "echo", "Echo")
        repo.set_enabled(session, key, "stamp", False)
    run_ids = {r.id for r in runs_in(healthy, vault)}
    assert {big.run_id, echo.run_id} <= run_ids
    before = snapshot(healthy.endpoints.database_url, vault, run_ids)
    assert len(before["pipeline_runs"]) == len(run_ids) and before["step_runs"]
    assert before["artifacts"], "big-pipe's blob should travel by reference"
    assert len(before["library_skills"]) == 3

    archive = tmp_path / "vault.tar.gz"
    exported = healthy.cli("export", "--archive", str(archive), "--vault", str(vault),
                           cwd=tmp_path)
    assert exported.returncode == 0 and archive.is_file(), exported.stderr

    target = tmp_path / "restored"
    with fresh_database(healthy.endpoints.database_url, "import") as url:
        env = {"SKILLQ_DATABASE_URL": url}
        first = healthy.cli("import", str(archive), "--vault", str(target), cwd=tmp_path,
                            env=env)
        assert first.returncode == 0, first.stderr
        after = snapshot(url, target, run_ids)
        assert after == before
        assert {p.name: authored_hash(p) for p in load_vault(target).folders} == \
            {p.name: authored_hash(p) for p in load_vault(vault).folders}
        assert (target / "big" / "big.py").read_bytes() == (vault / "big" / "big.py").read_bytes()
        with Session(create_engine(url, poolclass=NullPool)) as session:
            assert session.scalar(select(PipelineRun.vault).where(
                PipelineRun.id == echo.run_id)) == str(target.resolve())
            stored = session.scalars(select(Artifact.key)).all()
            assert set(stored) >= {a["key"] for a in before["artifacts"]}

        again = healthy.cli("import", str(archive), "--vault", str(target), cwd=tmp_path,
                            env=env)
        assert again.returncode == 0, again.stderr
        assert f"pipeline_runs: 0 added, {len(run_ids)} already there" in again.stdout, \
            again.stdout
        assert snapshot(url, target, run_ids) == before

        (target / "echo" / "echo.py").write_text("# changed by hand\n")
        clash = healthy.cli("import", str(archive), "--vault", str(target), cwd=tmp_path,
                            env=env)
        assert clash.returncode == 1 and "echo" in clash.stderr and "--force" in clash.stderr
        assert (target / "echo" / "echo.py").read_text() == "# changed by hand\n"
        forced = healthy.cli("import", str(archive), "--force", "--vault", str(target),
                             cwd=tmp_path, env=env)
        assert forced.returncode == 0, forced.stderr
        assert (target / "echo" / "echo.py").read_bytes() == \
            (vault / "echo" / "echo.py").read_bytes()
        [kept] = (target / ".replaced").iterdir()
        assert (kept / "echo.py").read_text() == "# changed by hand\n"


def test_import_refuses_what_is_not_a_skillq_archive(healthy: Stack, tmp_path: Path) -> None:
    import tarfile

    bogus = tmp_path / "bogus.tar.gz"
    (tmp_path / "evil.txt").write_text("x")
    with tarfile.open(bogus, "w:gz") as tar:
        tar.add(tmp_path / "evil.txt", "../evil.txt")
    run = healthy.cli("import", str(bogus), "--vault", str(tmp_path / "v"), cwd=tmp_path)
    assert run.returncode == 1 and "not a skillq vault archive" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    assert not (tmp_path / "v").exists() or not any((tmp_path / "v").iterdir())
