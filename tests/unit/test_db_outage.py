"""shared.db.backoff: an outage is reported once when it starts and once when it ends, a
bad query is not retried, and the give-up bound counts from the outage's start."""

from __future__ import annotations

import psycopg
import pytest
import tenacity

from shared.db.outage import Outage, first_line


class Flaky:
    """Fails ``times`` times with ``error``, then returns "ok"."""

    def __init__(self, times: int, error: Exception) -> None:
        self.left, self.error, self.calls = times, error, 0

    def __call__(self) -> str:
        self.calls += 1
        if self.left:
            self.left -= 1
            raise self.error
        return "ok"


def watched(give_up_s: float | None = None) -> tuple[Outage, list[str]]:
    heard: list[str] = []
    outage = Outage(on_down=lambda exc: heard.append(f"down: {first_line(exc)}"),
                    on_up=lambda _s: heard.append("up"), max_wait_s=0.01, give_up_s=give_up_s)
    return outage, heard


def refused() -> psycopg.OperationalError:
    return psycopg.OperationalError("connection refused\nIs the server running?")


def test_an_outage_is_said_once_when_it_starts_and_once_when_it_ends() -> None:
    outage, heard = watched()
    flaky = Flaky(4, refused())
    assert outage.call(flaky) == "ok"
    assert flaky.calls == 5
    assert heard == ["down: connection refused", "up"]
    assert outage.call(flaky) == "ok" and heard == ["down: connection refused", "up"]


def test_a_bad_query_is_not_retried() -> None:
    outage, heard = watched()
    flaky = Flaky(1, ValueError("not an outage"))
    with pytest.raises(ValueError):
        outage.call(flaky)
    assert flaky.calls == 1 and heard == []


def test_it_gives_up_after_the_bound() -> None:
    outage, heard = watched(give_up_s=0.05)
    with pytest.raises(tenacity.RetryError):
        outage.call(Flaky(10_000, refused()))
    assert heard == ["down: connection refused"]


def test_an_outage_met_outside_call_is_said_once() -> None:
    outage, heard = watched()
    outage.down(refused())
    assert outage.call(Flaky(2, refused())) == "ok"
    assert heard == ["down: connection refused", "up"]
