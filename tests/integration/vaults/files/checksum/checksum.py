"""checksum: the SHA-256 of a file input, by the skillq script protocol."""

import hashlib
import json
import os
import sys
from pathlib import Path


def main() -> int:
    inputs = json.loads(Path(os.environ["SKILL_INPUTS"]).read_text(encoding="utf-8"))
    data = Path(inputs["doc"]).read_bytes()
    print(json.dumps({"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
