"""Routing: which queue a step goes to, from what online daemons announced.

A step goes to its approach's queue (``default``, ``dom0`` ...), which every daemon serving
that queue class consumes. It is narrowed to one daemon's own queue (``default@gpu-box``)
when the skill pins a daemon (``requires.daemon``), or when only some of the daemons
serving the queue have the software and capabilities it requires, or (an agent step) the
MCP servers and the credentials of the model it would run on there (agent_routing.py).
A step given a folder (a ``directory`` input) runs on a daemon of the machine that
folder is on. Among eligible daemons, ``agent`` daemons are preferred to
``daily-driver`` ones; when several remain but not all, a fan-out's messages take turns
among them. A step that no online daemon can run is refused before anything is sent,
naming what is missing and who lacks it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import DateTime, Engine, bindparam, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from lifecycle.agent_routing import WorkerModels, lacks
from shared.db.daemon_models import Daemon, DaemonWorker, WantedSoftware
from shared.manifest import Requires
from shared.plan import AgentModel
from shared.valuetypes import DIR_KEY, dir_values

ROLE_RANK = {"agent": 0, "daily-driver": 1}


@dataclass(frozen=True)
class OnlineDaemon:
    name: str
    role: str
    device: str  # the machine it runs on (shared/machine.py)
    queues: frozenset[str]  # consumed by at least one of its live workers
    capabilities: frozenset[str]
    software: frozenset[str]  # found on its PATH
    looked_for: frozenset[str]  # every program it has looked for, found or not
    workers: tuple[WorkerModels, ...] = ()  # its live workers' model providers


@dataclass(frozen=True)
class Route:
    queues: tuple[str, ...]  # one, or several daemons' queues a fan-out takes turns on
    reason: str

    def queue_for(self, message_index: int) -> str:
        return self.queues[message_index % len(self.queues)]


class NoRoute(Exception):
    """No online daemon can run the step (the message says what is missing where)."""


@dataclass(frozen=True)
class Folder:
    """A folder a step is given (``input``: the input naming it): it runs on that
    folder's machine."""
    input: str
    path: str
    device: str
    host: str


def folder_of(*inputs: Mapping[str, Any]) -> Folder | None:
    """The machine of the folders among ``inputs`` (a run's, or each item's of a step),
    None when they hold none; NoRoute when they lie on more than one machine (no daemon
    sees them all)."""
    found = [Folder(name, d[DIR_KEY], d["device"], d["host"])
             for given in inputs for name, value in given.items() for d in dir_values(value)]
    machines = {f.device: f for f in found}
    if len(machines) > 1:
        where = ", ".join(f"'{f.input}' {f.path} on {f.host}" for f in machines.values())
        raise NoRoute(f"its folders lie on more than one machine ({where}); give it "
                      "folders of one machine")
    return found[0] if found else None


def unknown_software(requires: Requires, daemons: Sequence[OnlineDaemon]) -> set[str]:
    """Required programs some online daemon has not looked for yet (ask, then route)."""
    return {s for s in requires.software for d in daemons if s not in d.looked_for}


_ONLINE = (select(Daemon.name, Daemon.role, Daemon.device_id, Daemon.capabilities,
                  Daemon.software,
                  DaemonWorker.queues, DaemonWorker.model_providers, DaemonWorker.agent_model,
                  DaemonWorker.mcp_servers)
           .join(DaemonWorker, DaemonWorker.daemon == Daemon.name)
           .where(DaemonWorker.heartbeat_at >= bindparam("cutoff",
                                                         type_=DateTime(timezone=True))))


def online_daemons(session: Session, offline_after_s: float) -> list[OnlineDaemon]:
    """The daemons with a worker heard from within ``offline_after_s``, read now."""
    cutoff = datetime.now(UTC) - timedelta(seconds=offline_after_s)
    # The columns routing reads, not the rows (a daemon's row lists its vault's skills).
    rows = session.execute(_ONLINE, {"cutoff": cutoff}).all()
    merged: dict[str, tuple[Any, list[Any]]] = {}
    for row in rows:
        merged.setdefault(row.name, (row, []))[1].append(row)
    return [OnlineDaemon(d.name, d.role, d.device_id, frozenset(q for w in ws for q in w.queues),
                         frozenset(d.capabilities),
                         frozenset(k for k, v in d.software.items() if v),
                         frozenset(d.software),
                         tuple(WorkerModels(frozenset(w.queues), frozenset(w.model_providers),
                                            w.agent_model, frozenset(w.mcp_servers))
                               for w in ws))
            for d, ws in merged.values()]


# What this process last read of the registry, by engine: (when, the daemons).
_recent: WeakKeyDictionary[Engine, tuple[float, list[OnlineDaemon]]] = WeakKeyDictionary()


def recent_daemons(session: Session, offline_after_s: float, reuse_s: float
                   ) -> tuple[list[OnlineDaemon], bool]:
    """The online daemons as this process read them at most ``reuse_s`` ago, else as
    read now; and whether they are such an earlier read. A planning pass routes by them
    (one round trip less for each: heartbeats come every few seconds, and a daemon
    counts as online for ``offline_after_s`` after its last), and reads again before it
    refuses a step (``reuse_s`` 0), so an earlier read never fails a run."""
    bind = session.get_bind()
    seen = _recent.get(bind) if isinstance(bind, Engine) else None
    if seen is not None and reuse_s > 0 and time.monotonic() - seen[0] <= reuse_s:
        return seen[1], True
    daemons = online_daemons(session, offline_after_s)
    if isinstance(bind, Engine):
        _recent[bind] = (time.monotonic(), daemons)
    return daemons, False


