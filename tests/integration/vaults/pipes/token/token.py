"""token: a fresh random token for the key (cached: a hit returns the stored token)."""

import json
import os
import sys
import uuid
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
    key = read_inputs()["key"]
    write_outputs({"key": key, "token": uuid.uuid4().hex})
    return 0


if __name__ == "__main__":
    sys.exit(main())
