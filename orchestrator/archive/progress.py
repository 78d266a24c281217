"""How long archive work reports progress: the CLI draws bars, tests stay silent."""

from __future__ import annotations

from typing import Protocol


class Reporter(Protocol):
    def start(self, label: str, total: int | None) -> None:
        """A new phase of ``total`` units (None: unknown)."""

    def advance(self, units: int = 1) -> None: ...


class Silent:
    def start(self, label: str, total: int | None) -> None:
        pass

    def advance(self, units: int = 1) -> None:
        pass
