"""Shared by every test directory: puts ``tests/`` on ``sys.path`` so test modules import
reusable test support as ``support.<module>`` (e.g. ``from support.fake_llm import
FakeLLM``). Fixtures stay in each directory's own conftest.py."""

import sys
from pathlib import Path

TESTS = str(Path(__file__).resolve().parent)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)
