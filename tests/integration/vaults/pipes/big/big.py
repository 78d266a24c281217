"""big: a text blob of `size` characters (over the inline limit: it travels by reference)."""

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
    size = read_inputs()["size"]
    blob = "".join(chr(97 + (i * 7) % 26) for i in range(size))
    write_outputs({"blob": blob})
    return 0


if __name__ == "__main__":
    sys.exit(main())
