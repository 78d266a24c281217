"""Reading library state for display without starting anything.

`skillq list`, `show` and `catalog` must keep working on a laptop with no stack running
(they read the vault). They show labels, pins and enabled state when a database is
configured or the embedded one already runs; otherwise they say why it is missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.library.display import SkillState, display_label
from shared.errors import ConfigError
from shared.settings import get_settings


@dataclass(frozen=True)
class LibraryView:
    states: dict[str, SkillState] = field(default_factory=dict)
    missing: str | None = None  # why no state could be read (None: read)

    def state(self, name: str) -> SkillState:
        return self.states.get(name, SkillState())

    def pinned_first(self, names: list[str]) -> list[str]:
        """Pinned skills in pin order, then the rest in the given order."""
        pins = sorted((n for n in names if self.state(n).pinned_order is not None),
                      key=lambda n: self.state(n).pinned_order or 0)
        return pins + [n for n in names if n not in pins]

    def label(self, name: str, manifest_label: str | None) -> str:
        return display_label(name, self.state(name).label, manifest_label)

    def pin_cell(self, name: str) -> str:
        order = self.state(name).pinned_order
        return "-" if order is None else str(order + 1)

    def state_cell(self, name: str) -> str:
        return "enabled" if self.state(name).enabled else "disabled"

    def markers(self, name: str) -> str:
        """` · pinned #2 · DISABLED`-style suffix for a skill's heading ('' for neither)."""
        state, parts = self.state(name), []
        if state.pinned_order is not None:
            parts.append(f"pinned #{state.pinned_order + 1}")
        if not state.enabled:
            parts.append("DISABLED (`skillq enable` to run it again)")
        return "".join(f" · {p}" for p in parts)


def database_url_if_running() -> str | None:
    """The configured database URL, else the embedded server's if it runs; else None."""
    from orchestrator.embedded import resolve_endpoints

    settings = get_settings()
    if settings.database_url:
        return settings.database_url
    try:
        return resolve_endpoints(settings, start=False).database_url
    except ConfigError:
        return None


def library_view(root: Path) -> LibraryView:
    url = database_url_if_running()
    if url is None:
        return LibraryView(missing="library state (labels, pins, disabled) not shown: no "
                           "database is running; `skillq up` starts one")
    # SQLAlchemy only once there is a database to read: `list` and `show` start faster.
    from sqlalchemy import text
    from sqlalchemy.exc import OperationalError

    from orchestrator.library import repo
    from shared.db.session import transaction

    try:
        with transaction(url) as session:
            if session.execute(text("select to_regclass('library_skills')")).scalar() is None:
                return LibraryView()  # a database no library command has touched yet
            return LibraryView(repo.states(session, repo.vault_key(root)))
    except OperationalError as exc:
        reason = str(exc.orig or exc).strip().splitlines()[0]
        return LibraryView(missing=f"library state not shown: the database is unreachable "
                           f"({reason})")

