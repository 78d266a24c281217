"""Publish, versions, pins, rollback and bench for real: the `skillq` CLI against the
embedded PostgreSQL and Redis and real Celery workers (tests/integration/conftest.py),
checked on the CLI's output AND on the records and files.

The skills are tests/integration/vaults/publish: ``greet`` (its output shows which
version's greeting.txt ran), ``greet-both`` (one step pinned to ``greet@1``, one on the
latest) and ``greet-lib`` (its output shows whether its imported wording.py ran, or a
.pyc beside it). Published versions are kept per skill name in the shared database, so
each test renames the skills with a fresh suffix.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import HOST, VAULTS, RunResult, Stack, copy_vault
from sqlalchemy import select

from shared.db.models import Artifact, StepRun
from shared.db.publish_models import PublishedVersion
from shared.folderhash import fingerprints, folder_files, folder_hash

pytestmark = pytest.mark.integration

RunSkill = Callable[..., RunResult]


def renamed_vault(dest: Path) -> tuple[Path, str]:
    """A copy of the publish vault with ``greet`` renamed ``greet-<tag>`` everywhere."""
    name = f"greet-{uuid.uuid4().hex[:8]}"
    vault = copy_vault(VAULTS / "publish", dest)
    for folder in ("greet", "greet-both", "greet-lib"):
        for path in (vault / folder).iterdir():
            text = path.read_text()
            for old in ("name: greet", "skill: greet", '"skill": "greet', '"skill_id": "greet'):
                text = text.replace(old, old.replace("greet", name))
            path.write_text(text)
        (vault / folder).rename(vault / folder.replace("greet", name))
    return vault, name


def edit(path: Path, text: str) -> None:
    """What a user does to change a published (read-only) file by hand."""
    path.chmod(0o644)
    path.write_text(text)


def publish(stack: Stack, vault: Path, name: str, cwd: Path) -> str:
    proc = stack.cli("publish", name, "--vault", str(vault), cwd=cwd)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def row(stack: Stack, name: str, version: int) -> PublishedVersion:
    with stack.db() as session:
        found = session.get(PublishedVersion, (name, version))
        assert found is not None, f"no published_versions row {name} v{version}"
        session.expunge(found)
        return found


def test_publish_then_a_hand_edit_is_a_draft_production_runs_the_published_files(
        healthy: Stack, run_skill: RunSkill, tmp_path: Path) -> None:
    vault, name = renamed_vault(tmp_path / "vault")
    folder = vault / name
    stdout = publish(healthy, vault, name, tmp_path)
    assert f"published {name} v1" in stdout and "1 test case(s) passed" in stdout

    # The record: every content file's hash, the folder hash, provenance, the bytes.
    v1 = row(healthy, name, 1)
    on_disk = {p: f.sha256 for p, f in folder_files(folder).items()}
    assert {p: f["sha256"] for p, f in v1.files.items()} == on_disk
    # benchmarks.json by its test cases: the version holds them, not its run window.
    assert sorted(on_disk) == ["SKILL.md", "benchmarks.json", "greet.py", "greeting.txt"]
    assert v1.folder_hash == folder_hash(fingerprints(folder_files(folder)))
    assert (v1.published_by, v1.published_host) == (getpass.getuser(), HOST)
    assert v1.tests_passed is True and v1.manifest["version"] == 1
    assert v1.skill_md == (folder / "SKILL.md").read_text()
    with healthy.db() as session:
        stored = {a.key: a.content for a in session.scalars(
            select(Artifact).where(Artifact.key.in_(list(on_disk.values()))))}
    bench = json.loads((folder / "benchmarks.json").read_text())
    assert bench["runs"], "the test run's window is in the file"
    assert json.loads(stored.pop(on_disk["benchmarks.json"])) == \
        {"skill": name, "tests": bench["tests"]}
    assert stored == {on_disk[p]: (folder / p).read_bytes() for p in on_disk
                      if p != "benchmarks.json"}
    for path in (folder / "greet.py", folder / "greeting.txt", folder / "SKILL.md"):
        assert not path.stat().st_mode & 0o222, f"{path} is still writable"

    ok = run_skill(name, vault, "--json", inputs={"who": "ada"})
    assert ok.code == 0, ok
    assert ok.json() == {"text": "hello ada"}

    edit(folder / "greeting.txt", "howdy\n")
    # A draft waits for its publish (issue 43): production keeps running v1 as published,
    # rebuilt from the shared store; `skillq try` runs the draft.
    ran = run_skill(name, vault, "--json", inputs={"who": "grace"})
    assert ran.code == 0, ran
    assert ran.json() == {"text": "hello grace"}, ran
    [attempt] = healthy.steps(ran.run_id or "")
    assert (attempt.state, attempt.version) == ("succeeded", 1)
    assert (folder / "greeting.txt").read_text() == "howdy\n"  # the worker changed nothing

    listing = healthy.cli("versions", name, "--vault", str(vault), cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    assert re.search(rf"^1\t.*\t{re.escape(v1.folder_hash)}\t", listing.stdout, re.M), \
        listing.stdout
    assert "a draft of v1 (greeting.txt changed)" in listing.stderr  # not a row

    # A failing test case refuses the publish and leaves the manifest as it was.
    bench = json.loads((folder / "benchmarks.json").read_text())
    bench["tests"][0]["expected"]["output_contains"] = ["hello"]
    (folder / "benchmarks.json").write_text(json.dumps(bench))
    skill_md = (folder / "SKILL.md").read_bytes()
    failed = healthy.cli("publish", name, "--vault", str(vault), cwd=tmp_path)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "1 of 1 test case(s) failed (greets:" in failed.stderr, failed.stderr
    assert (folder / "SKILL.md").read_bytes() == skill_md
    with healthy.db() as session:
        assert session.get(PublishedVersion, (name, 2)) is None


def test_pinned_step_runs_v1_from_the_store_then_rollback_and_bench(
        healthy: Stack, run_skill: RunSkill, tmp_path: Path) -> None:
    vault, name = renamed_vault(tmp_path / "vault")
    folder = vault / name
    publish(healthy, vault, name, tmp_path)
    edit(folder / "greeting.txt", "howdy\n")
    stdout = publish(healthy, vault, name, tmp_path)
    assert f"published {name} v2" in stdout
    assert "version: 2\n" in (folder / "SKILL.md").read_text()

    both = run_skill(f"{name}-both", vault, "--json", inputs={"who": "ada"})
    assert both.code == 0, both
    assert both.json() == {"pinned": "hello ada", "latest": "howdy ada"}
    ran = {s.step_id: s.version for s in healthy.steps(both.run_id or "")}
    assert ran == {"pinned": 1, "latest": 2}
    copy = healthy.home / "published" / name / "1" / name
    assert (copy / "greeting.txt").read_text() == "hello\n"
    assert not (copy / "greeting.txt").stat().st_mode & 0o222
    assert folder_hash(fingerprints(folder_files(copy))) == row(healthy, name, 1).folder_hash

    bench = healthy.cli("bench", name, "--compare", "1", "2", "--vault", str(vault),
                        cwd=tmp_path)
    assert bench.returncode == 0, bench.stderr
    for label in ("v1", "v2", "v1→v2"):
        assert re.search(rf"^{re.escape(label)}\t", bench.stdout, re.M), bench.stdout

    back = healthy.cli("rollback", name, "--to", "1", "--vault", str(vault), cwd=tmp_path)
    assert back.returncode == 0, back.stdout + back.stderr
    assert f"published {name} v3 (rollback of v1)" in back.stdout
    v1, v3 = row(healthy, name, 1), row(healthy, name, 3)
    assert v3.rolled_back_from == 1
    assert {p: f["sha256"] for p, f in v3.files.items() if p != "SKILL.md"} == \
        {p: f["sha256"] for p, f in v1.files.items() if p != "SKILL.md"}
    assert (folder / "greeting.txt").read_text() == "hello\n"
    assert "version: 3\n" in (folder / "SKILL.md").read_text()
    again = run_skill(name, vault, "--json", inputs={"who": "bo"})
    assert again.code == 0, again
    assert again.json() == {"text": "hello bo"}
    assert [s.version for s in healthy.steps(again.run_id or "")] == [3]

    listing = healthy.cli("versions", name, "--vault", str(vault), cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    assert "rollback of v1" in listing.stdout
    assert "the published files" in listing.stderr
    with healthy.db() as session:
        runs_v1 = session.scalars(select(StepRun.id).where(
            StepRun.skill == name, StepRun.version == 1)).all()
    # v1's test case at its publish, and the pinned step.
    assert len(runs_v1) == 2, runs_v1
    assert v3.manifest["version"] == 3


def test_a_hand_edited_published_orchestrator_runs_as_published_until_its_publish(
        healthy: Stack, run_skill: RunSkill, tmp_path: Path) -> None:
    # An orchestrator is planned by the client, not run by a worker: `skillq run` itself
    # checks a published orchestrator's folder, and plans a draft's published version.
    vault, name = renamed_vault(tmp_path / "vault")
    publish(healthy, vault, name, tmp_path)
    both = f"{name}-both"
    publish(healthy, vault, both, tmp_path)
    manifest = vault / both / "SKILL.md"
    text = manifest.read_text()
    latest = f"  - id: latest\n    skill: {name}\n    with:\n      who: "
    draft = text.replace(latest + "${inputs.who}", latest + "nobody")
    assert draft != text
    edit(manifest, draft)
    ran = run_skill(both, vault, "--json", inputs={"who": "ada"})
    assert ran.code == 0, ran
    assert ran.json() == {"pinned": "hello ada", "latest": "hello ada"}, ran
    tried = healthy.cli("try", both, "--input", "who=ada", "--json", "--vault", str(vault),
                        cwd=tmp_path, timeout_s=180)
    assert tried.returncode == 0, tried.stdout + tried.stderr
    assert json.loads(tried.stdout)["outputs"] == {"pinned": "hello ada",
                                                   "latest": "hello nobody"}
    assert manifest.read_text() == draft


def test_rollback_brings_back_the_versions_test_cases_and_keeps_the_run_history(
        healthy: Stack, run_skill: RunSkill, tmp_path: Path) -> None:
    vault, name = renamed_vault(tmp_path / "vault")
    folder = vault / name
    publish(healthy, vault, name, tmp_path)
    v1_tests = json.loads((folder / "benchmarks.json").read_text())["tests"]

    # v2: new code and test cases that only the new code passes.
    edit(folder / "greeting.txt", "howdy\n")
    bench = json.loads((folder / "benchmarks.json").read_text())
    bench["tests"][0]["expected"]["output_contains"] = ["howdy ada"]
    (folder / "benchmarks.json").write_text(json.dumps(bench, indent=2))
    assert f"published {name} v2" in publish(healthy, vault, name, tmp_path)
    history = json.loads((folder / "benchmarks.json").read_text())["runs"]
    assert len(history) == 2  # each publish ran its test case

    back = healthy.cli("rollback", name, "--to", "1", "--vault", str(vault), cwd=tmp_path)
    assert back.returncode == 0, back.stdout + back.stderr
    assert f"published {name} v3 (rollback of v1)" in back.stdout
    assert "tests: as tested for v1" in back.stdout
    # v1's code with v1's test cases: they pass, as they did when v1 was published.
    tested = healthy.cli("test", name, "--vault", str(vault), cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    restored = json.loads((folder / "benchmarks.json").read_text())
    assert restored["tests"] == v1_tests
    assert restored["runs"][:2] == history  # the run window is carried over
    v1, v2, v3 = (row(healthy, name, v).files["benchmarks.json"] for v in (1, 2, 3))
    assert v1 == v3 != v2
    listing = healthy.cli("versions", name, "--vault", str(vault), cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    assert "v3, the published files" in listing.stderr, listing.stderr

    # A hand edit of a published version's test cases makes it a draft.
    restored["tests"][0]["expected"]["output_contains"] = ["bo"]
    (folder / "benchmarks.json").write_text(json.dumps(restored))
    listing = healthy.cli("versions", name, "--vault", str(vault), cwd=tmp_path)
    assert "a draft of v3 (benchmarks.json changed)" in listing.stderr, listing.stderr
    ran = run_skill(name, vault, "--json", inputs={"who": "dee"})  # v3 as published
    assert ran.code == 0 and ran.json() == {"text": "hello dee"}, ran


def test_rollback_to_a_version_published_before_versions_held_test_cases_keeps_the_cases(
        healthy: Stack, tmp_path: Path) -> None:
    vault, name = renamed_vault(tmp_path / "vault")
    folder = vault / name
    publish(healthy, vault, name, tmp_path)
    with healthy.db() as session:  # what an older skillq recorded: no test cases
        v1 = session.get(PublishedVersion, (name, 1))
        assert v1 is not None
        v1.files = {p: f for p, f in v1.files.items() if p != "benchmarks.json"}
    edit(folder / "greeting.txt", "howdy\n")
    publish(healthy, vault, name, tmp_path)
    tests = json.loads((folder / "benchmarks.json").read_text())["tests"]
    back = healthy.cli("rollback", name, "--to", "1", "--vault", str(vault), cwd=tmp_path)
    assert back.returncode == 0, back.stdout + back.stderr
    assert "v1 holds no test cases, so the folder's were kept" in back.stdout
    assert json.loads((folder / "benchmarks.json").read_text())["tests"] == tests


FORGE = """
import importlib.util, py_compile, sys
source, forged = sys.argv[1:]
# An unchecked-hash .pyc: Python runs it without ever looking at the .py.
print(py_compile.compile(forged, cfile=importlib.util.cache_from_source(source), dfile=source,
      doraise=True, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH))
