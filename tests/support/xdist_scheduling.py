"""How `pytest -n N` shares the tests out (tests/conftest.py installs it when no --dist
was asked for): each integration module goes to one worker as a whole, any other test on
its own.

xdist's default (``--dist load``) hands out tests in chunks, so one integration module's
tests land on both workers and each builds the module-scoped fixtures (a dashboard
process and its runs, a killed worker's outcome, a stack of the module's own, daemons)
and restarts the workers the module needs started its way. Grouping only the integration
modules keeps that work done once; the unit tests, quick and independent, fill in
test by test whichever worker is free, so the run ends evenly. Bigger modules go first
(xdist's --loadscope-reorder: by number of tests), the unit tests last.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from xdist.scheduler import LoadScopeScheduling

INTEGRATION = "integration"  # tests/integration/: the modules that share a stack


class IntegrationModules(LoadScopeScheduling):
    def _split_scope(self, nodeid: str) -> str:
        module = nodeid.split("::", 1)[0]
        if INTEGRATION in PurePosixPath(module).parts[:-1]:
            return module
        return nodeid
