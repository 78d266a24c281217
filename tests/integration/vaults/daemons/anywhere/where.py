"""where: report which program the step found and the daemon's home (script protocol)."""

import json
import os
import shutil
import sys
from pathlib import Path


def main() -> int:
    inputs = json.loads(Path(os.environ["SKILL_INPUTS"]).read_text(encoding="utf-8"))
    tool = inputs.get("tool") or ""
    found = shutil.which(tool) if tool else None
    if tool and not found:
        print(f"{tool} is not on this machine's PATH", file=sys.stderr)
        return 1
    Path(os.environ["SKILL_OUTPUT"]).write_text(json.dumps({"found": found or ""}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
