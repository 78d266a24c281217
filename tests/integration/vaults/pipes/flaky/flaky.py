"""flaky: exit 75 (transient) until the counter file in counter_dir reaches succeed_on."""

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
    counter = Path(inputs["counter_dir"]) / "count"
    count = int(counter.read_text()) + 1 if counter.exists() else 1
    write_atomic(counter, str(count))
    if count < inputs["succeed_on"]:
        print(f"not yet: attempt {count} of {inputs['succeed_on']}", file=sys.stderr)
        return 75
    write_outputs({"attempts": count})
    return 0


if __name__ == "__main__":
    sys.exit(main())
