"""The shared store: large values travel between machines as references to it.

Content-addressed blobs in PostgreSQL, which every daemon reaches (daemons share no
filesystem). A value bigger than the inline limit is replaced by ``{"$ref": "sha256:..."}``
wherever it would be recorded or sent; small values stay inline.

Files travel the same way: a value of type ``file`` is ``{"$ref": KEY, "name", "size"}``
(shared/valuetypes.py), its bytes stored here under their media type.
"""

from __future__ import annotations

import hashlib
import json
import mimetypes
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from shared.db.models import Artifact

REF_KEY = "$ref"
JSON_MEDIA = "application/json"
FILE_MEDIA = "application/octet-stream"  # a file whose name says nothing of its kind
MEDIA_MAX = 100  # the media_type column's width


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


def put_bytes(session: Session, data: bytes, media_type: str) -> str:
    key = "sha256:" + hashlib.sha256(data).hexdigest()
    session.execute(insert(Artifact).values(key=key, size=len(data), media_type=media_type,
                                            content=data).on_conflict_do_nothing())
    return key


def media_type_for(name: str) -> str:
    guessed, _ = mimetypes.guess_type(name, strict=False)
    return (guessed or FILE_MEDIA)[:MEDIA_MAX]


def has(session: Session, key: str) -> bool:
    return session.scalar(select(Artifact.key).where(Artifact.key == key)) is not None


def get_bytes(session: Session, key: str) -> bytes:
    artifact = session.get(Artifact, key)
    if artifact is None:
        raise KeyError(f"artifact {key} is not in the store")
    return artifact.content


def is_ref(value: Any) -> bool:
    """Whether ``value`` points into the store: a packed value, a screenshot, a file."""
    return isinstance(value, dict) and REF_KEY in value and isinstance(value[REF_KEY], str) \
        and set(value) <= _REF_KEYS


_REF_KEYS = frozenset({REF_KEY, "name", "size"})


def _is_packed(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {REF_KEY}


def pack(session: Session, value: Any, inline_limit: int) -> Any:
    """``value`` itself when small, else a reference to it in the store."""
    data = canonical_json(value)
    if len(data) <= inline_limit:
        return value
    return {REF_KEY: put_bytes(session, data, JSON_MEDIA)}


def unpack(session: Session, value: Any) -> Any:
    """What ``pack`` was given (a record's outputs or inputs as a whole, never one file)."""
    if _is_packed(value):
        return json.loads(get_bytes(session, value[REF_KEY]))
    return value
