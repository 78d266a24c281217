"""`skillq publish NAME`: validate, test, number, record and lock a skill's folder.

The order keeps a failure harmless:
1. the skill and every skill it calls validate, and every ``NAME@V`` pin it holds names
   a published version;
2. its folder is read once (the bytes stored are the bytes hashed); a folder identical
   to its published version publishes nothing;
3. the new version number (one past the highest published, or the manifest's own
   number when that is higher) is written into the manifest atomically, so the tests
   run, and are recorded, as that version;
4. its test cases run through the real queues (source ``test_window``) and must all
   pass;
5. the folder is read again: it must be byte for byte what was tested;
6. the version row and every file's bytes are stored in one transaction;
7. the folder is made read-only.
A failure in 3-6 puts the manifest file back as it was: nothing is half-published.
"""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from orchestrator.connect import Connection
from orchestrator.submit import checked
from orchestrator.testing import run_tests
from shared.atomic import write_text
from shared.db.publish_models import PublishedVersion
from shared.db.session import transaction
from shared.errors import PublishError
from shared.folderhash import changes
from shared.published import (
    HASH_SCHEME,
    Snapshot,
    file_records,
    files_of,
    get_version,
    latest_version,
    snapshot,
    store_files,
)
from shared.readonly import make_read_only, make_writable
from shared.skill import Skill, load_skill
from shared.vault import Vault, forget_vaults, load_vault
from shared.versionline import VersionEdit, VersionLineError, version_edit

StatusFn = Callable[[str], None]


@dataclass(frozen=True)
class Published:
    skill: str
    version: int
    folder_hash: str
    files: int
    tests: str  # what the tests said, for the user
    unchanged: bool = False  # the folder already was this published version
    rolled_back_from: int | None = None


def who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container's arbitrary uid)
        return f"uid {os.getuid()}"


def sub_skills(skill: Skill, vault: Vault) -> list[dict[str, Any]]:
    """The callees as they were at publish time: name, pin, and the vault's version."""
    seen: dict[tuple[str, int | None], dict[str, Any]] = {}
    for step in skill.manifest.calling_steps:
        callee = vault.skills.get(step.skill_name)
        seen.setdefault((step.skill_name, step.skill_version), {
            "skill": step.skill_name, "pinned": step.skill_version,
            "version": callee.manifest.version if callee else None})
    return list(seen.values())


def check_pins(session: Session, skill: Skill) -> None:
    for step in skill.manifest.steps or ():
        pin = step.skill_version
        if pin is not None and get_version(session, step.skill_name, pin) is None:
            raise PublishError(f"{skill.skill_md}: step '{step.id}' pins {step.skill}, but "
                               f"{step.skill_name} v{pin} was never published; publish it or "
                               "remove the pin (`skillq versions "
                               f"{step.skill_name}` lists its versions)")


def record(session: Session, *, skill: Skill, snap: Snapshot, version: int, vault: Vault,
           tests_passed: bool | None, rolled_back_from: int | None = None) -> None:
    """Insert the version row and store the files; PublishError when that version was
    published meanwhile (two publishes at once)."""
    store_files(session, snap)
    md = skill.skill_md.relative_to(skill.folder).as_posix()
    session.add(PublishedVersion(
        skill=skill.name, version=version, folder_hash=snap.folder_hash,
        files=file_records(snap), skill_md=snap.contents[md].decode("utf-8"),
        manifest=skill.manifest.model_dump(mode="json", by_alias=True),
        sub_skills=sub_skills(skill, vault), published_by=who(),
        published_host=socket.gethostname(), published_from=str(skill.folder.resolve()),
        tests_passed=tests_passed, rolled_back_from=rolled_back_from,
        hash_scheme=HASH_SCHEME))
    try:
        session.flush()
    except IntegrityError:
        raise PublishError(f"{skill.name} v{version} was published by someone else just now; "
                           "run the command again") from None


def reload(folder: Path, version: int) -> Skill:
    skill, problems = load_skill(folder)
    if skill is None or skill.manifest.version != version or problems:
        detail = "; ".join(str(p) for p in problems) or "it does not declare the new version"
        raise PublishError(f"{folder}: after writing version {version}: {detail}")
    return skill


