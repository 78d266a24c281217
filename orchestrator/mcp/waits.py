"""A run's questions and approvals put to the MCP client that started it (docs/waits.md):
by elicitation while run_skill follows the run, when the client said it shows forms;
otherwise they wait in the inbox, for the inbox/answer/approve/reject tools, the CLI or
the dashboard.

The SDK speaks two protocol eras, and each asks its own way:

- a handshake-era connection (up to 2025-11-25) takes requests from the server: each
  new wait is asked mid-call (``elicitation/create``) while the run is still followed,
  and a form still open when the run ends is withdrawn;
- a 2026-07-28 connection takes none: run_skill returns an InputRequiredResult naming
  the new waits, the client asks its user and calls run_skill again with the replies and
  the request state (the run, the deadline, the waits asked; sealed by MCPServer, so a
  client cannot point it at another run), and the call follows the run on from there.

A wait is put to the client once: a decline or a dismissal leaves it open, for the tools
or anyone else, and the run is followed on. An accepted reply goes through
orchestrator/waits.py as the CLI's does, decided by ``mcp:<client name>``.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from orchestrator.waits import Decided, Waiting, answer, approve, inbox, reject
from shared.db.wait_models import APPROVAL
from shared.errors import SkillqError, WaitError

if TYPE_CHECKING:
    from orchestrator.connect import Connection
    from orchestrator.launch import Progress
    from shared.db.models import PipelineRun

log = logging.getLogger(__name__)

LOOK_EVERY_S = 0.5  # how soon a new wait is asked after it opens
SCALARS = frozenset({"string", "number", "integer", "boolean"})  # what a form field holds
SHOWN_CHARS = 2000  # of each value an approval shows, in the form's message
NO_REASON = "rejected from an MCP client's form, no reason given"
KEY_PREFIX = "wait-"  # an InputRequiredResult's request key: wait-<id>


# -- the form a wait is asked with ---------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Form:
    wait: Waiting
    message: str
    schema: dict[str, Any]
    fields: Mapping[str, str] = field(default_factory=dict)  # an approval's: key -> input

    def request(self) -> ElicitRequest:
        return ElicitRequest(params=ElicitRequestFormParams(
            message=self.message, requested_schema=self.schema))


def form(wait: Waiting) -> Form:
    where = f"(run {wait.run_id}, step {wait.step_id} of {wait.skill})"
    return _approval(wait, where) if wait.kind == APPROVAL else _question(wait, where)


def _question(wait: Waiting, where: str) -> Form:
    prop: dict[str, Any] = {"type": "string", "title": "Answer"}
    choices = list(wait.choices)
    if choices and not wait.free_text:
        prop["enum"] = choices
    elif choices:
        prop["description"] = "One of: " + "; ".join(choices) + "; or your own words."
    if isinstance(wait.default, str) and (wait.free_text or wait.default in choices):
        prop["default"] = wait.default
    return Form(wait, f"{wait.prompt}\n\n{where}", _object({"answer": prop}, ["answer"]))


def _approval(wait: Waiting, where: str) -> Form:
    props: dict[str, Any] = {"approve": {
        "type": "boolean", "title": "Approve",
        "description": "Yes approves, with the inputs below; no rejects."}}
    fields: dict[str, str] = {}
    left: list[str] = []
    for spec in wait.form:
        name, vtype = str(spec["name"]), str(spec.get("type", "string"))
        if vtype not in SCALARS:  # a list, an object or a file has no form field
            left.append(name)
            continue
        # An input may be named as the form's own fields are: it then takes another key.
        key = name if name not in ("approve", "reason") else f"input_{name}"
        prop: dict[str, Any] = {"type": vtype, "title": name}
        if spec.get("description"):
            prop["description"] = " ".join(str(spec["description"]).split())
        if _fits(spec.get("default"), vtype):
            prop["default"] = spec["default"]
        props[key], fields[key] = prop, name
    props["reason"] = {"type": "string", "title": "Reason",
                       "description": "Why, when you reject it."}
    shown = "".join(f"\n{k}: {_shown(v)}" for k, v in wait.shown.items())
    note = (f"\n\nIts other inputs ({', '.join(left)}) keep their defaults here; the "
            "approve tool sets them." if left else "")
    message = f"{wait.prompt}\n{shown}\n\n{where}{note}" if shown else \
        f"{wait.prompt}\n\n{where}{note}"
    return Form(wait, message, _object(props, ["approve"]), fields)


def _object(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required}


def _fits(value: Any, vtype: str) -> bool:
    if value is None:
        return False
    if vtype == "boolean":
        return isinstance(value, bool)
    if vtype in ("number", "integer"):
        return isinstance(value, int | float) and not isinstance(value, bool) and (
            vtype == "number" or float(value).is_integer())
    return isinstance(value, str)


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"


def decide(conn: Connection, asked: Form, content: Mapping[str, Any] | None,
           by: str) -> Decided:
    """An accepted form's reply as the decision it makes (blocking)."""
    wait, reply = asked.wait, dict(content or {})
    which = f"#{wait.id}"
    if wait.kind != APPROVAL:
        text = reply.get("answer")
        return answer(conn, wait.run_id, which, text=None if text is None else str(text),
                      by=by)
    verdict = reply.get("approve")
    if verdict is True:
        given = {name: _typed(reply[key]) for key, name in asked.fields.items()
                 if reply.get(key) is not None}
        return approve(conn, wait.run_id, which, given=given, by=by)
    if verdict is False:
        reason = str(reply.get("reason") or "").strip() or NO_REASON
        return reject(conn, wait.run_id, which, reason=reason, by=by)
    raise WaitError(f"approval #{wait.id}: the form came back without approve yes or no")


