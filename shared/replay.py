"""Which signed messages already ran: a message's nonce is marked once its task finished.

The mark lives in the result backend's Redis, ``skillq:msg-done:<nonce>``, until the
message expires (after that the expiry check refuses it anyway), so it costs about
100 bytes per message for at most SKILLQ_MESSAGE_TTL_S. It is written when the task
ends (``task_postrun``, in the process that ran it), not when the message arrives: a
broker redelivery of a message whose task never finished (its worker was killed, the
visibility timeout passed) still runs, and the step claims in PostgreSQL keep it from
running a step twice (lifecycle/transitions/). A task that rejected its message to have
it requeued (a database outage) did not finish: its message is not marked.

Redis unreachable: the check lets the message through (logged once per outage) rather
than dropping work; the signature, key and expiry checks still hold.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from redis import Redis
from redis.exceptions import RedisError

log = logging.getLogger(__name__)
PREFIX = "skillq:msg-done:"


class ReplayGuard:
    def __init__(self, client: Callable[[], Redis | None], skew_s: float) -> None:
        self._client = client
        self.skew_s = skew_s
        self._down = False
        self._missing_warned = False

    def _redis(self) -> Redis | None:
        found = self._client()
        if found is None and not self._missing_warned:
            self._missing_warned = True
            log.warning("the result backend is not Redis: replayed task messages cannot "
                        "be recognised (signatures and expiry are still checked)")
        return found

    def _outage(self, exc: RedisError, what: str) -> None:
        if not self._down:
            log.warning("cannot %s in Redis (%s): replays are not recognised until it is "
                        "back", what, exc)
        self._down = True

    def finished(self, nonce: str) -> bool:
        """Whether the task of the message with this nonce already ran to its end."""
        client = self._redis()
        if client is None:
            return False
        try:
            found = bool(client.exists(PREFIX + nonce))
        except RedisError as exc:
            self._outage(exc, "look up finished messages")
            return False
        self._down = False
        return found

    def mark_finished(self, nonce: str, expires_at: float) -> None:
        client = self._redis()
        if client is None:
            return
        keep_s = max(1, int(expires_at - time.time() + self.skew_s) + 1)
        try:
            client.set(PREFIX + nonce, b"1", ex=keep_s)
        except RedisError as exc:
            self._outage(exc, "mark a message finished")
            return
        self._down = False
