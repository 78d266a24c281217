"""repo-issues: a stand-in the scripted builder wrote (examples/skill-builder)."""

import json
import os

with open(os.environ["SKILL_INPUTS"], encoding="utf-8") as fh:
    inputs = json.load(fh)
with open(os.environ["SKILL_OUTPUT"], "w", encoding="utf-8") as fh:
    json.dump({"issues": ["#1 bug"]}, fh)
