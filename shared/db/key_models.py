"""The daemon keys workers accept task messages from (docs/security.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from sqlalchemy import DateTime, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from shared.db.models import Base

EnrolledVia = Literal["auto", "enroll"]


class EnrolledKey(Base):
    """An Ed25519 public key and the daemon it belongs to; revoked keys keep their row.

    ``enrolled_via``: ``auto`` when a process holding the database credentials enrolled
    its own key, ``enroll`` when `skillq daemons enroll` did.
    """

    __tablename__ = "daemon_keys"

    fingerprint: Mapped[str] = mapped_column(String(64), primary_key=True)  # SHA256:...
    daemon: Mapped[str] = mapped_column(String(64), index=True)
    public_key: Mapped[str] = mapped_column(Text)  # one "ssh-ed25519 AAAA..." line
    enrolled_via: Mapped[str] = mapped_column(String(16))
    enrolled_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True),
                                                        default=None)
