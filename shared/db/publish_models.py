"""Published versions of skills: what was published, by whom, where and when.

A row never changes once written: a version number names one content forever (a
rollback is a new row, see orchestrator/rollback.py), so workers may cache rows.
The files' bytes live in the shared artifact store (``artifacts``), by their hash.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, DateTime, Integer, String, Text, func
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from shared.db.models import Base


class PublishedVersion(Base):
    """One published version of one skill."""

    __tablename__ = "published_versions"

    skill: Mapped[str] = mapped_column(String(64), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    folder_hash: Mapped[str] = mapped_column(String(71))
    # relative path -> {"sha256": "sha256:<hex>", "size": bytes, "executable": bool}
    files: Mapped[dict[str, Any]] = mapped_column(JSONB)
    skill_md: Mapped[str] = mapped_column(Text)
    manifest: Mapped[dict[str, Any]] = mapped_column(JSONB)
    # [{"skill": name, "pinned": version or null, "version": the callee's version then}]
    sub_skills: Mapped[list[Any]] = mapped_column(JSONB)
    published_by: Mapped[str] = mapped_column(String(128))  # the OS user
    published_host: Mapped[str] = mapped_column(String(255))
    published_from: Mapped[str] = mapped_column(Text)  # the folder it was read from
    published_at: Mapped[datetime] = mapped_column(DateTime(timezone=True),
                                                   server_default=func.now())
    # None: no test runner was available; True: the skill's tests passed before publish.
    tests_passed: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    rolled_back_from: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # The rules its files were recorded under (shared/published.py HASH_SCHEME): rows
    # from before migration 0009 are 1 (test cases and bytecode outside the version).
    hash_scheme: Mapped[int] = mapped_column(Integer, server_default="1")
