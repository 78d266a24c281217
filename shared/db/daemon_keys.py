"""Enrolling, revoking and reading daemon keys (shared/db/key_models.py).

The caller owns the transaction. A key is enrolled once: enrolling a fingerprint that
has a row changes nothing, and a revoked fingerprint stays revoked (it is never enrolled
again, automatically or by hand).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import or_, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from shared.daemon_key import DaemonKey, PublicKey
from shared.db.key_models import EnrolledKey, EnrolledVia
from shared.errors import DaemonKeyError, KeyRegistryError


@dataclass(frozen=True, slots=True)
class Enrolled:
    key: EnrolledKey
    new: bool  # False: the fingerprint was enrolled already (or revoked)


def enroll(session: Session, public: PublicKey, daemon: str, *, via: EnrolledVia,
           now: datetime | None = None) -> Enrolled:
    """Insert the key unless its fingerprint has a row; the row either way."""
    now = now or datetime.now(UTC)
    inserted = session.execute(
        insert(EnrolledKey).values(fingerprint=public.fingerprint, daemon=daemon,
                                   public_key=public.text, enrolled_via=via, enrolled_at=now)
        .on_conflict_do_nothing(index_elements=[EnrolledKey.fingerprint])
        .returning(EnrolledKey.fingerprint)).first()
    row = session.get(EnrolledKey, public.fingerprint, populate_existing=True)
    assert row is not None
    return Enrolled(row, inserted is not None)


def enroll_by_hand(session: Session, public: PublicKey, daemon: str) -> Enrolled:
    """`skillq daemons enroll`: a revoked key is refused, not enrolled again."""
    done = enroll(session, public, daemon, via="enroll")
    if done.key.revoked_at is not None:
        raise KeyRegistryError(
            f"key {public.fingerprint} (daemon {done.key.daemon}) was revoked on "
            f"{done.key.revoked_at:%Y-%m-%d %H:%M:%S %Z}; a revoked key is never enrolled "
            "again: make a new one on that machine (move its SKILLQ_HOME/keys/daemon.key "
            "away) and enroll that")
    return done


def enroll_own(session: Session, key: DaemonKey, daemon: str) -> Enrolled:
    """A process holding the database credentials enrolls its own key (they are already
    full trust on the deployment). Its revoked key is reported, not enrolled again."""
    public = PublicKey(key.public, key.fingerprint, daemon)
    return enroll(session, public, daemon, via="auto")


def check_not_revoked(done: Enrolled, key: DaemonKey) -> None:
    if done.key.revoked_at is not None:
        raise DaemonKeyError(
            f"this SKILLQ_HOME's daemon key {key.fingerprint} was revoked on "
            f"{done.key.revoked_at:%Y-%m-%d %H:%M:%S %Z}: workers refuse every message it "
            f"signs. Move {key.path} away; a new key is made and enrolled at the next "
            "command")


def revoke(session: Session, target: str, now: datetime | None = None
           ) -> tuple[list[EnrolledKey], list[EnrolledKey]]:
    """Revoke the key with fingerprint ``target``, else every key of the daemon named
    ``target``; (revoked now, revoked before). KeyRegistryError when nothing matches."""
    now = now or datetime.now(UTC)
    matches = session.scalars(select(EnrolledKey).where(EnrolledKey.fingerprint == target)
                              .with_for_update()).all()
    if not matches:
        matches = session.scalars(select(EnrolledKey).where(EnrolledKey.daemon == target)
                                  .order_by(EnrolledKey.enrolled_at).with_for_update()).all()
    if not matches:
        raise KeyRegistryError(f"no enrolled key or daemon named {target!r}; "
                               "`skillq daemons keys` lists them")
    before = [k for k in matches if k.revoked_at is not None]
    fresh = [k for k in matches if k.revoked_at is None]
    if fresh:
        session.execute(update(EnrolledKey)
                        .where(EnrolledKey.fingerprint.in_([k.fingerprint for k in fresh]),
                               EnrolledKey.revoked_at.is_(None))
                        .values(revoked_at=now).execution_options(synchronize_session=False))
        for k in fresh:
            k.revoked_at = now
    return fresh, before


def all_keys(session: Session) -> Sequence[EnrolledKey]:
    return session.scalars(select(EnrolledKey).order_by(EnrolledKey.daemon,
                                                        EnrolledKey.enrolled_at)).all()


def keys_of(session: Session, fingerprints: Sequence[str], daemons: Sequence[str] = ()
            ) -> Sequence[EnrolledKey]:
    """The rows of these fingerprints, and of every key enrolled for these daemons."""
    return session.scalars(select(EnrolledKey).where(or_(
        EnrolledKey.fingerprint.in_(list(fingerprints)),
        EnrolledKey.daemon.in_(list(daemons))))).all()
