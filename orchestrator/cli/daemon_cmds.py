"""`skillq daemons`: the machines serving this deployment, as they announced themselves."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer
from rich.table import Table
from sqlalchemy import select

from orchestrator.cli.common import out
from orchestrator.connect import connect
from shared.db.daemon_models import Daemon, DaemonWorker
from shared.db.session import transaction


def register(app: typer.Typer) -> None:
    app.command("daemons")(daemons)


def daemons(as_json: Annotated[bool, typer.Option("--json", help="One JSON object per "
                                                 "daemon, for scripts.")] = False) -> None:
    """Daemons: online or offline, role, capabilities, software, queues, model providers,
    last heartbeat."""
    conn = connect(workers=False)
    cutoff = datetime.now(UTC) - timedelta(seconds=conn.settings.daemon_offline_after_s)
    table = Table(title="daemons")
    for column in ("daemon", "state", "role", "last heartbeat", "platform", "capabilities",
                   "software", "queues", "models", "skills"):
        table.add_column(column, overflow="fold")
    with transaction(conn.endpoints.database_url) as session:
        rows = session.scalars(select(Daemon).order_by(Daemon.name)).all()
        workers = session.scalars(select(DaemonWorker)).all()
        listed = []
        for d in rows:
            live = [w for w in workers if w.daemon == d.name and w.heartbeat_at >= cutoff]
            queues = sorted({q for w in live for q in w.queues if "@" not in q})
            # Provider names only: the workers never announce a credential's value.
            providers = sorted({p for w in live for p in w.model_providers})
            defaults = sorted({w.agent_model for w in live if w.agent_model})
            listed.append({"daemon": d.name, "online": bool(live), "role": d.role,
                           "heartbeat_at": d.heartbeat_at.isoformat(), "platform": d.platform,
                           "capabilities": d.capabilities,
                           "software": sorted(k for k, v in d.software.items() if v),
                           "queues": queues, "model_providers": providers,
                           "agent_models": defaults, "skills": d.skills,
                           "workers": sorted(w.node for w in live)})
            table.add_row(d.name, "[green]online[/]" if live else "[red]offline[/]", d.role,
                          f"{d.heartbeat_at:%Y-%m-%d %H:%M:%S}", d.platform,
                          ", ".join(d.capabilities), ", ".join(sorted(d.software)),
                          ", ".join(queues) or "-", _models(providers, defaults),
                          str(len(d.skills)))
    if as_json:
        for item in listed:
            print(json.dumps(item))
        return
    if not rows:
        out.print("no daemon has announced itself yet; start one with `skillq worker`")
        return
    out.print(table)


def _models(providers: list[str], defaults: list[str]) -> str:
    shown = ", ".join(providers) or "-"
    return f"{shown} (default {', '.join(defaults)})" if defaults else shown
