"""secret-peek: what the script's own process can see of the worker's environment."""

import json
import os
import sys
from pathlib import Path


def main() -> int:
    inputs = json.loads(Path(os.environ["SKILL_INPUTS"]).read_text(encoding="utf-8"))
    token = os.environ.get("PEEK_TOKEN", "")
    if inputs.get("leak"):
        print(f"the token is {token}")
        print(f"leaking {token} on stderr too", file=sys.stderr)
        return 1
    Path(os.environ["SKILL_OUTPUT"]).write_text(json.dumps(
        {"env": {k: "(hidden)" if k == "PEEK_TOKEN" else v for k, v in os.environ.items()},
         "token_ok": bool(token)}), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
