"""greet: say hello, or fail on request (the skillq script protocol)."""

import json
import os
import sys
from pathlib import Path


def main() -> int:
    inputs = json.loads(Path(os.environ["SKILL_INPUTS"]).read_text(encoding="utf-8"))
    if inputs.get("fail"):
        print(f"refusing to greet {inputs['name']}", file=sys.stderr)
        return 1
    greeting = f"Hello, {inputs['name']}!"
    Path(os.environ["SKILL_OUTPUT"]).write_text(
        json.dumps({"greeting": greeting, "length": len(greeting)}), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
