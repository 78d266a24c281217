"""`skillq daemons`: the machines serving this deployment, as they announced themselves,
and the daemon keys their task messages are signed with (docs/security.md):
`skillq daemons key | keys | enroll | revoke`."""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from orchestrator.cli.common import out
from orchestrator.cli.tables import Column, Row, emit, jsonable, print_json, text
from shared.errors import KeyRegistryError
from shared.settings import get_settings

if TYPE_CHECKING:
    from shared.db.key_models import EnrolledKey

daemons_app = typer.Typer(help="Daemons: online or offline, role, capabilities, software, "
                          "queues, model providers, key, last heartbeat; and their keys.",
                          invoke_without_command=True)
DAEMON_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
JsonOption = Annotated[bool, typer.Option("--json", help="JSON, for scripts.")]
ListJsonOption = Annotated[bool, typer.Option("--json", help="A JSON array, one object "
                                              "per key, for scripts.")]


def register(app: typer.Typer) -> None:
    app.add_typer(daemons_app, name="daemons")


@daemons_app.callback()
def daemons(ctx: typer.Context,
            as_json: Annotated[bool, typer.Option("--json", help="A JSON array, one object "
                                                  "per daemon, for scripts.")] = False
            ) -> None:
    """Daemons: online or offline, role, capabilities, software, queues, model providers,
    key fingerprint, last heartbeat."""
    if ctx.invoked_subcommand is not None:
        return
    from sqlalchemy import select

    from orchestrator.connect import connect
    from shared.db import daemon_keys
    from shared.db.daemon_models import Daemon, DaemonWorker
    from shared.db.session import transaction

    conn = connect(workers=False, refuse_revoked_key=False)
    cutoff = datetime.now(UTC) - timedelta(seconds=conn.settings.daemon_offline_after_s)
    with transaction(conn.endpoints.database_url) as session:
        rows = session.scalars(select(Daemon).order_by(Daemon.name)).all()
        workers = session.scalars(select(DaemonWorker)).all()
        revoked = {k.fingerprint for k in daemon_keys.keys_of(
            session, sorted({w.key_fingerprint for w in workers if w.key_fingerprint}))
            if k.revoked_at is not None}
        listed = []
        for d in rows:
            own = [w for w in workers if w.daemon == d.name]
            live = [w for w in own if w.heartbeat_at >= cutoff]
            queues = sorted({q for w in live for q in w.queues if "@" not in q})
            # Provider names only: the workers never announce a credential's value.
            providers = sorted({p for w in live for p in w.model_providers})
            defaults = sorted({w.agent_model for w in live if w.agent_model})
            mcp = sorted({n for w in live for n in w.mcp_servers})
            # The keys it signs with now, or (offline) the last ones it announced.
            keys = sorted({w.key_fingerprint for w in (live or own) if w.key_fingerprint})
            sandbox = sorted({w.sandbox for w in (live or own) if w.sandbox})
            listed.append({"daemon": d.name, "online": bool(live), "role": d.role,
                           "heartbeat_at": d.heartbeat_at, "platform": d.platform,
                           "capabilities": d.capabilities,
                           "software": sorted(k for k, v in d.software.items() if v),
                           "queues": queues, "model_providers": providers,
                           "mcp_servers": mcp,
                           "agent_models": defaults, "skills": d.skills,
                           "workers": sorted(w.node for w in live),
                           "key_fingerprints": keys,
                           "revoked_keys": [k for k in keys if k in revoked],
                           "sandbox": sandbox})
    sandboxed = any(item["sandbox"] for item in listed)
    emit(listed, [*DAEMON_COLUMNS, *([SANDBOX] if sandboxed else [])], as_json=as_json,
         title="daemons", empty="no daemon has announced itself yet; start one with "
         "`skillq worker`")


def _keys_cell(item: Row) -> str:
    return ", ".join(k + (" (revoked)" if k in item["revoked_keys"] else "")
                     for k in item["key_fingerprints"]) or "-"


DAEMON_COLUMNS = (
    Column("daemon", wrap=False),
    Column("online", "state", show=lambda r: "online" if r["online"] else "offline",
           style=lambda r: "green" if r["online"] else "red"),
    Column("role"),
    Column("heartbeat_at", "last heartbeat"),
    Column("platform", spare=2),
    # an MCP server its workers declare shown as mcp:NAME (names only)
    Column("capabilities", show=lambda r: ", ".join(
        [*r["capabilities"], *(f"mcp:{n}" for n in r["mcp_servers"])]) or "-"),
    Column("software", spare=4),
    Column("queues"),
    Column("model_providers", "models",
           show=lambda r: _models(r["model_providers"], r["agent_models"]), spare=1),
    Column("skills", show=lambda r: str(len(r["skills"])), justify="right", spare=3),
    Column("key_fingerprints", "key", show=_keys_cell, spare=6),
)
SANDBOX = Column("sandbox", spare=5)


def _models(providers: list[str], defaults: list[str]) -> str:
    shown = ", ".join(providers) or "-"
    return f"{shown} (default {', '.join(defaults)})" if defaults else shown


