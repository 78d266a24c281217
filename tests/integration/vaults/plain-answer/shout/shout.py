"""shout: the text in capitals (the skillq script protocol)."""

import json
import os
from pathlib import Path

inputs = json.loads(Path(os.environ["SKILL_INPUTS"]).read_text(encoding="utf-8"))
Path(os.environ["SKILL_OUTPUT"]).write_text(json.dumps({"text": inputs["text"].upper()}),
                                            encoding="utf-8")
