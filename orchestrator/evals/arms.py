"""What an eval runs: its subject (``NAME``, the folder; ``NAME@V``, a published version)
and the baseline it is compared with (``--baseline none|NAME@V|DRAFT``), each an arm
whose runs take the same cases.

A folder whose files are those of its version as published is that version; an edited
one is the draft. ``none`` is the same request to the same model with no skill loaded,
which only an instruction skill (one agent step) has.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lifecycle.eval_records import BARE, DRAFT, PUBLISHED
from orchestrator.connect import Connection
from orchestrator.submit import checked
from shared.db.session import transaction
from shared.errors import InputError
from shared.plan import Plan, build_plan
from shared.problems import Problem
from shared.published import latest_version, published_files, verify
from shared.published_copy import published_copy
from shared.skill import Skill
from shared.vault import Vault

SUBJECT, BASELINE = "skill", "baseline"  # EvalResult.arm


@dataclass(frozen=True, slots=True)
class Arm:
    role: str  # SUBJECT | BASELINE
    label: str  # "v2", "draft" or "none": how the report names it
    skill: Skill  # what is planned: the folder's, or a published copy
    form: str  # PUBLISHED | DRAFT | BARE

    @property
    def version(self) -> int:
        return self.skill.manifest.version

    def plan(self, vault: Vault, given: Mapping[str, Any], cap: float | None) -> Plan:
        plan = build_plan(self.skill, vault.skills, dict(given)).with_budget(cap)
        if self.form == BARE:
            return plan.bare()
        if self.form == PUBLISHED:  # run from the store, whatever the folder holds now
            return plan.at_version(self.skill.name, self.version)
        return plan


def _problem(field: str, fix: str) -> InputError:
    return InputError([Problem("skillq eval", field, fix)])


def _parse(spec: str, field: str) -> tuple[str, int | None]:
    name, at, version = spec.partition("@")
    if not at:
        return name, None
    if not version.isdigit() or int(version) < 1:
        raise _problem(field, f"'{spec}' names no version: write NAME@V, e.g. {name}@1")
    return name, int(version)


def _published(conn: Connection, name: str, version: int, role: str, field: str) -> Arm:
    files = published_files(conn.endpoints.database_url, name, version)
    if files is None:
        raise _problem(field, f"{name} has no published version {version}: "
                       f"`skillq versions {name}` lists them")
    return Arm(role, f"v{version}", published_copy(conn.settings.home,
                                                   conn.endpoints.database_url, files),
               PUBLISHED)


def _folder(conn: Connection, vault: Vault, skill: Skill, role: str) -> Arm:
    checked(vault, skill)
    files = published_files(conn.endpoints.database_url, skill.name, skill.manifest.version)
    if files is not None and not verify(skill.folder, files):  # no change from it
        return Arm(role, f"v{skill.manifest.version}", skill, PUBLISHED)
    return Arm(role, DRAFT, skill, DRAFT)


def _latest(conn: Connection, name: str) -> int:
    with transaction(conn.endpoints.database_url) as session:
        return latest_version(session, name)


def arms(conn: Connection, vault: Vault, spec: str, baseline: str | None
         ) -> tuple[Arm, Arm | None]:
    """The subject ``spec`` names and the baseline ``baseline`` names (None: none run).
    With ``--baseline DRAFT`` and a bare NAME, the subject is its latest published
    version, so that the draft is weighed against what production runs."""
    name, version = _parse(spec, "NAME")
    skill = vault.get(name)
    draft_baseline = baseline is not None and baseline.lower() == DRAFT
    if version is None and draft_baseline:
        version = _latest(conn, skill.name)
        if version < 1:
            raise _problem("--baseline", f"{skill.name} has no published version to weigh "
                           "its draft against: publish it first, or give --baseline none")
    subject = _published(conn, skill.name, version, SUBJECT, "NAME") \
        if version is not None else _folder(conn, vault, skill, SUBJECT)
    if baseline is None:
        return subject, None
    if draft_baseline:
        return subject, _folder(conn, vault, skill, BASELINE)
    if baseline == "none":
        m = skill.manifest
        if m.is_orchestrator or m.kind != "instructions":
            raise _problem("--baseline", f"--baseline none is the same request with no skill "
                           f"loaded, which only an instruction skill (approach: agent) has; "
                           f"{skill.name} is not one: give --baseline {skill.name}@V")
        return subject, Arm(BASELINE, "none", subject.skill, BARE)
    other, at = _parse(baseline, "--baseline")
    if at is None or other != skill.name:
        raise _problem("--baseline", f"'{baseline}' is not a baseline: give none, "
                       f"{skill.name}@V (a published version) or DRAFT (the folder)")
    return subject, _published(conn, skill.name, at, BASELINE, "--baseline")