def _typed(value: Any) -> Any:
    # A form's number may come back as 3.0 for an integer input, which would not fit it.
    return int(value) if isinstance(value, float) and value.is_integer() else value


# -- who is asked, and how ---------------------------------------------------------------

ASK_MID_CALL, ASK_IN_RESULT = "mid-call", "in-result"


def how_to_ask(ctx: Context) -> str | None:
    """ASK_MID_CALL, ASK_IN_RESULT, or None: this client shows no forms (or this
    connection cannot ask it: a stateless handshake-era HTTP request)."""
    caps = ctx.client_capabilities
    elicit = caps.elicitation if caps is not None else None
    # An empty elicitation capability (2025-06-18's) means forms.
    if elicit is None or (elicit.form is None and elicit.url is not None):
        return None
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return ASK_IN_RESULT
    return ASK_MID_CALL if ctx.session.can_send_request else None


def decided_by(ctx: Context) -> str:
    params = ctx.session.client_params
    info = getattr(params, "client_info", None) if params is not None else None
    name = " ".join(str(getattr(info, "name", "") or "").split())
    return f"mcp:{name}"[:128] if name else "mcp"


# -- following a run and asking its waits --------------------------------------------------

@dataclass(slots=True)
class Following:
    """One run_skill's hold on its run, across the calls of a 2026-07-28 client."""

    run_id: str
    until: float  # time.time(): the caller's timeout, from its first call
    asked: set[int] = field(default_factory=set)

    def state(self) -> str:
        return json.dumps({"run": self.run_id, "until": self.until,
                           "asked": sorted(self.asked)})

    @classmethod
    def resumed(cls, state: str) -> Following:
        try:
            data = json.loads(state)
            return cls(str(data["run"]), float(data["until"]),
                       {int(i) for i in data["asked"]})
        except (ValueError, KeyError, TypeError):
            raise SkillqError("run_skill was called again with a request state it did not "
                              "give; call it afresh") from None


class _Asking(Exception):
    """Stops wait_run: the waits go to a 2026-07-28 client in the tool's result."""

    def __init__(self, waits: list[Waiting]) -> None:
        super().__init__(f"{len(waits)} wait(s) to ask")
        self.waits = waits