"""


def forge_pyc(stack: Stack, source: Path, text: str, tmp_path: Path) -> str:
    """A real .pyc compiled from ``text`` by the skill's own interpreter (``python3`` on
    the workers' PATH) into ``source``'s __pycache__, newer than ``source``; its path
    relative to the skill folder."""
    forged = tmp_path / "forged" / source.name
    forged.parent.mkdir(exist_ok=True)
    forged.write_text(text)
    proc = subprocess.run(["python3", "-I", "-c", FORGE, str(source), str(forged)],
                          env={"PATH": stack.env["PATH"], "HOME": str(tmp_path)},
                          cwd=tmp_path, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    cache = Path(proc.stdout.strip())
    later = source.stat().st_mtime + 5
    os.utime(cache, (later, later))
    return cache.relative_to(source.parent).as_posix()


def test_bytecode_beside_a_skills_sources_never_runs(
        healthy: Stack, run_skill: RunSkill, tmp_path: Path) -> None:
    vault, greet = renamed_vault(tmp_path / "vault")
    name = f"{greet}-lib"
    folder = vault / name
    forged = "WORD = 'forged'\n"

    # Never published: it runs as it is, and what runs is wording.py, not the .pyc.
    cache = forge_pyc(healthy, folder / "wording.py", forged, tmp_path)
    assert cache.startswith("__pycache__/wording.")
    ran = run_skill(name, vault, "--json", inputs={"who": "ada"})
    assert ran.code == 0, ran
    assert ran.json() == {"text": "hello ada"}
    assert [p.name for p in (folder / "__pycache__").iterdir()] == [Path(cache).name]

    # Published, then a .pyc appears: the folder has changed, and says so.
    for path in (folder / "__pycache__").iterdir():
        path.unlink()
    (folder / "__pycache__").rmdir()
    publish(healthy, vault, name, tmp_path)
    assert forge_pyc(healthy, folder / "wording.py", forged, tmp_path) == cache
    # Production runs v1's published files, rebuilt from the store: no .pyc among them.
    ran = run_skill(name, vault, "--json", inputs={"who": "bo"})
    assert ran.code == 0, ran
    assert ran.json() == {"text": "hello bo"}, ran
    listing = healthy.cli("versions", name, "--vault", str(vault), cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    assert f"a draft of v1 ({cache} added)" in listing.stderr, listing.stderr


def test_making_a_published_script_executable_is_a_change(
        healthy: Stack, run_skill: RunSkill, tmp_path: Path) -> None:
    vault, name = renamed_vault(tmp_path / "vault")
    script = vault / name / "greet.py"
    publish(healthy, vault, name, tmp_path)
    assert not row(healthy, name, 1).files["greet.py"]["executable"]
    script.chmod(script.stat().st_mode | 0o111)
    listing = healthy.cli("versions", name, "--vault", str(vault), cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    assert "a draft of v1 (greet.py made executable)" in listing.stderr, listing.stderr
    ran = run_skill(name, vault, "--json", inputs={"who": "cy"})  # v1 as published
    assert ran.code == 0 and ran.json() == {"text": "hello cy"}, ran
    # Published as it is now, the bit is part of v2.
    edit(vault / name / "greeting.txt", "howdy\n")
    publish(healthy, vault, name, tmp_path)
    assert row(healthy, name, 2).files["greet.py"]["executable"]
    ok = run_skill(name, vault, "--json", inputs={"who": "bo"})
    assert ok.code == 0 and ok.json() == {"text": "howdy bo"}, ok


def test_try_runs_a_draft_as_the_test_window_and_leaves_the_published_version_alone(
        healthy: Stack, run_skill: RunSkill, tmp_path: Path) -> None:
    """`skillq try` (issue 43, the test window): a hand-edited published skill runs as
    edited, recorded as test_window; v1 and the production success rate are untouched."""
    from shared.attempt_id import AttemptId
    from shared.db.models import PipelineRun, SkillStats

    vault, name = renamed_vault(tmp_path / "vault")
    folder = vault / name
    publish(healthy, vault, name, tmp_path)
    assert run_skill(name, vault, "--json", inputs={"who": "ada"}).code == 0
    v1 = row(healthy, name, 1)
    with healthy.db() as session:
        before = session.get(SkillStats, (name, "step"))
        assert before is not None
        prod = (before.prod_runs, before.prod_successes)

    edit(folder / "greeting.txt", "howdy\n")
    tried = healthy.cli("try", name, "--input", "who=ada", "--json", "--vault", str(vault),
                        cwd=tmp_path, timeout_s=180)
    assert tried.returncode == 0, tried.stdout + tried.stderr
    result = json.loads(tried.stdout)
    assert result["outputs"] == {"text": "howdy ada"}, result
    with healthy.db() as session:
        run = session.get(PipelineRun, result["run_id"])
        assert run is not None
        assert (run.source, run.triggered_by) == ("test_window", "try")
        after = session.get(SkillStats, (name, "step"))
        assert after is not None and (after.prod_runs, after.prod_successes) == prod
    assert row(healthy, name, 1).folder_hash == v1.folder_hash
    runs = json.loads((folder / "benchmarks.json").read_text())["runs"]
    # a leaf's entries are its attempts (shared/attempt_id.py)
    assert any(r.get("source") == "test_window"
               and AttemptId.parse(r["run_id"]).run_id == result["run_id"] for r in runs), runs
