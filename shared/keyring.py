"""A worker's copy of the enrolled daemon keys, read from PostgreSQL now and then.

Checking a message costs no database round trip: keys are looked up in this process's
copy. The copy is read again when it is older than SKILLQ_KEY_REFRESH_S (so a
revocation takes effect within it) and when a message names a key it does not hold (a
daemon enrolled since), at most once a second for those, so a flood of messages naming
made-up keys costs the database one query a second. The reads use an engine of their
own, with short timeouts: they happen on the worker's consumer thread, which must not
hang on an unreachable database. While the database cannot be read, the last copy is
used (logged once per outage).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import Session

from shared.atomic import write_json
from shared.daemon_key import parse_public
from shared.db.daemon_keys import all_keys
from shared.db.outage import first_line
from shared.errors import KeyRegistryError

log = logging.getLogger(__name__)
UNKNOWN_REFRESH_MIN_S = 1.0
CONNECT_TIMEOUT_S = 3
STATEMENT_TIMEOUT_MS = 3000
_rings: weakref.WeakSet[KeyRing] = weakref.WeakSet()
_fork_hook = threading.Lock()
_hooked = False


def _after_fork_in_child() -> None:
    for ring in list(_rings):
        ring.forget_engine()


def _watch_forks(ring: KeyRing) -> None:
    """A process forked after a key ring connected (a replacement pool process) must
    not use, or close, its parent's connection."""
    global _hooked
    with _fork_hook:
        _rings.add(ring)
        if not _hooked:
            os.register_at_fork(after_in_child=_after_fork_in_child)
            _hooked = True


@dataclass(frozen=True, slots=True)
class KnownKey:
    fingerprint: str
    daemon: str
    public: Ed25519PublicKey
    revoked_at: datetime | None


class KeyRing:
    def __init__(self, database_url: str | None, refresh_s: float,
                 clock: Callable[[], float] = time.monotonic, cache: Path | None = None
                 ) -> None:
        """``cache``: where the last registry read is kept (public keys only), so a worker
        started while the database is down still knows the keys enrolled before."""
        self.database_url = database_url
        self.cache = cache
        self.refresh_s = refresh_s
        self._clock = clock
        self._keys: dict[str, KnownKey] = {}
        self._read_at: float | None = None  # the last attempt, successful or not
        self._down = False
        self._engine: Engine | None = None
        self._lock = threading.Lock()

    def get(self, fingerprint: str) -> KnownKey | None:
        with self._lock:
            now = self._clock()
            if self._read_at is None or now - self._read_at >= self.refresh_s:
                self._refresh(now)
            found = self._keys.get(fingerprint)
            if found is None and self._read_at is not None \
                    and now - self._read_at >= UNKNOWN_REFRESH_MIN_S:
                self._refresh(now)
                found = self._keys.get(fingerprint)
            return found

    @property
    def unreadable(self) -> bool:
        """The last read of the registry failed (the database is down): a key it does not
        know may be one enrolled meanwhile, so a message it signed is held, not refused."""
        return self._down

    def forget_engine(self) -> None:
        if self._engine is not None:
            self._engine.dispose(close=False)
            self._engine = None

    def _engine_for(self, url: str) -> Engine:
        if self._engine is None:
            _watch_forks(self)
            self._engine = create_engine(
                url, pool_size=1, max_overflow=0, pool_pre_ping=True,
                connect_args={"connect_timeout": CONNECT_TIMEOUT_S,
                              "options": f"-c statement_timeout={STATEMENT_TIMEOUT_MS}"})
        return self._engine

    def _refresh(self, now: float) -> None:
        self._read_at = now
        if self.database_url is None:
            return
        try:
            with Session(self._engine_for(self.database_url)) as session:
                rows = [(r.fingerprint, r.daemon, r.public_key, r.revoked_at)
                        for r in all_keys(session)]
        except Exception as exc:  # keep the last copy; the next refresh tries again
            if not self._keys and self.cache is not None:
                self._keys = self._parse(self._read_cache())
            if not self._down:
                log.warning("cannot read the enrolled daemon keys (%s); checking messages "
                            "against the %d key(s) read before", first_line(exc),
                            len(self._keys))
            self._down = True
            return
        if self._down:
            log.warning("read the enrolled daemon keys again")
        self._down = False
        self._keys = self._parse(rows)
        self._write_cache(rows)

    def _read_cache(self) -> list[tuple[str, str, str, datetime | None]]:
        try:
            data = json.loads(self.cache.read_text()) if self.cache else []
            return [(f, d, t, datetime.fromisoformat(r) if r else None) for f, d, t, r in data]
        except (OSError, ValueError, TypeError):
            return []

    def _write_cache(self, rows: list[tuple[str, str, str, datetime | None]]) -> None:
        if self.cache is None:
            return
        data = [[f, d, t, r.isoformat() if r else None] for f, d, t, r in rows]
        with contextlib.suppress(OSError):
            if self.cache.exists() and json.loads(self.cache.read_text()) == data:
                return
            write_json(self.cache, data)

    def _parse(self, rows: list[tuple[str, str, str, datetime | None]]
               ) -> dict[str, KnownKey]:
        keys: dict[str, KnownKey] = {}
        for fingerprint, daemon, text, revoked_at in rows:
            known = self._keys.get(fingerprint)
            if known is None:
                try:
                    parsed = parse_public(text)
                    if parsed.fingerprint != fingerprint:
                        raise KeyRegistryError("its fingerprint is not its key's")
                except KeyRegistryError as exc:
                    log.warning("daemon key %s of %s in daemon_keys cannot be used (%s); "
                                "ignored", fingerprint, daemon, exc)
                    continue
                public = parsed.key
            else:
                public = known.public
            keys[fingerprint] = KnownKey(fingerprint, daemon, public, revoked_at)
        return keys