class _Looker:
    """wait_run's on_progress, on its thread, called as it looks at the run: every
    LOOK_EVERY_S, the run's open waits not yet asked go to ``found``."""

    def __init__(self, conn: Connection, held: Following,
                 found: Callable[[list[Waiting]], None]) -> None:
        self.conn, self.held, self.found = conn, held, found
        self.next_at = 0.0

    def __call__(self, _: Progress) -> None:
        if time.monotonic() < self.next_at:
            return
        self.next_at = time.monotonic() + LOOK_EVERY_S
        fresh = [w for w in inbox(self.conn, self.held.run_id) if w.id not in self.held.asked]
        if fresh:
            self.held.asked.update(w.id for w in fresh)
            self.found(fresh)


def _wait(conn: Connection, held: Following, look: _Looker | None) -> PipelineRun:
    from orchestrator.launch import wait_run

    return wait_run(conn, held.run_id, timeout_s=max(held.until - time.time(), 0.0),
                    on_outage=lambda _: None, on_progress=look)


async def follow(ctx: Context, conn: Connection, held: Following
                 ) -> PipelineRun | InputRequiredResult:
    """The run's final record, its waits asked meanwhile as this client can be asked;
    or, for a 2026-07-28 client, the waits to ask before the next call."""
    how = how_to_ask(ctx)
    if how is None:
        return await anyio.to_thread.run_sync(_wait, conn, held, None)
    if how == ASK_IN_RESULT:
        def stop(waits: list[Waiting]) -> None:
            raise _Asking(waits)

        try:
            return await anyio.to_thread.run_sync(_wait, conn, held, _Looker(conn, held, stop))
        except _Asking as asking:
            return InputRequiredResult(
                input_requests={f"{KEY_PREFIX}{w.id}": form(w).request()
                                for w in asking.waits},
                request_state=held.state())
    return await _follow_asking(ctx, conn, held)


async def _follow_asking(ctx: Context, conn: Connection, held: Following) -> PipelineRun:
    send, receive = anyio.create_memory_object_stream[list[Waiting]](math.inf)

    def found(waits: list[Waiting]) -> None:
        anyio.from_thread.run_sync(send.send_nowait, waits)

    failed: SkillqError | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(_ask_each, ctx, conn, receive)
        try:
            run = await anyio.to_thread.run_sync(_wait, conn, held, _Looker(conn, held, found))
        except SkillqError as exc:  # raised past the task group, not as its group
            failed = exc
        finally:
            tg.cancel_scope.cancel()  # a form still open is withdrawn: the run is over
    if failed is not None:
        raise failed
    return run


async def _ask_each(ctx: Context, conn: Connection,
                    receive: MemoryObjectReceiveStream[list[Waiting]]) -> None:
    # One form at a time: a person reads one question before the next.
    async for waits in receive:
        for wait in waits:
            asked = form(wait)
            try:
                reply = await ctx.session.elicit_form(asked.message, asked.schema,
                                                      related_request_id=ctx.request_id)
            except (MCPError, ValidationError) as exc:
                # refused, or a reply that is no form's: it stays open for the tools
                log.warning("wait #%s not asked by form: %s", wait.id, exc)
                continue
            await settle(conn, asked, reply, decided_by(ctx))


async def settle(conn: Connection, asked: Form, reply: ElicitResult, by: str) -> None:
    """An accepted reply decides its wait; a declined or dismissed one leaves it open. A
    reply the wait does not take (decided meanwhile, an input that does not fit) leaves
    it open too: it was asked once, and the tools still decide it."""
    if reply.action != "accept":
        return
    try:
        await anyio.to_thread.run_sync(decide, conn, asked, reply.content, by)
    except SkillqError as exc:
        log.warning("wait #%s left open: %s", asked.wait.id, exc)


async def settle_replies(ctx: Context, conn: Connection, held: Following) -> None:
    """A 2026-07-28 client's replies to the waits the last call asked."""
    replies = ctx.input_responses or {}
    if not replies:
        return
    still_open = {w.id: w for w in await anyio.to_thread.run_sync(inbox, conn, held.run_id)}
    by = decided_by(ctx)
    for key, reply in replies.items():
        number = key.removeprefix(KEY_PREFIX)
        wait = still_open.get(int(number)) if number.isdigit() else None
        if wait is not None and wait.id in held.asked and isinstance(reply, ElicitResult):
            await settle(conn, form(wait), reply, by)
