"""escaper: start `setsid sleep 300` (a grandchild out of the script's process group),
note its pid and the scratch folder, then end as asked: succeed, fail, or hang."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    inputs = json.loads(Path(os.environ["SKILL_INPUTS"]).read_text(encoding="utf-8"))
    pid_dir = Path(inputs["pid_dir"])
    child = subprocess.Popen(["setsid", "sleep", "300"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    (pid_dir / "grandchild.pid").write_text(str(child.pid))
    (pid_dir / "script.pid").write_text(str(os.getpid()))
    (pid_dir / "scratch").write_text(str(Path.cwd().parent))
    if inputs["end"] == "fail":
        print("failing on purpose", file=sys.stderr)
        return 1
    if inputs["end"] == "hang":
        time.sleep(60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
