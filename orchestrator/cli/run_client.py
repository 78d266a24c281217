"""`skillq run` and `skillq wait` as thin clients of a running stack's local API.

A cold `skillq run` used to spend most of its time importing Celery, kombu, SQLAlchemy,
psycopg, cryptography and the vault code before it submitted anything. When
SKILLQ_HOME/api.json names a live local API (orchestrator/api/), the run is submitted and
followed through it instead, and this process imports the standard library, typer and
rich only (tests/unit/test_run_client.py holds it to that): no shared.vault, pydantic,
SQLAlchemy or Celery here, not even indirectly.

What the user sees is the direct path's, line for line: the run is followed by the same
code (follow.py), with the same progress bar (run_bar.py), the same --json object and
lines (built by the server with orchestrator/run_report.py), the same exit codes and
Ctrl-C handling. Whenever the API
cannot be used safely the caller takes the direct path: no api.json, a dead server, a
refused connection (nothing was sent), another environment's endpoints, a .env file
here that sets SKILLQ_ variables (only shared/settings.py reads those), or an inputs
file the direct path would refuse (it names the problem exactly).

A server the API cannot reach is met as the direct path meets it. Submitting, the API
has recorded nothing (orchestrator/api/runs.py ServerDown), so the direct path takes
over and does what it does at the start (starts a stopped embedded server, or says in
one line that the database is unreachable). Following, a database outage is waited out
by the direct path's own policy (shared/db/outage.py FollowingRun, imported only then):
the same lines, the same backoff, the same bound (SKILLQ_DATABASE_OUTAGE_S: this
environment's, else the API's).
"""

from __future__ import annotations

import json
import os
import sys
import urllib.parse
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.api.apifile import ApiInfo, endpoints_key, home_of, read_api
from orchestrator.cli import common
from orchestrator.cli.follow import Cancelled, Ended, FollowedRun, Lost, follow
from orchestrator.cli.loopback_http import BrokeOff, NotConnected, request
from shared.errors import ApiError, Relayed

if TYPE_CHECKING:
    from shared.db.outage import FollowingRun

POLL_WAIT_S = 10.0  # one long-poll; the server answers at once on any change
SUBMIT_TIMEOUT_S = 300.0  # the server's checks may wait for a starting worker
DEFAULT_OUTAGE_S = 600.0  # SKILLQ_DATABASE_OUTAGE_S's default, for an API that sent none


class Unreachable(Exception):
    """The API cannot be used, and nothing it would act on reached it: take the direct
    path. ``sent``: the request may have reached it (unsafe to submit again)."""

    def __init__(self, why: str, *, sent: bool) -> None:
        super().__init__(why)
        self.sent = sent


class ServerOutage(Relayed):
    """The API could not reach its database (or broker) and did nothing; ``bound_s`` is
    its SKILLQ_DATABASE_OUTAGE_S. Uncaught, it is the one line (exit 3) the direct path
    prints of a server down before anything ran."""

    def __init__(self, found: dict[str, Any], message: str, exit_code: int) -> None:
        super().__init__(message, exit_code)
        self.server = str(found["outage"])
        # the server's own error, kept as SQLAlchemy keeps psycopg's: what first_line says
        self.orig = ConnectionError(str(found.get("detail") or message))
        bound = found.get("outage_s")
        self.bound_s = float(bound) if isinstance(bound, int | float) and bound > 0 else None


