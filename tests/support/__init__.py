"""Test support shared by tests/unit and tests/integration (``tests/conftest.py`` puts
``tests/`` on ``sys.path``, so test modules import it as ``support.<module>``)."""
