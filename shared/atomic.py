"""Writing files so a crash never leaves half of one: write beside it, then rename."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_text(path: Path, text: str, *, durable: bool = True) -> None:
    """``durable=False`` skips the fsync, for files rebuilt from the database anyway:
    the rename still means no reader ever sees half of one."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, data: Any, *, durable: bool = True) -> None:
    write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n", durable=durable)
