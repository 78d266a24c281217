"""shout-file: a file in, a file out, by the skillq script protocol."""

import hashlib
import json
import os
import sys
from pathlib import Path


def describe(path: Path) -> dict[str, object]:
    data = path.read_bytes()
    scratch = Path.cwd().parent  # the step runs in <scratch>/skill
    return {"path": str(path), "name": path.name, "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "absolute": path.is_absolute(), "in_scratch": path.is_relative_to(scratch)}


def main() -> int:
    inputs = json.loads(Path(os.environ["SKILL_INPUTS"]).read_text(encoding="utf-8"))
    doc = Path(inputs["doc"])
    out = Path("out")
    out.mkdir(exist_ok=True)
    loud = out / f"LOUD-{doc.name}"
    loud.write_bytes(doc.read_bytes().upper())
    seen = {"doc": describe(doc),
            "extras": [describe(Path(p)) for p in inputs.get("extras") or []]}
    Path(os.environ["SKILL_OUTPUT"]).write_text(
        json.dumps({"loud": str(loud), "seen": seen}), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