class Client:
    def __init__(self, info: ApiInfo) -> None:
        self.port = info.port
        self.headers = {"Authorization": f"Bearer {info.token}",
                        "Content-Type": "application/json"}

    def call(self, method: str, path: str, body: Any = None,
             timeout_s: float = 30.0) -> dict[str, Any]:
        try:
            data = None if body is None else json.dumps(body, ensure_ascii=False).encode()
        except UnicodeEncodeError:  # argv's bytes that are not UTF-8: nothing is sent, and
            # the direct path names the argument (shared/inputs.py, cli/app.py)
            raise Unreachable("the request holds text that is not UTF-8", sent=False) from None
        try:
            status, raw = request(self.port, method, path, self.headers, data, timeout_s)
        except NotConnected as exc:
            raise Unreachable(str(exc), sent=False) from None
        except BrokeOff as exc:
            raise Unreachable(str(exc), sent=True) from None
        try:
            found = json.loads(raw)
        except ValueError:
            found = None
        if status < 300 and isinstance(found, dict):
            return found
        refused = _error_of(found)
        if refused is None:  # not the skillq API answering: nothing was done
            raise Unreachable(f"HTTP {status} from 127.0.0.1:{self.port}", sent=False)
        message, code = refused
        if status == 503 and isinstance(found, dict) and found.get("outage"):
            raise ServerOutage(found, message, code)
        if status in (401, 421):
            raise ApiError(f"{message}; SKILLQ_HOME/api.json names another server or is "
                           "stale: restart the API (`skillq up`) or remove the file to "
                           "submit without it")
        raise Relayed(message, code)


def _error_of(found: Any) -> tuple[str, int] | None:
    try:
        return str(found["error"]), int(found["exit_code"])
    except (KeyError, TypeError, ValueError):
        return None


def _client() -> Client | None:
    """A client of this SKILLQ_HOME's local API, or None: take the direct path."""
    env = os.environ
    if _dotenv_sets_skillq(Path(".env")):
        return None
    info = read_api(home_of(env))
    if info is None or info.endpoints != endpoints_key(env) or not _alive(info.pid):
        return None
    return Client(info)


