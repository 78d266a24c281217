"""Signed task messages: what the Celery app factory installs (docs/security.md).

Sending: every task message a skillq app publishes is serialized by a kombu serializer
of its own (content type ``application/x-skillq-signed``, shared/envelope.py), signed
with the process's daemon key (shared/daemon_key.py, loaded on first use). Celery's
protocol 2 keeps the task name, id and ETA in headers the serializer never sees; a
``before_task_publish`` hook hands them over (for the very body object being
serialized), so the signature covers them too.

Receiving: the app's task class runs every message through ``Gate.admit`` in the
worker's main process, before Celery builds a request for it. A message that is unsigned,
names an unknown or revoked key, fails its signature, has expired or was issued in the
future, whose headers disagree with what was signed, or whose task already finished
(a replay) is refused: one log line says why and whose key it named, and the message is
discarded (acknowledged, never requeued, never run). An admitted message keeps its
decoded body (it is not decoded again in that process) and carries who signed it to the
task as ``request.skillq_sender``; when its task ends, its nonce is marked finished
(shared/replay.py). The pool process decodes the envelope again without checking it:
it holds exactly the bytes the gate checked.

The app accepts no other content type (``accept_content``), so Celery itself refuses a
plain JSON or pickle task message that would get past the gate. Results and events
stay plain JSON, unsigned, and so do remote-control messages (ping, inspect,
add/cancel_consumer): see the docs for what that leaves open.
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from celery import Celery, Task
from celery.signals import before_task_publish, task_postrun
from kombu.serialization import register
from kombu.utils import json as kombu_json
from redis import Redis

from shared.daemon_key import DaemonKey, load_or_create
from shared.envelope import CONTENT_TYPE, open_envelope, seal
from shared.errors import MessageRefused
from shared.keyring import KeyRing
from shared.replay import ReplayGuard
from shared.settings import Settings

log = logging.getLogger(__name__)
SENDER = "skillq_sender"  # the request attribute (and header) naming who signed a message
_REJECTED = "REJECTED"  # celery.states.REJECTED: the task gave its message back
_SHOWN = 200  # characters of a header value a log line quotes


@dataclass(frozen=True, slots=True)
class Binding:
    """What protocol 2 keeps in headers, for the body the serializer is about to sign."""

    task: str | None
    id: str | None
    eta: str | None


_binding: contextvars.ContextVar[tuple[object, Binding] | None] = \
    contextvars.ContextVar("skillq_binding", default=None)


def _bind_headers(sender: Any = None, body: Any = None, headers: Any = None,
                  **_: Any) -> None:
    if isinstance(headers, dict):
        _binding.set((body, Binding(headers.get("task"), headers.get("id"),
                                    headers.get("eta"))))


class Signer:
    """Seals message bodies with one SKILLQ_HOME's key (read on the first message)."""

    def __init__(self, home: Path, ttl_s: float) -> None:
        self.home = home
        self.ttl_s = ttl_s
        self._key: DaemonKey | None = None
        self._lock = threading.Lock()

    @property
    def key(self) -> DaemonKey:
        if self._key is None:
            with self._lock:
                if self._key is None:
                    self._key = load_or_create(self.home)
        return self._key

    def dumps(self, body: Any) -> str:
        bound = _binding.get()
        # A body sent without Celery's task headers is signed as bound to no task, which
        # no worker admits as a task message.
        found = bound[1] if bound is not None and bound[0] is body else Binding(None, None,
                                                                                None)
        return seal(body, self.key, task=found.task, task_id=found.id, eta=found.eta,
                    ttl_s=self.ttl_s, now=time.time())


def _unwrap(data: bytes | str) -> Any:
    """The decoder of the content type: the pool process's, after the gate checked these
    very bytes, so only the body is taken out (open_envelope's field checks, the gate's,
    would cost more on every step's path)."""
    text = data if isinstance(data, str) else bytes(data).decode("utf-8")
    body = json.loads(text)["body"]
    if not isinstance(body, str):
        raise ValueError("a signed envelope's body is JSON text")
    return kombu_json.loads(body)


