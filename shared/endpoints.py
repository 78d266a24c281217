"""Where the broker and the database are: configured URLs, else the embedded servers."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Endpoints:
    broker_url: str
    database_url: str
    result_backend: str

    def env(self) -> dict[str, str]:
        """The variables that point another skillq process at the same servers."""
        return {"SKILLQ_BROKER_URL": self.broker_url,
                "SKILLQ_DATABASE_URL": self.database_url,
                "SKILLQ_RESULT_BACKEND": self.result_backend}
