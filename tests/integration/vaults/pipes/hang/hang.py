"""hang: start a grandchild that ignores SIGTERM, record both pids, then sleep past the
1 s timeout. The executor must kill the whole process group."""

import json
import os
import subprocess
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


GRANDCHILD = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
              "time.sleep(120)")


def main() -> int:
    inputs = read_inputs()
    pid_dir = Path(inputs["pid_dir"])
    child = subprocess.Popen([sys.executable, "-c", GRANDCHILD])
    write_atomic(pid_dir / "grandchild.pid", str(child.pid))
    write_atomic(pid_dir / "script.pid", str(os.getpid()))
    time.sleep(120)
    write_outputs({"done": True})
    return 0


if __name__ == "__main__":
    sys.exit(main())
