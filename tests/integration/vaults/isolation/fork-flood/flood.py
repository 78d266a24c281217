"""fork-flood: 300 children that sleep; fails when the process limit refuses a fork."""

import json
import os
import subprocess
import sys
from pathlib import Path

children = [subprocess.Popen(["sleep", "30"]) for _ in range(300)]
Path(os.environ["SKILL_OUTPUT"]).write_text(json.dumps({"started": len(children)}))
sys.exit(0)
