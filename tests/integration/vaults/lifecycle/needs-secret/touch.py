"""needs-secret: create the marker file (proof that the script ran)."""

import json
import os
import sys
from pathlib import Path


def main() -> int:
    inputs = json.loads(Path(os.environ["SKILL_INPUTS"]).read_text(encoding="utf-8"))
    Path(inputs["marker"]).write_text("ran", encoding="utf-8")
    Path(os.environ["SKILL_OUTPUT"]).write_text(json.dumps({"touched": inputs["marker"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
