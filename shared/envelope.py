"""The signed envelope a skillq task message travels in (``application/x-skillq-signed``).

One JSON object::

    {"v": 1, "key": "SHA256:...", "nonce": "...", "issued_at": 1764500000,
     "expires_at": 1764586400, "task": "skillq.execute_step", "id": "...", "eta": null,
     "body": "<the message body as JSON text>", "sig": "<Ed25519 signature, base64url>"}

The signature covers every other field: the bytes signed are ``DOMAIN`` followed by those
fields as canonical JSON (sorted keys, no spaces, ASCII only). The body is carried as
JSON *text*, so what was signed is exactly what is decoded, and nothing in it is parsed
before its signature is checked. ``task``, ``id`` and ``eta`` repeat the Celery protocol 2
headers the body does not hold: the worker's gate checks that the headers say the same
(shared/signed_messages.py). ``expires_at`` counts from when the message is due: its
ETA, if it has one later than now.

Everything here is pure (no I/O, no clock of its own): the unit tests give it ``now``.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from kombu.utils import json as kombu_json

from shared.daemon_key import DaemonKey
from shared.errors import MessageRefused

CONTENT_TYPE = "application/x-skillq-signed"
VERSION = 1
DOMAIN = b"skillq-task-message-v1\n"  # what else this key might sign can never look alike
FIELDS = frozenset({"v", "key", "nonce", "issued_at", "expires_at", "task", "id", "eta",
                    "body", "sig"})
SIGNATURE_BYTES = 64
_MAX_SHORT = 512  # key, nonce, task, id, eta: short strings


def canonical(fields: dict[str, Any]) -> bytes:
    return json.dumps(fields, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True).encode("ascii")


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def due_at(eta: str | None, now: float) -> float:
    """When the message may run: its ETA (ISO 8601, as Celery writes it) or now."""
    if not eta:
        return now
    try:
        return max(now, datetime.fromisoformat(eta).timestamp())
    except ValueError:
        return now


def seal(body: Any, key: DaemonKey, *, task: str | None, task_id: str | None,
         eta: str | None, ttl_s: float, now: float) -> str:
    """``body`` (what Celery would have sent as JSON) in a signed envelope."""
    fields: dict[str, Any] = {
        "v": VERSION, "key": key.fingerprint, "nonce": _b64(secrets.token_bytes(16)),
        "issued_at": int(now), "expires_at": int(due_at(eta, now) + ttl_s) + 1,
        "task": task, "id": task_id, "eta": eta, "body": kombu_json.dumps(body)}
    fields["sig"] = _b64(key.private.sign(DOMAIN + canonical(fields)))
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=True)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise ValueError("a field appears twice")
    return found


@dataclass(frozen=True, slots=True)
class Envelope:
    key: str
    nonce: str
    issued_at: int
    expires_at: int
    task: str | None
    id: str | None
    eta: str | None
    body: str
    sig: bytes

    def signed_bytes(self) -> bytes:
        return DOMAIN + canonical({
            "v": VERSION, "key": self.key, "nonce": self.nonce, "issued_at": self.issued_at,
            "expires_at": self.expires_at, "task": self.task, "id": self.id, "eta": self.eta,
            "body": self.body})

    def verify(self, public: Ed25519PublicKey) -> None:
        try:
            public.verify(self.sig, self.signed_bytes())
        except InvalidSignature:
            raise MessageRefused("bad signature: the message was altered after it was "
                                 "signed, or signed by another key than it names",
                                 key=self.key) from None

    def check_time(self, now: float, skew_s: float) -> None:
        if self.issued_at > now + skew_s:
            raise MessageRefused(
                f"issued {self.issued_at - now:.0f} s in the future: the sender's clock and "
                f"this worker's differ by more than SKILLQ_MESSAGE_CLOCK_SKEW_S ({skew_s:g} s)",
                key=self.key)
        if self.expires_at < now - skew_s:
            raise MessageRefused(
                f"expired {now - self.expires_at:.0f} s ago (it was valid for "
                f"{self.expires_at - self.issued_at} s from when it was due: "
                "SKILLQ_MESSAGE_TTL_S of the sender)", key=self.key)

    def payload(self) -> Any:
        """The body as Celery sent it (after ``verify``: before, it is unchecked)."""
        return kombu_json.loads(self.body)


def open_envelope(raw: bytes | bytearray | memoryview | str) -> Envelope:
    """The envelope's fields, checked for shape only (not for the signature)."""
    try:
        text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8")
        data = json.loads(text, object_pairs_hook=_no_duplicates)
        if not isinstance(data, dict) or set(data) != FIELDS:
            raise ValueError("not an envelope of the fields " + ", ".join(sorted(FIELDS)))
        if data["v"] != VERSION or isinstance(data["v"], bool):
            raise ValueError(f"version {data['v']!r}, this worker reads {VERSION}")
        for name in ("key", "nonce", "body", "sig"):
            if not isinstance(data[name], str):
                raise ValueError(f"{name} is not a string")
        for name in ("task", "id", "eta"):
            if data[name] is not None and not isinstance(data[name], str):
                raise ValueError(f"{name} is not a string")
        for name in ("key", "nonce", "task", "id", "eta"):
            if len(data[name] or "") > _MAX_SHORT:
                raise ValueError(f"{name} is too long")
        for name in ("issued_at", "expires_at"):
            if not isinstance(data[name], int) or isinstance(data[name], bool):
                raise ValueError(f"{name} is not a whole number of seconds")
        sig = _unb64(data["sig"])
        if len(sig) != SIGNATURE_BYTES:
            raise ValueError("the signature is not 64 bytes")
    except (ValueError, UnicodeDecodeError, binascii.Error) as exc:
        raise MessageRefused(f"malformed signed message: {exc}") from None
    return Envelope(key=data["key"], nonce=data["nonce"], issued_at=data["issued_at"],
                    expires_at=data["expires_at"], task=data["task"], id=data["id"],
                    eta=data["eta"], body=data["body"], sig=sig)
