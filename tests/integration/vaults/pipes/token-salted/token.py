"""token-salted: a fresh random token for the key and salt (cached: a hit returns the
stored token)."""

import json
import os
import sys
import uuid
from pathlib import Path


def main() -> int:
    given = json.loads(Path(os.environ["SKILL_INPUTS"]).read_text(encoding="utf-8"))
    outputs = {"key": given["key"], "salt": given["salt"], "token": uuid.uuid4().hex}
    Path(os.environ["SKILL_OUTPUT"]).write_text(json.dumps(outputs), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
