"""A daemon tells the others what it is: capabilities, software, skills, queues, role,
and for agent steps the model providers each worker holds credentials for.

Each worker process of a daemon announces when it is ready and again at every heartbeat;
the planner routes only to daemons whose workers were heard from within
SKILLQ_DAEMON_OFFLINE_AFTER_S. The queues are read from the worker's live consumer, so a
queue a worker stops consuming (``celery control cancel_consumer``) stops being routed to.
Model providers and MCP servers (SKILLQ_MCP_SERVERS) are announced per worker process
(each reads its own environment), by name only: keys, commands, URLs and credentials stay
on the daemon.
Each worker also enrolls its SKILLQ_HOME's daemon key at its first announcement (it holds
the database credentials, so it may: docs/security.md) and announces the key's
fingerprint.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import tenacity
from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from shared import daemon_key
from shared.db import daemon_keys
from shared.db.daemon_models import Daemon, DaemonWorker, WantedSoftware
from shared.db.migrate import upgrade
from shared.db.outage import Outage, first_line, is_outage
from shared.db.session import transaction
from shared.errors import ConfigError, DaemonKeyError
from shared.machine import device_id
from shared.mcp_servers import parse_servers
from shared.settings import Settings
from shared.vault import open_vault
from workers.agent.models import provider_env, providers_held

log = logging.getLogger(__name__)

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


@dataclass(frozen=True)
class Capabilities:
    daemon: str
    device_id: str
    platform: str
    role: str
    capabilities: tuple[str, ...]
    software: dict[str, str | None]  # program -> where it was found on PATH, or None
    skills: dict[str, int]  # skill -> version in this daemon's vault
    # This worker process's own: a daemon's workers may be started with different
    # environments, so these go on its daemon_workers row, not the daemon's.
    model_providers: tuple[str, ...] = ()
    agent_model: str | None = None
    mcp_servers: tuple[str, ...] = ()


def daemon_name(settings: Settings) -> str:
    return settings.daemon or socket.gethostname()


def _platform() -> str:
    return {"darwin": "macos", "win32": "windows"}.get(sys.platform, sys.platform)


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def detect_capabilities(settings: Settings) -> tuple[str, ...]:
    found = set(_split(settings.capabilities))
    if shutil.which("nvidia-smi") or Path("/dev/nvidia0").exists():
        found.add("gpu")
    chromium = getattr(settings, "chromium_path", None)
    if (chromium and Path(chromium).exists()) or any(shutil.which(b) for b in BROWSERS):
        found.add("browser")
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") \
            or sys.platform in ("darwin", "win32"):
        found.add("desktop")
    found.add(_platform())
    return tuple(sorted(found))


def declared_mcp_servers(settings: Settings) -> list[str]:
    """The names of the MCP servers SKILLQ_MCP_SERVERS declares: announced on this
    worker's row (names only; commands, URLs and credentials stay here). A value that does not parse
    is one logged line, and none is announced, so steps needing them are refused by
    routing with the setting named, while the worker runs everything else."""
    try:
        return sorted(parse_servers(settings.mcp_servers.get_secret_value()))
    except ConfigError as exc:
        log.error("%s", exc)
        return []


def probe(settings: Settings, asked: Iterable[str] = ()) -> Capabilities:
    """What this machine has: looked up on PATH and in its own vault, not configured.

    Software looked for: SKILLQ_SOFTWARE, what its own vault's skills require, and what
    routing has ``asked`` for (the ``wanted_software`` table).
    """
    skills: dict[str, int] = {}
    wanted = set(_split(settings.software)) | set(asked)
    try:
        vault = open_vault(settings.vault.resolve(), ttl_s=settings.discovery_ttl_s)
    except Exception:  # no vault here (a worker serving published skills only)
        vault = None
    if vault is not None:
        for skill in vault.skills.values():
            skills[skill.name] = skill.manifest.version
            wanted.update(skill.manifest.requires.software)
    software = {name: shutil.which(name) for name in sorted(wanted)}
    return Capabilities(daemon=daemon_name(settings), device_id=device_id(settings),
                        platform=_platform(), role=settings.role,
                        capabilities=detect_capabilities(settings), software=software,
                        skills=skills,
                        model_providers=tuple(sorted(providers_held(provider_env()))),
                        agent_model=settings.agent_model or None,
                        mcp_servers=tuple(declared_mcp_servers(settings)))


def announce(session: Session, caps: Capabilities, *, node: str, queues: Iterable[str],
             pid: int, started_at: datetime, key_fingerprint: str | None = None,
             sandbox: str | None = None) -> None:
    now = datetime.now(UTC)
    values = {"name": caps.daemon, "device_id": caps.device_id, "platform": caps.platform,
              "role": caps.role, "capabilities": list(caps.capabilities),
              "software": caps.software, "skills": caps.skills, "started_at": started_at,
              "heartbeat_at": now}
    session.execute(insert(Daemon).values(**values).on_conflict_do_update(
        index_elements=[Daemon.name], set_={k: v for k, v in values.items()
                                            if k not in ("name", "started_at")}))
    worker = {"node": node, "daemon": caps.daemon, "queues": sorted(set(queues)), "pid": pid,
              "heartbeat_at": now, "model_providers": list(caps.model_providers),
              "agent_model": caps.agent_model, "mcp_servers": list(caps.mcp_servers),
              "key_fingerprint": key_fingerprint,
              "sandbox": sandbox}
    session.execute(insert(DaemonWorker).values(**worker).on_conflict_do_update(
        index_elements=[DaemonWorker.node], set_=worker))


def enroll_key(session: Session, settings: Settings) -> str:
    """Enroll this worker's daemon key (a revoked one is not enrolled again: logged, the
    worker goes on, and what it sends is refused); its fingerprint."""
    key = daemon_key.load_or_create(settings.home)
    done = daemon_keys.enroll_own(session, key, daemon_name(settings))
    if done.new:
        log.info("enrolled this daemon's key %s (%s)", key.fingerprint, key.path)
    try:
        daemon_keys.check_not_revoked(done, key)
    except DaemonKeyError as exc:
        log.error("%s", exc)
    return key.fingerprint


def migrate(database_url: str) -> None:
    """A worker may be the first to reach a fresh database: apply what is pending (the
    migration lock makes workers starting together take turns)."""
    try:
        upgrade(database_url)
    except Exception as exc:
        # Alembic only when there is something to migrate: importing it slows every
        # worker's start, which a cold `skillq run` waits for
        from alembic.util import CommandError

        if not isinstance(exc, CommandError):
            raise
        # a newer schema, migrated by newer code: still announce
        log.warning("database schema left as it is: %s", exc)


def start(settings: Settings, node: str, queues: Callable[[], list[str]], *,
          sandbox: str | None = None) -> threading.Event:
    """Announce now (so a waiting `skillq run` sees this worker), then every heartbeat.

    ``sandbox``: how this worker isolates its steps (workers.sandbox.check), shown by
    `skillq daemons`. Pending migrations are applied first. A database that is down or
    not ready never stops the worker: the first announcement and each heartbeat are
    retried with backoff (capped at heartbeat_s), logged once per outage.
    """
    database_url = settings.database_url
    assert database_url is not None
    started = datetime.now(UTC)
    stop = threading.Event()
    caps = probe(settings)
    migrated = False
    fingerprint: str | None = None

    def down(exc: BaseException) -> None:
        # an unreachable server is one line; anything else (a bug) deserves its traceback
        unreachable = is_outage(exc)
        log.warning("%s cannot announce itself: %s (%s); retrying with backoff", node,
                    "database unreachable" if unreachable else "announcing failed",
                    first_line(exc), exc_info=not unreachable)

    outage = Outage(on_down=down, max_wait_s=settings.heartbeat_s, stop=stop,
                    retry_on=lambda _: True,  # whatever failed, the next beat may succeed
                    on_up=lambda took_s: log.warning("%s announced again after %.0f s",
                                                     node, took_s))

    def once() -> None:
        nonlocal caps, migrated, fingerprint
        if not migrated:
            migrate(database_url)
            migrated = True
        with transaction(database_url) as session:
            key = fingerprint or enroll_key(session, settings)
            asked = set(session.scalars(select(WantedSoftware.name)))
            if not asked <= set(caps.software):
                caps = probe(settings, asked)
            announce(session, caps, node=node, queues=queues(), pid=os.getpid(),
                     started_at=started, key_fingerprint=key, sandbox=sandbox)
        fingerprint = key  # enrolled once committed: not again at every heartbeat

    try:
        once()  # here, not in the thread: a worker that answers pings is already routable
    except Exception as exc:
        outage.down(exc)  # the thread keeps trying

    def beat(look_again: bool) -> None:
        nonlocal caps
        if look_again:  # installed software and skills: looked at again now and then
            caps = probe(settings, caps.software)
        once()

    def loop() -> None:
        beats = 0
        try:
            if outage.down_since is not None:
                outage.call(once)
            while not stop.wait(settings.heartbeat_s):
                beats += 1
                outage.call(partial(beat, beats % 60 == 0))
        except tenacity.RetryError:  # only once stopped: retries never give up otherwise
            return

    threading.Thread(target=loop, name="skillq-announce", daemon=True).start()
    return stop
