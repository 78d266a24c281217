"""What every page shares: the configuration, the connection, the vault and templates."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.templating import Jinja2Templates

from orchestrator.connect import Connection
from orchestrator.dashboard.config import DashboardConfig
from orchestrator.dashboard.csrf import csrf_input
from orchestrator.library import repo
from shared.db.session import transaction
from shared.vault import Vault, open_vault

TEMPLATES = Path(__file__).with_name("templates")


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f} ms" if value < 1000 else f"{value / 1000:.2f} s"


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def _when(value: datetime | None) -> str:
    return "-" if value is None else f"{value:%Y-%m-%d %H:%M:%S}"


def make_templates() -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(TEMPLATES))
    templates.env.filters.update(ms=_ms, usd=_usd, pct=_pct, when=_when)
    templates.env.globals["csrf_input"] = csrf_input
    return templates


@dataclass(frozen=True)
class Dashboard:
    config: DashboardConfig
    conn: Connection
    templates: Jinja2Templates

    def vault(self, *, fresh: bool = False) -> Vault:
        """The vault as discovered at most discovery_ttl_s ago; ``fresh`` reads it now
        (an action must see what the CLI just published, not a cached manifest)."""
        return open_vault(self.config.vault, ttl_s=0 if fresh else self.config.discovery_ttl_s)

    @property
    def vault_key(self) -> str:
        return repo.vault_key(self.config.vault)

    @contextmanager
    def db(self) -> Iterator[Session]:
        with transaction(self.config.database_url) as session:
            yield session

    def render(self, request: Request, name: str, context: Mapping[str, Any],
               status_code: int = 200) -> HTMLResponse:
        response: HTMLResponse = self.templates.TemplateResponse(
            request, name, {"vault_path": str(self.config.vault), **context},
            status_code=status_code)
        return response


def dashboard(request: Request) -> Dashboard:
    found: Dashboard = request.app.state.dashboard
    return found
