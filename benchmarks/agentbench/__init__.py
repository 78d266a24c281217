"""The agent-step benchmark (benchmarks/agent_steps.py): its stack and vault (stack.py),
and its measurements (measure.py). It reuses execbench's figure row, results folder and
machine description."""

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent.parent  # benchmarks/: execbench lives there
# tests/: the local model server (tests/support/fake_llm) is test support, run as is.
for _path in (_HERE, _HERE.parent / "tests"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