_serializers: dict[tuple[str, float], tuple[str, Signer]] = {}
_gates: weakref.WeakKeyDictionary[Celery, Gate] = weakref.WeakKeyDictionary()
_install_lock = threading.Lock()


def _printable(value: object, limit: int = _SHOWN) -> str:
    """A value from a message as a log line may quote it: one line, cut short."""
    text = "".join(ch if ch.isprintable() else "?" for ch in str(value))
    return text if len(text) <= limit else text[:limit] + "..."


class Gate:
    """The check every task message passes in a worker before Celery takes it."""

    def __init__(self, keys: KeyRing, replay: ReplayGuard, skew_s: float) -> None:
        self.keys = keys
        self.replay = replay
        self.skew_s = skew_s

    def admit(self, message: Any) -> None:
        """Check ``message``; MessageRefused says why not. Admitted: the message's headers
        name its signer (``skillq_sender``) and its decoded body is kept."""
        headers = message.headers if isinstance(message.headers, dict) else {}
        headers.pop(SENDER, None)  # only the gate says who signed a message
        if message.content_type != CONTENT_TYPE:
            raise MessageRefused(f"unsigned (content type {message.content_type}); workers "
                                 f"take only signed task messages ({CONTENT_TYPE})")
        env = open_envelope(message.body)
        known = self.keys.get(env.key)
        if known is None and self.keys.unreadable:
            raise KeysUnreadable(env.key)
        if known is None:
            why = "" if self.keys.database_url else \
                " (this worker has no key registry: SKILLQ_DATABASE_URL is unset)"
            raise MessageRefused(f"signed with a key that is not enrolled{why}; enroll it "
                                 "with `skillq daemons enroll`", key=env.key)
        if known.revoked_at is not None:
            raise MessageRefused(f"signed with a key revoked on "
                                 f"{known.revoked_at:%Y-%m-%d %H:%M:%S %Z}",
                                 key=env.key, daemon=known.daemon)
        try:
            env.verify(known.public)
            env.check_time(time.time(), self.skew_s)
        except MessageRefused as exc:
            raise MessageRefused(exc.reason, key=env.key, daemon=known.daemon) from None
        said = (headers.get("task"), headers.get("id"), headers.get("eta"))
        if said != (env.task, env.id, env.eta):
            shown = ", ".join(map(_printable, said))
            raise MessageRefused(
                f"its headers (task, id, eta: {shown}) are not what was signed "
                f"({env.task}, {env.id}, {env.eta})", key=env.key, daemon=known.daemon)
        if self.replay.finished(env.nonce):
            raise MessageRefused("replayed: the task this message carried already finished",
                                 key=env.key, daemon=known.daemon)
        try:
            message._decoded_cache = env.payload()
        except ValueError as exc:  # signed, yet not JSON: a bug of the sender
            raise MessageRefused(f"its signed body is not JSON ({exc})", key=env.key,
                                 daemon=known.daemon) from None
        headers[SENDER] = {"key": env.key, "daemon": known.daemon, "nonce": env.nonce,
                           "expires_at": env.expires_at}


class KeysUnreadable(Exception):  # a signal to hold the message, not an error
    """The registry cannot be read and does not know the message's key (yet)."""


HOLD_S = 5.0  # how often a held message is checked again while the registry is down


def refusal_line(message: Any, exc: MessageRefused) -> str:
    headers = message.headers if isinstance(message.headers, dict) else {}
    info = message.delivery_info if isinstance(message.delivery_info, dict) else {}
    whose = f"key {exc.key}" if exc.key else "no key"
    if exc.daemon:
        whose += f" (daemon {exc.daemon})"
    return (f"refused task message {_printable(headers.get('task'))}"
            f"[{_printable(headers.get('id'))}] from queue "
            f"{_printable(info.get('routing_key'))}: {_printable(exc.reason, 4 * _SHOWN)}; "
            f"{whose}; discarded, not run")


