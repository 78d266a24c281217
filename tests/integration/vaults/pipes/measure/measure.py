"""measure: the length and SHA-256 of the blob it received."""

import hashlib
import json
import os
import sys
from pathlib import Path


def read_inputs() -> dict:
    return json.loads(Path(os.environ["SKILL_INPUTS"]).read_text(encoding="utf-8"))


def write_outputs(outputs: dict) -> None:
    Path(os.environ["SKILL_OUTPUT"]).write_text(json.dumps(outputs), encoding="utf-8")


def write_atomic(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def main() -> int:
    blob = read_inputs()["blob"]
    digest = hashlib.sha256(blob.encode("utf-8")).hexdigest()
    write_outputs({"length": len(blob), "sha256": digest})
    return 0


if __name__ == "__main__":
    sys.exit(main())
