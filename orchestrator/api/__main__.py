"""`python -m orchestrator.api ...`: `skillq api ...`, as `skillq up` starts it detached."""

import sys

from orchestrator.cli.app import main

sys.argv = ["skillq", "api", *sys.argv[1:]]
main()
