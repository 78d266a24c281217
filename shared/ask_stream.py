"""The answer of `skillq ask` as it streams: the wire between the worker running the
model and the client printing it.

PostgreSQL NOTIFY on one channel, a JSON payload per piece (``{"run", "seq", "text"}``):
the database is what every client and worker already reach, with no broker of its own
(a RabbitMQ deployment has no Redis to publish on). A piece missed is harmless: the
answer is recorded in full with the run, and the client prints what it did not see.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

CHANNEL = "skillq_ask_text"
# NOTIFY payloads stop at 8000 bytes: JSON writes a control character in 6 (an escape),
# and no character takes more.
MAX_PIECE_CHARS = 1200


@dataclass(frozen=True, slots=True)
class Piece:
    run: str
    seq: int
    text: str


def encode(run: str, seq: int, text: str) -> Iterator[str]:
    """The payloads of ``text`` cut to fit NOTIFY, numbered on from ``seq``."""
    for n, start in enumerate(range(0, len(text), MAX_PIECE_CHARS)):
        yield json.dumps({"run": run, "seq": seq + n,
                          "text": text[start:start + MAX_PIECE_CHARS]}, ensure_ascii=False)


def decode(payload: str) -> Piece | None:
    """The piece a payload carries; None for one that is not a piece (never raises)."""
    try:
        data = json.loads(payload)
        return Piece(str(data["run"]), int(data["seq"]), str(data["text"]))
    except (ValueError, KeyError, TypeError):
        return None