def gated_strategy(task: Any, app: Any, consumer: Any, **kwargs: Any) -> Any:
    """Celery's default strategy behind the gate (``GatedTask.Strategy``)."""
    from celery.worker.strategy import default  # workers only: clients never import it

    handle = default(task, app, consumer, **kwargs)
    gate = _gates.get(app)
    if gate is None:  # an app that did not install signing: Celery as it is
        return handle
    errors = consumer.connection_errors

    def on_message(message: Any, body: Any, ack: Any, reject: Any, callbacks: Any,
                   **more: Any) -> Any:
        try:
            gate.admit(message)
        except KeysUnreadable as exc:
            # A database outage: the message stays ours, unacknowledged, and is checked
            # again until the registry answers; never discarded for want of it.
            log.warning("holding task message %s[%s]: its key %s is not among the keys "
                        "read before and the key registry cannot be read; checking again "
                        "in %.0f s", _printable(message.headers.get("task")),
                        _printable(message.headers.get("id")), exc, HOLD_S)
            consumer.timer.call_after(HOLD_S, lambda: on_message(
                message, body, ack, reject, callbacks, **more))
            return None
        except MessageRefused as exc:
            log.warning(refusal_line(message, exc))
            reject(log, errors, False)
            return None
        except Exception as exc:  # a bug in the check: refused too, never run unchecked
            log.exception(refusal_line(message, MessageRefused(
                f"the check itself failed ({type(exc).__name__}: {exc})")))
            reject(log, errors, False)
            return None
        return handle(message, body, ack, reject, callbacks, **more)

    return on_message


class GatedTask(Task):  # type: ignore[type-arg]
    """The app's task class: every message for any of its tasks passes the gate."""

    Strategy = "shared.signed_messages:gated_strategy"


def _mark_finished(sender: Any = None, task: Any = None, state: str | None = None,
                   **_: Any) -> None:
    if state == _REJECTED or task is None:
        return
    signed = getattr(task.request, SENDER, None)
    gate = _gates.get(task.app)
    if isinstance(signed, dict) and gate is not None:
        gate.replay.mark_finished(str(signed["nonce"]), float(signed["expires_at"]))


def _backend_redis(app: Celery) -> Redis | None:
    client = getattr(app.backend, "client", None)
    return client if isinstance(client, Redis) else None


def install(app: Celery, settings: Settings, *, database_url: str | None) -> str:
    """Make ``app`` sign what it sends and check what its workers take; the name of the
    serializer its tasks are to use."""
    home = settings.home.expanduser()
    with _install_lock:
        named = _serializers.get((str(home), settings.message_ttl_s))
        if named is None:
            signer = Signer(home, settings.message_ttl_s)
            named = (f"skillq-signed-{len(_serializers) + 1}", signer)
            register(named[0], signer.dumps, _unwrap, content_type=CONTENT_TYPE,
                              content_encoding="utf-8")
            _serializers[(str(home), settings.message_ttl_s)] = named
        before_task_publish.connect(_bind_headers, weak=False,
                                    dispatch_uid="skillq-signed-bind-headers")
        task_postrun.connect(_mark_finished, weak=False,
                             dispatch_uid="skillq-signed-mark-finished")
        ref = weakref.ref(app)  # the gate must not keep its app alive

        def backend_redis() -> Redis | None:
            found = ref()
            return None if found is None else _backend_redis(found)

        _gates[app] = Gate(KeyRing(database_url, settings.key_refresh_s,
                                   cache=settings.home.expanduser() / "keys" / "enrolled.json"),
                           ReplayGuard(backend_redis, settings.message_clock_skew_s),
                           settings.message_clock_skew_s)
    return named[0]

