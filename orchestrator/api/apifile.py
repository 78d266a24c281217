"""SKILLQ_HOME/api.json: where the local API listens and the token it wants.

Read by the thin `skillq run` client, so this module imports the standard library only.
The file is owner-only (0600) and written atomically: whoever can read it may submit
runs, which is what holding SKILLQ_HOME already means (the database credentials live
there too). The token never goes to a log.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

API_FILE = "api.json"
# Where a run goes: a client whose environment names other servers than the API's
# caller did must not submit through it (a leftover local api.json, a production URL).
ENDPOINT_VARS = ("SKILLQ_BROKER_URL", "SKILLQ_RESULT_BACKEND", "SKILLQ_DATABASE_URL")


@dataclass(frozen=True)
class ApiInfo:
    port: int
    token: str
    pid: int
    endpoints: str  # endpoints_key() of the environment its clients are expected to have


def endpoints_key(environ: Mapping[str, str]) -> str:
    """A digest of the endpoint variables (never the URLs themselves: they hold passwords)."""
    text = "\0".join(environ.get(name, "") for name in ENDPOINT_VARS)
    return hashlib.sha256(text.encode()).hexdigest()


def home_of(environ: Mapping[str, str]) -> Path:
    """SKILLQ_HOME as shared/settings.py reads it from the environment (no .env file)."""
    raw = environ.get("SKILLQ_HOME")
    return Path(raw).expanduser().resolve() if raw else Path.home() / ".skillq"


def api_file(home: Path) -> Path:
    return home / API_FILE


def read_api(home: Path) -> ApiInfo | None:
    """The recorded API, or None when there is none or the file is not one."""
    try:
        data = json.loads(api_file(home).read_text(encoding="utf-8"))
        info = ApiInfo(port=int(data["port"]), token=str(data["token"]), pid=int(data["pid"]),
                       endpoints=str(data["endpoints"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info if 0 < info.port < 65536 and info.token else None


def write_api(home: Path, info: ApiInfo) -> None:
    from shared.atomic import write_json

    write_json(api_file(home), asdict(info), private=True)


def remove_api(home: Path, token: str) -> None:
    """Remove api.json if it is still this server's (a newer one may have replaced it)."""
    found = read_api(home)
    if found is not None and found.token == token:
        api_file(home).unlink(missing_ok=True)
