"""Shared by every test directory: puts ``tests/`` on ``sys.path`` so test modules import
reusable test support as ``support.<module>`` (e.g. ``from support.fake_llm import
FakeLLM``). Fixtures stay in each directory's own conftest.py. Under `pytest -n N`, how
xdist shares the tests out: support/xdist_scheduling.py."""

import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

TESTS = str(Path(__file__).resolve().parent)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)


def _dist_asked_for(config: pytest.Config) -> bool:
    args = [*config.invocation_params.args, *shlex.split(os.environ.get("PYTEST_ADDOPTS", "")),
            *config.getini("addopts")]
    return any(a == "-d" or a.startswith("--dist") for a in args)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under `pytest -n N` without --dist: each integration module on one worker, the other
    tests one by one (support/xdist_scheduling.py); an explicit --dist is obeyed."""
    if config.getoption("dist") != "load" or _dist_asked_for(config):
        return None
    from support.xdist_scheduling import IntegrationModules

    return IntegrationModules(config, log)
