"""The skill library's records: per-vault state the daemons and the dashboard share.

A skill's files live in the vault; what the user decides *about* a skill (enabled, label,
pin, deleted, installed as a default) lives here, because several machines hold their own
copy of a vault folder and must agree on it. One row per skill and vault, keyed by a
surrogate id (a UUID, so an archive imported into another database keeps it).

Soft delete turns a row into a tombstone: ``name`` becomes NULL (so the unique index on
live names frees the slug for a new skill), ``slug`` keeps what it was called and
``deleted_at`` when it stopped. Runs name skills by slug; a run of ``slug`` in ``vault``
belongs to the tombstone with the earliest ``deleted_at`` after the run's ``created_at``,
else to the live skill (orchestrator/library/history.py).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    DateTime,
    Index,
    Integer,
    String,
    Text,
    func,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from shared.db.models import Base

MAX_PINS = 10


class LibrarySkill(Base):
    __tablename__ = "library_skills"
    __table_args__ = (
        # A live name is unique per vault; tombstones (name NULL) never collide.
        Index("uq_library_skills_live_name", "vault", "name", unique=True,
              postgresql_where=text("name IS NOT NULL")),
        Index("ix_library_skills_vault_slug", "vault", "slug"),
        # Not deferrable (INSERT ... ON CONFLICT, used by imports, refuses those): a
        # reorder clears the moved pins first, then sets them (repo._renumber).
        Index("uq_library_skills_pin", "vault", "pinned_order", unique=True,
              postgresql_where=text("pinned_order IS NOT NULL")),
        CheckConstraint(f"pinned_order >= 0 AND pinned_order < {MAX_PINS}",
                        name="ck_library_skills_pin_range"),
        CheckConstraint("(name IS NULL) = (deleted_at IS NOT NULL)",
                        name="ck_library_skills_tombstone"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    # The vault root as pipeline_runs.vault records it (resolved path on the orchestrator).
    vault: Mapped[str] = mapped_column(Text)
    name: Mapped[str | None] = mapped_column(String(64), nullable=True)
    slug: Mapped[str] = mapped_column(String(64))
    label: Mapped[str | None] = mapped_column(String(120), nullable=True)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True, server_default=text("true"))
    pinned_order: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # Set when `skillq defaults` installed the folder: the content hash it wrote, and the
    # DEFAULTS_VERSION that shipped it. A folder whose hash differs was edited by the user.
    default_hash: Mapped[str | None] = mapped_column(String(71), nullable=True)
    default_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # Where a deleted skill's folder went, relative to the vault (.deleted/<slug>-<stamp>).
    archived_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True),
                                                 server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True),
                                                 server_default=func.now())
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