def _dotenv_sets_skillq(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return any(line.strip().removeprefix("export ").lstrip().startswith("SKILLQ_")
               for line in text.splitlines())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: the connection will tell
    return True


def _inputs_object(path: Path) -> dict[str, Any] | None:
    """The inputs file's object; None when the direct path would refuse it (it says why)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def submit_through_api(name: str, pairs: list[str], inputs_file: Path | None, *,
                       as_json: bool, detach: bool, vault_opt: Path | None) -> bool:
    """`skillq run` through the local API; False (nothing done) to take the direct path."""
    client = _client()
    if client is None:
        return False
    vault = vault_opt if vault_opt is not None else Path(os.environ.get("SKILLQ_VAULT")
                                                         or "vault")
    body: dict[str, Any] = {"skill": name, "vault": str(vault.absolute()), "pairs": pairs,
                            "inputs_file": None, "workdir": str(Path.cwd()),
                            "triggered_by": "cli"}
    if inputs_file is not None:
        data = _inputs_object(inputs_file)
        if data is None:
            return False
        body.update(inputs_file=data, inputs_file_dir=str(inputs_file.absolute().parent),
                    inputs_file_name=inputs_file.name)
    try:
        run_id = str(client.call("POST", "/v1/runs", body, SUBMIT_TIMEOUT_S)["run_id"])
    except ServerOutage:  # nothing recorded: the direct path meets the server as it would
        return False
    except Unreachable as exc:
        if not exc.sent:
            return False
        raise ApiError(f"the local API broke off while submitting ({exc}); the run may "
                       f"have been recorded: `skillq runs {name}`") from None
    common.err.print(f"run {run_id}", markup=False)
    if detach:
        common.out.print(run_id, markup=False)
        return True
    follow(ApiRun(client, run_id), as_json, cancel_on_interrupt=True)
    return True


def wait_through_api(run_id: str, as_json: bool) -> bool:
    """`skillq wait` through the local API; False (nothing done) for the direct path."""
    client = _client()
    if client is None:
        return False
    try:
        client.call("GET", f"/v1/runs/{urllib.parse.quote(run_id, safe='')}?wait_s=0")
    except (Unreachable, UnicodeEncodeError):  # a run id that is not UTF-8: no such run
        return False
    except ServerOutage:  # the direct path meets the server down as it would
        return False
    common.err.print(f"run {run_id}", markup=False)
    follow(ApiRun(client, run_id), as_json, cancel_on_interrupt=False)
    return True


class ApiRun:
    """A run followed through the local API: the thin side of cli/follow.py."""

    def __init__(self, client: Client, run_id: str) -> None:
        self.client, self.run_id = client, run_id
        self.path = f"/v1/runs/{urllib.parse.quote(run_id, safe='')}"

    def wait(self, quiet: bool, on_end: Callable[[Ended], None]) -> Ended:
        from orchestrator.cli.run_bar import progress_bar

        token: str | None = None
        outage: FollowingRun | None = None  # from the first outage on

        def poll() -> dict[str, Any]:
            # while the database is away, an answer at once: its return is said when it
            # comes
            wait_s = 0 if outage is not None and outage.down_since is not None \
                else POLL_WAIT_S
            query = urllib.parse.urlencode({"wait_s": wait_s,
                                            **({"after": token} if token else {})})
            return self.client.call("GET", f"{self.path}?{query}",
                                    timeout_s=POLL_WAIT_S + 30)

        try:
            with progress_bar(self.run_id, quiet) as show:
                while True:
                    try:
                        found = poll() if outage is None else outage.call(poll)
                    except ServerOutage as exc:  # the database: waited out as the
                        outage = _following(self.run_id, exc)  # direct path does
                        outage.down(exc)
                        found = outage.call(poll)  # DatabaseUnreachable after the bound
                    if found["ended"]:
                        return _ended(found)
                    show(int(found["total"]), int(found["done"]), found["counts"])
                    token = str(found["token"])
        except Unreachable as exc:
            # The run is recorded and goes on without the API: followed from here instead.
            raise Lost(f"lost the local API ({exc})", partial(_direct, self.run_id)) from None

    def cancel(self, reason: str) -> Cancelled:
        try:
            done = self.client.call("POST", f"{self.path}/cancel", {"reason": reason},
                                    SUBMIT_TIMEOUT_S)
        except Unreachable as exc:
            raise ApiError(f"lost the local API while cancelling run {self.run_id} ({exc}); "
                           f"`skillq cancel {self.run_id}`") from None
        return Cancelled(_ended(done["run"]), bool(done["ended_now"]), len(done["stopped"]))


    def open_waits(self) -> list[dict[str, Any]]:
        return list(self.client.call("GET", f"{self.path}/waits")["waits"])

    def decide(self, wait: dict[str, Any], decision: str, body: dict[str, Any]) -> None:
        self.client.call("POST", f"{self.path}/waits/{int(wait['id'])}/{decision}", body)


def _ended(found: dict[str, Any]) -> Ended:
    """The server's end-of-run answer (built with orchestrator/run_report.py)."""
    return Ended(str(found["state"]), found["result"], str(found["failure"]),
                 str(found["success"]))


def _direct(run_id: str) -> FollowedRun:
    from orchestrator.cli.direct_run import DirectRun

    return DirectRun.connecting(run_id)


def _following(run_id: str, exc: ServerOutage) -> FollowingRun:
    """The direct path's policy for a run followed through an outage (wait_run's), its
    lines printed as that path prints them (whole, above the progress bar)."""
    from shared.db.outage import FollowingRun

    return FollowingRun(run_id, _outage_bound(exc),
                        lambda line: print(line, file=sys.stderr, flush=True),
                        retry_on=lambda e: isinstance(e, ServerOutage))


def _outage_bound(exc: ServerOutage) -> float:
    """SKILLQ_DATABASE_OUTAGE_S as this command's environment sets it (a .env file here
    sends it the direct way), else the API's (the setting's default when it set none)."""
    try:
        mine = float(os.environ.get("SKILLQ_DATABASE_OUTAGE_S", ""))
    except ValueError:
        mine = 0.0
    return mine if mine > 0 else exc.bound_s or DEFAULT_OUTAGE_S
