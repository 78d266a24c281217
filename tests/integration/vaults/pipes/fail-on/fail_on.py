"""fail-on: fail permanently (exit 1) when the item is listed in `fail`, else echo it."""

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
    inputs = read_inputs()
    item = inputs["item"]
    print(f"fail-on: handling item {item!r}")  # a stdout line for `run-show --logs` tests
    if item in (inputs.get("fail") or []):
        print(f"boom: cannot handle item {item!r}", file=sys.stderr)
        return 1
    write_outputs({"item": item})
    return 0


if __name__ == "__main__":
    sys.exit(main())
