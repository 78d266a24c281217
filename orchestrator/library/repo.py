"""Repository functions for the library's rows: each takes a Session, the caller commits.

Rows appear lazily: a skill nobody has labelled, pinned, disabled or deleted has none and
reads as enabled, unpinned and unlabelled. Every change first takes a transaction lock
on the vault, so two commands pinning at once cannot both take the last free place.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from sqlalchemy import func, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from orchestrator.drawing import edges
from orchestrator.library.display import SkillState
from shared.db.library_models import MAX_PINS, LibrarySkill
from shared.errors import LibraryError, SkillDisabled
from shared.skill import Skill
from shared.vault import Vault


def vault_key(root: Path) -> str:
    """How rows name their vault: as pipeline_runs.vault does, the resolved root."""
    return str(root.resolve())


def lock_vault(session: Session, vault: str) -> None:
    session.execute(text("select pg_advisory_xact_lock(hashtext(:v))"),
                    {"v": "skillq-library:" + vault})


def db_now(session: Session) -> datetime:
    """The database's clock (the transaction's start), the one runs are stamped with."""
    now: datetime = session.execute(select(func.now())).scalar_one()
    return now


def live_row(session: Session, vault: str, name: str) -> LibrarySkill | None:
    return session.scalars(select(LibrarySkill).where(
        LibrarySkill.vault == vault, LibrarySkill.name == name)).one_or_none()


def ensure_row(session: Session, vault: str, name: str) -> LibrarySkill:
    """The live row of ``name``, created (enabled, unpinned) when it has none."""
    session.execute(insert(LibrarySkill).values(
        id=str(uuid.uuid4()), vault=vault, name=name, slug=name).on_conflict_do_nothing(
        index_elements=["vault", "name"], index_where=LibrarySkill.name.is_not(None)))
    row = live_row(session, vault, name)
    assert row is not None  # inserted, or there already
    return row


def states(session: Session, vault: str) -> dict[str, SkillState]:
    rows = session.scalars(select(LibrarySkill).where(
        LibrarySkill.vault == vault, LibrarySkill.name.is_not(None))).all()
    return {r.name: SkillState(r.enabled, r.label, r.pinned_order) for r in rows if r.name}


def set_enabled(session: Session, vault: str, name: str, enabled: bool) -> bool:
    """Set it; whether anything changed."""
    lock_vault(session, vault)
    row = ensure_row(session, vault, name)
    changed = row.enabled != enabled
    row.enabled = enabled
    row.updated_at = db_now(session)
    return changed


def set_label(session: Session, vault: str, name: str, label: str | None) -> None:
    lock_vault(session, vault)
    row = ensure_row(session, vault, name)
    row.label = label
    row.updated_at = db_now(session)


def pinned(session: Session, vault: str) -> list[LibrarySkill]:
    return list(session.scalars(select(LibrarySkill).where(
        LibrarySkill.vault == vault, LibrarySkill.pinned_order.is_not(None))
        .order_by(LibrarySkill.pinned_order)).all())


def pin_order(current: list[str], name: str, position: int | None = None) -> list[str]:
    """The pins after pinning ``name`` at ``position`` (0 first; default: last), or moving
    it there when already pinned. LibraryError past MAX_PINS, naming the pinned ones."""
    others = [n for n in current if n != name]
    if len(others) >= MAX_PINS:
        raise LibraryError(f"at most {MAX_PINS} skills can be pinned and these are: "
                           + ", ".join(others) + "; unpin one first (`skillq unpin NAME`)")
    at = len(others) if position is None else max(0, min(position, len(others)))
    return [*others[:at], name, *others[at:]]


def pin(session: Session, vault: str, name: str, position: int | None = None) -> list[str]:
    """Pin ``name`` at ``position`` (0 first; default last), or move it there; the order."""
    lock_vault(session, vault)
    rows = {r.name or r.slug: r for r in pinned(session, vault)}
    order = pin_order(list(rows), name, position)
    rows[name] = ensure_row(session, vault, name)
    _renumber(session, [rows[n] for n in order])
    return order


def unpin(session: Session, vault: str, name: str) -> bool:
    """Unpin ``name`` (the others close up); whether it was pinned."""
    lock_vault(session, vault)
    rows = pinned(session, vault)
    kept = [r for r in rows if r.name != name]
    if len(kept) == len(rows):
        return False
    for row in rows:
        if row.name == name:
            row.pinned_order = None
    _renumber(session, kept)
    return True


def _renumber(session: Session, rows: Iterable[LibrarySkill]) -> None:
    """Give ``rows`` the pin orders 0, 1, ... in two flushes: the moved ones are cleared
    first, so no UPDATE meets another row's old place in the unique pin index."""
    moved = [(order, row) for order, row in enumerate(rows) if row.pinned_order != order]
    for _, row in moved:
        row.pinned_order = None
    session.flush()
    now = db_now(session) if moved else None
    for order, row in moved:
        row.pinned_order, row.updated_at = order, now or row.updated_at
    session.flush()


def refuse_disabled(session: Session, vault: Vault, skill: Skill) -> None:
    """Raise SkillDisabled when ``skill`` or any skill it calls, at any depth, is disabled.

    launch.start_run calls it (through guard.refuse_disabled_run) before it records
    anything, so a refused run leaves no record.
    """
    via: dict[str, str | None] = {skill.name: None}
    for caller, label, callee in edges(vault, skill.name):
        how = "sub-skills.json" if label == "uses" else f"step {label.split()[0]}"
        via.setdefault(callee, f"'{caller}' {how}")
    off = set(session.scalars(select(LibrarySkill.name).where(
        LibrarySkill.vault == vault_key(vault.root), LibrarySkill.name.in_(list(via)),
        LibrarySkill.enabled.is_(False))).all())
    if off:
        raise SkillDisabled([(name, via[name]) for name in via if name in off])
