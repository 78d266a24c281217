"""hold: hold for hold_s seconds (or, with until_file, until that file exists, at most
hold_s) and return when it started and ended (epoch seconds), its pid and the texts it
was given. With pid_dir, write <pid_dir>/<label>.pid first."""

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
    label = inputs["label"]
    if inputs.get("pid_dir"):
        write_atomic(Path(inputs["pid_dir"]) / f"{label}.pid", str(os.getpid()))
    start = time.time()
    hold = float(inputs.get("hold_s") or 0)
    if inputs.get("until_file"):
        until = Path(inputs["until_file"])
        while not until.exists() and time.time() - start < hold:
            time.sleep(0.02)
    else:
        time.sleep(hold)
    end = time.time()
    texts = inputs.get("texts") or []
    write_outputs({"label": label, "start": start, "end": end, "pid": os.getpid(),
                   "count": len(texts), "texts": texts})
    return 0


if __name__ == "__main__":
    sys.exit(main())
