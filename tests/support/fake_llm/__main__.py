"""``python tests/support/fake_llm ...`` or ``python -m support.fake_llm ...`` (with
``tests/`` on the path): see cli.py."""

import importlib
import sys
from pathlib import Path

if __package__:
    cli = importlib.import_module(".cli", __package__)
else:
    # Run as a directory: import the package from its parent, tests/support/.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    cli = importlib.import_module("fake_llm.cli")

sys.exit(cli.main())