class ManifestWrite:
    """One atomic write of the version file that can be undone."""

    def __init__(self, edit: VersionEdit) -> None:
        self.edit = edit
        self.before = None if edit.created else edit.path.read_bytes()
        self.mode = None if edit.created else edit.path.stat().st_mode & 0o7777

    def apply(self) -> None:
        write_text(self.edit.path, self.edit.text)
        if self.mode is not None:  # keep the file's permissions (mkstemp makes 0600)
            self.edit.path.chmod(self.mode | 0o200)

    def undo(self) -> None:
        if self.before is None:
            self.edit.path.unlink(missing_ok=True)
            return
        write_text(self.edit.path, self.before.decode("utf-8"))  # it loaded, so UTF-8
        if self.mode is not None:
            self.edit.path.chmod(self.mode)


def _tests(conn: Connection, vault: Vault, skill: Skill, status: StatusFn) -> tuple[bool | None,
                                                                                   str]:
    cases = skill.benchmarks.tests if skill.benchmarks is not None else ()
    if not cases:
        return None, "no test cases (published untested)"
    status(f"running {len(cases)} test case(s) of {skill.name}")
    report = run_tests(conn, vault, skill)
    if not report.passed:
        failed = "; ".join(f"{c.test_id}: {', '.join(c.problems)}" for c in report.failed)
        raise PublishError(f"{skill.name} not published: {len(report.failed)} of "
                           f"{len(report.cases)} test case(s) failed ({failed}); "
                           f"`skillq test {skill.name}` shows them")
    return True, f"{len(report.cases)} test case(s) passed"


def publish(conn: Connection, vault: Vault, name: str, *,
            status: StatusFn = lambda _: None) -> Published:
    skill = vault.get(name)
    status(f"validating {name} and the skills it calls")
    checked(vault, skill)
    snap = snapshot(skill.folder)
    if snap.symlinks:
        raise PublishError(f"{skill.folder}: symbolic links cannot be published "
                           f"({', '.join(snap.symlinks)}); replace each with the file itself")
    url = conn.endpoints.database_url
    with transaction(url) as session:
        check_pins(session, skill)
        latest = latest_version(session, name)
        current = get_version(session, name, skill.manifest.version)
        same = current is not None and not changes(files_of(current).fingerprints,
                                                   snap.fingerprints)
    if same:
        make_read_only(skill.folder, keep_root_writable=True)
        return Published(name, skill.manifest.version, snap.folder_hash, len(snap.files),
                         "not run (nothing changed)", unchanged=True)
    version = max(latest + 1, skill.manifest.version)
    make_writable(skill.folder)
    try:
        write = ManifestWrite(version_edit(skill, version)) \
            if version != skill.manifest.version else None
    except VersionLineError as exc:
        raise PublishError(f"cannot write the new version: {exc}") from None
    try:
        if write is not None:
            write.apply()
        # Tested as the new version: its test runs are recorded as v{version}, and a
        # version nobody published yet runs as it is (workers/published.py).
        forget_vaults()
        fresh = load_vault(vault.root)
        numbered = reload(skill.folder, version)
        checked(fresh, fresh.get(name))
        before = snapshot(skill.folder)
        tests_passed, tests = _tests(conn, fresh, fresh.get(name), status)
        status(f"publishing {name} v{version}")
        after = snapshot(skill.folder)
        moved = changes(before.fingerprints, after.fingerprints)
        if moved:
            raise PublishError(f"{skill.folder} changed while its tests ran ("
                               + "; ".join(str(c) for c in moved) + "); publish again")
        with transaction(url) as session:
            record(session, skill=numbered, snap=after, version=version, vault=fresh,
                   tests_passed=tests_passed)
    except BaseException:
        if write is not None:
            write.undo()
        raise
    finally:
        forget_vaults()
    make_read_only(skill.folder, keep_root_writable=True)
    return Published(name, version, after.folder_hash, len(after.files), tests)