@daemons_app.command("key")
def key(as_json: JsonOption = False) -> None:
    """This SKILLQ_HOME's public key (made now if it has none): enroll it on a deployment
    with `skillq daemons enroll`."""
    from shared import daemon_key

    settings = get_settings()
    own = daemon_key.load_or_create(settings.home)
    name = daemon_key.daemon_name(settings.daemon)
    if as_json:
        print(json.dumps({"daemon": name, "fingerprint": own.fingerprint,
                          "public_key": own.public_text(name), "path": str(own.path)}))
        return
    print(own.public_text(name))


def _key_json(k: EnrolledKey) -> dict[str, Any]:
    return {"fingerprint": k.fingerprint, "daemon": k.daemon, "public_key": k.public_key,
            "enrolled_via": k.enrolled_via, "enrolled_at": k.enrolled_at,
            "revoked_at": k.revoked_at}


KEY_COLUMNS = (
    Column("fingerprint", wrap=False),
    Column("daemon", wrap=False),
    Column("enrolled_at", "enrolled"),
    Column("enrolled_via", "via"),
    Column("revoked_at", "revoked"),
)


@daemons_app.command("keys")
def keys(as_json: ListJsonOption = False) -> None:
    """The enrolled daemon keys, revoked ones too (they are never enrolled again)."""
    from orchestrator.connect import connect
    from shared.db import daemon_keys
    from shared.db.session import transaction

    conn = connect(workers=False, refuse_revoked_key=False)
    with transaction(conn.endpoints.database_url) as session:
        found = [_key_json(k) for k in daemon_keys.all_keys(session)]
    emit(found, KEY_COLUMNS, as_json=as_json, title="daemon keys",
         empty="no daemon key is enrolled yet")


def _read_key_arg(given: str) -> str:
    if given == "-":
        return sys.stdin.read()
    if given.startswith(("ssh-ed25519 ", "-----BEGIN")):
        return given
    path = Path(given).expanduser()
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise KeyRegistryError(f"{given!r} is neither a public key line nor a readable file "
                               f"({exc.strerror})") from None


@daemons_app.command("enroll")
def enroll(
    public_key: Annotated[str, typer.Argument(
        help="The line `skillq daemons key` printed on that machine, a file holding it, "
             "or - for standard input.", show_default=False)],
    name: Annotated[str | None, typer.Option(
        "--name", help="The daemon it belongs to (default: the line's skillq:<daemon>).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Enroll a daemon key from a machine that does not enroll its own (one without the
    database credentials): workers then accept the messages it signs."""
    from orchestrator.connect import connect
    from shared import daemon_key
    from shared.db import daemon_keys
    from shared.db.session import transaction

    public = daemon_key.parse_public(_read_key_arg(public_key))
    daemon = name or public.daemon
    if not daemon:
        raise KeyRegistryError("name the daemon this key belongs to: --name NAME (the key "
                               "has no skillq:<daemon> comment)")
    if not DAEMON_NAME.fullmatch(daemon):
        raise KeyRegistryError(f"{daemon!r} is not a daemon name (letters, digits, '.', "
                               "'_', '-'; at most 64)")
    conn = connect(workers=False, refuse_revoked_key=False)
    with transaction(conn.endpoints.database_url) as session:
        done = daemon_keys.enroll_by_hand(session, public, daemon)
        item = {**_key_json(done.key), "new": done.new}
    if as_json:
        print(json.dumps(jsonable(item)))
    elif done.new:
        out.print(f"enrolled {item['fingerprint']} for daemon {item['daemon']}", markup=False)
    else:
        out.print(f"{item['fingerprint']} is already enrolled (daemon {item['daemon']}, "
                  f"since {text(item['enrolled_at'])})", markup=False)


@daemons_app.command("revoke")
def revoke(
    target: Annotated[str, typer.Argument(help="A key fingerprint (SHA256:...), or a daemon "
                                          "name: all of its keys.", show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="A JSON array, one object per "
                                          "key it names, for scripts.")] = False,
) -> None:
    """Revoke a daemon key: workers refuse its messages within SKILLQ_KEY_REFRESH_S, and it
    is never enrolled again (the daemon needs a new key)."""
    from orchestrator.connect import connect
    from shared.db import daemon_keys
    from shared.db.session import transaction

    conn = connect(workers=False, refuse_revoked_key=False)
    with transaction(conn.endpoints.database_url) as session:
        fresh, before = daemon_keys.revoke(session, target)
        items = [{**_key_json(k), "revoked_now": k in fresh} for k in [*fresh, *before]]
    if as_json:
        print_json(items)
        return
    for item in items:
        what = "revoked" if item["revoked_now"] else "already revoked:"
        out.print(f"{what} {item['fingerprint']} (daemon {item['daemon']})", markup=False)
    if fresh:
        out.print(f"workers refuse its messages within {conn.settings.key_refresh_s:g} s "
                  "(SKILLQ_KEY_REFRESH_S)", markup=False)
