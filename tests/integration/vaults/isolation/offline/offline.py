"""offline: a connection attempt from a step with network: false, and its secret."""

import json
import os
import socket
from pathlib import Path

inputs = json.loads(Path(os.environ["SKILL_INPUTS"]).read_text())
try:
    socket.create_connection(("127.0.0.1", inputs["redis_port"]), timeout=5).close()
    result = "connected"
except OSError as exc:
    result = f"{type(exc).__name__}: {exc}"
Path(os.environ["SKILL_OUTPUT"]).write_text(json.dumps(
    {"connect": result, "token_ok": os.environ.get("ISO_TOKEN") == "iso-" + "value"}))
