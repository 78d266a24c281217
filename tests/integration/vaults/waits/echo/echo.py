"""echo: return the text, after an optional delay (the skillq script protocol)."""

import json
import os
import sys
import time
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
    inputs = read_inputs()
    time.sleep(float(inputs.get("delay_s") or 0))
    write_outputs({"text": inputs["text"]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
