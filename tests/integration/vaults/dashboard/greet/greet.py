"""greet: say hello after a pause, or fail on request (the skillq script protocol)."""

import json
import os
import sys
import time
from pathlib import Path


def main() -> int:
    inputs = json.loads(Path(os.environ["SKILL_INPUTS"]).read_text(encoding="utf-8"))
    time.sleep(float(inputs.get("pause_s") or 0))
    if inputs.get("fail"):
        print(f"refusing to greet {inputs['name']}", file=sys.stderr)
        return 1
    Path(os.environ["SKILL_OUTPUT"]).write_text(
        json.dumps({"greeting": f"Hello, {inputs['name']}!"}), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
