"""Whose run is it: history of a deleted skill stays apart from a new skill of its name.

Runs name their skill by slug and vault (pipeline_runs.skill, .vault). Deleting a skill
stamps its row's deleted_at, so the runs of one row are those of its slug and vault
created after the previous tombstone of that slug (if any) and before its own
deleted_at (if deleted). Both stamps come from the database clock, as created_at does.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import ColumnElement, and_, func, select
from sqlalchemy.orm import Session

from shared.db.library_models import LibrarySkill
from shared.db.models import PipelineRun


def previous_deletion(session: Session, row: LibrarySkill) -> datetime | None:
    """When the last earlier skill of this slug in this vault was deleted."""
    query = select(func.max(LibrarySkill.deleted_at)).where(
        LibrarySkill.vault == row.vault, LibrarySkill.slug == row.slug,
        LibrarySkill.deleted_at.is_not(None), LibrarySkill.id != row.id)
    if row.deleted_at is not None:
        query = query.where(LibrarySkill.deleted_at < row.deleted_at)
    found: datetime | None = session.execute(query).scalar_one()
    return found


def runs_filter(session: Session, row: LibrarySkill) -> ColumnElement[bool]:
    """A WHERE clause for the pipeline_runs (nested ones included) of this row's skill."""
    parts = [PipelineRun.vault == row.vault, PipelineRun.skill == row.slug]
    since = previous_deletion(session, row)
    if since is not None:
        parts.append(PipelineRun.created_at >= since)
    if row.deleted_at is not None:
        parts.append(PipelineRun.created_at < row.deleted_at)
    return and_(*parts)


def runs_of(session: Session, row: LibrarySkill, limit: int | None = None
            ) -> Sequence[PipelineRun]:
    query = select(PipelineRun).where(runs_filter(session, row)).order_by(
        PipelineRun.created_at.desc())
    return session.scalars(query if limit is None else query.limit(limit)).all()


def tombstones(session: Session, vault: str, slug: str) -> Sequence[LibrarySkill]:
    """The deleted skills that once had this slug in this vault, newest first."""
    return session.scalars(select(LibrarySkill).where(
        LibrarySkill.vault == vault, LibrarySkill.slug == slug,
        LibrarySkill.deleted_at.is_not(None)).order_by(LibrarySkill.deleted_at.desc())).all()
