"""hail: say hello (the skillq script protocol)."""

import json
import os
import sys
from pathlib import Path


def main() -> int:
    inputs = json.loads(Path(os.environ["SKILL_INPUTS"]).read_text(encoding="utf-8"))
    Path(os.environ["SKILL_OUTPUT"]).write_text(
        json.dumps({"greeting": f"Hello, {inputs['name']}!"}), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
