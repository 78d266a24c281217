"""`skillq eval`: a skill's cases run many times beside a baseline (run.py), and its
description tried on trigger queries (triggers.py). docs/evals.md."""