def _lacks(daemon: OnlineDaemon, requires: Requires, queue: str = "",
           agent: AgentModel | None = None) -> list[str]:
    return [*(f"software '{s}'" for s in requires.software if s not in daemon.software),
            *(f"capability '{c}'" for c in requires.capabilities
              if c not in daemon.capabilities),
            *lacks(daemon.workers, daemon.name, queue, agent, requires.mcp)]


def route(queue: str, requires: Requires, daemons: Sequence[OnlineDaemon],
          agent: AgentModel | None = None, folder: Folder | None = None) -> Route:
    """Where a step goes; ``agent``: an agent step's model (PlanStep.agent); ``folder``:
    one it is given (folder_of), which only its machine's daemons can read."""
    if folder is not None:
        return _route_to(folder, queue, requires, daemons, agent)
    serving = sorted((d for d in daemons if queue in d.queues), key=lambda d: d.name)
    if requires.daemon:
        pinned = next((d for d in daemons if d.name == requires.daemon), None)
        own = f"{queue}@{requires.daemon}"
        if pinned is None:
            raise NoRoute(f"it is pinned to daemon '{requires.daemon}', which is offline "
                          f"(online: {_names(daemons)})")
        if own not in pinned.queues:
            raise NoRoute(f"it is pinned to daemon '{requires.daemon}', which serves no "
                          f"'{queue}' queue; start one there with `skillq worker --daemon "
                          f"{requires.daemon} --queues {queue}`")
        missing = _lacks(pinned, requires, queue, agent)
        if missing:
            raise NoRoute(f"it is pinned to daemon '{requires.daemon}', which lacks "
                          f"{', '.join(missing)}")
        return Route((own,), f"pinned to {requires.daemon}")
    if not serving:
        raise NoRoute(f"no online daemon serves queue '{queue}'; start one with `skillq "
                      f"worker --queues {queue}`")
    missing_by = {d.name: _lacks(d, requires, queue, agent) for d in serving}
    eligible = [d for d in serving if not missing_by[d.name]]
    if not eligible:
        shared = {tuple(m) for m in missing_by.values()}
        if agent is not None and len(shared) == 1 and not _lacks(serving[0], requires):
            # Every daemon lacks the same setting: name it once, and where it goes.
            (need,) = shared
            raise NoRoute(f"no online daemon serving '{queue}' ({_names(serving)}) has "
                          f"{', '.join(need)}; set it in the environment of a worker serving "
                          f"'{queue}' (docs/machines.md, Agent steps)")
        lacking = "; ".join(f"{name} lacks {', '.join(m)}" for name, m in missing_by.items())
        raise NoRoute(f"no online daemon serving '{queue}' has what it requires ({lacking})")
    best = min(ROLE_RANK.get(d.role, 9) for d in eligible)
    chosen = [d for d in eligible if ROLE_RANK.get(d.role, 9) == best]
    if len(chosen) == len(serving):
        return Route((queue,), f"any daemon serving {queue} ({_names(serving)})")
    others = sorted({d.name for d in serving} - {d.name for d in chosen})
    why = "prefers role agent" if len(chosen) < len(eligible) else "has what it requires"
    return Route(tuple(f"{queue}@{d.name}" for d in chosen if f"{queue}@{d.name}" in d.queues)
                 or (queue,),
                 f"{_names(chosen)} {why} (not {', '.join(others)})")


def _route_to(folder: Folder, queue: str, requires: Requires,
              daemons: Sequence[OnlineDaemon], agent: AgentModel | None) -> Route:
    here = [d for d in daemons if d.device == folder.device]
    if not any(queue in d.queues for d in here):
        elsewhere = _names([d for d in daemons if queue in d.queues])
        raise NoRoute(f"its input '{folder.input}' is the folder {folder.path} on "
                      f"{folder.host}, and no online daemon of that machine serves queue "
                      f"'{queue}' (serving it elsewhere: {elsewhere}); start one there with "
                      f"`skillq worker --queues {queue}`")
    found = route(queue, requires, here, agent)
    if found.queues != (queue,) or len(here) == len(daemons):
        return found
    own = tuple(f"{queue}@{d.name}" for d in here if f"{queue}@{d.name}" in d.queues)
    if not own:
        raise NoRoute(f"its input '{folder.input}' is the folder {folder.path} on "
                      f"{folder.host}, whose daemons ({_names(here)}) serve no queue of "
                      f"their own for '{queue}'")
    return Route(own, f"the folder's machine {folder.host} ({_names(here)})")


def _names(daemons: Sequence[OnlineDaemon]) -> str:
    return ", ".join(sorted(d.name for d in daemons)) or "none"


def ask_for_software(session: Session, names: set[str]) -> None:
    """Have every daemon look for these programs at its next heartbeat."""
    now = datetime.now(UTC)
    session.execute(insert(WantedSoftware).values(
        [{"name": n, "asked_at": now} for n in sorted(names)]).on_conflict_do_nothing())
