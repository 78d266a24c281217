"""flop: always fail permanently, quoting the note input on stderr."""

import json
import os
import sys
from pathlib import Path


def main() -> int:
    inputs = json.loads(Path(os.environ["SKILL_INPUTS"]).read_text(encoding="utf-8"))
    print(f"flopped on {inputs['note']}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
