"""memory-flood: touch 1 GB, a megabyte at a time."""

import json
import os
from pathlib import Path

held = [bytearray(1024 * 1024) for _ in range(1024)]
Path(os.environ["SKILL_OUTPUT"]).write_text(json.dumps({"held_mb": len(held)}))
