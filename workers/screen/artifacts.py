"""Screenshots out of a screen step's folder and into the shared store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shared.db.session import transaction
from shared.store import REF_KEY, put_bytes
from workers.screen.host import ARTIFACT_KEY


def store_artifacts(database_url: str, outputs: dict[str, Any], folder: Path
                    ) -> dict[str, Any]:
    """``outputs`` with each ``{"$artifact": NAME}`` value replaced by ``{"$ref": KEY}``
    of that file, stored in the shared store (files outside ``folder`` are refused)."""
    marked = {name: value for name, value in outputs.items()
              if isinstance(value, dict) and set(value) == {ARTIFACT_KEY, "media_type"}}
    if not marked:
        return outputs
    stored = dict(outputs)
    with transaction(database_url) as session:
        for name, value in marked.items():
            path = folder / str(value[ARTIFACT_KEY])
            if path.parent != folder or not path.is_file() or path.is_symlink():
                raise ValueError(f"output '{name}' names no file the step saved")
            kind = str(value["media_type"])[:100]
            stored[name] = {REF_KEY: put_bytes(session, path.read_bytes(), kind)}
    return stored
