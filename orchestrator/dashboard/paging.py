"""Keyset pagination: a page is the rows after the previous page's last sort key.

A cursor is that key as text in the URL (``?after=...``). OFFSET would read and throw
away every earlier row, so a deep page of 100,000 runs would cost as much as all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from shared.errors import BadCursor

T = TypeVar("T")
SEP = "~"




@dataclass(frozen=True)
class Page(Generic[T]):
    items: Sequence[T]
    next_after: str | None  # the cursor of the next page; None on the last one


def time_cursor(at: datetime, key: str | int) -> str:
    return f"{at.isoformat()}{SEP}{key}"


def parse_time_cursor(text: str) -> tuple[datetime, str]:
    stamp, sep, key = text.partition(SEP)
    try:
        if not sep:
            raise ValueError(text)
        return datetime.fromisoformat(stamp), key
    except ValueError:
        raise BadCursor(f"bad page cursor {text!r}; go back to the first page") from None


def page_of(rows: Sequence[T], limit: int, cursor_of: Callable[[T], str]) -> Page[T]:
    """``rows`` were fetched with limit + 1: the extra row only says a next page exists."""
    shown = rows[:limit]
    more = len(rows) > limit
    next_after = cursor_of(shown[-1]) if more and shown else None
    return Page(shown, next_after)
