"""The command line, and the run's configuration (sample counts, widths) it selects."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

GROUPS = {"a", "b", "d", "e", "s", "cli"}


def parse_args(description: str, argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="fewer samples, widths to 1,000")
    parser.add_argument("--keep", action="store_true", help="keep the temporary SKILLQ_HOME")
    parser.add_argument("--py-spy", type=Path, default=None, metavar="DIR",
                        help="record the skillq worker with py-spy during the fan-outs")
    parser.add_argument("--big-vault", type=int, default=None, metavar="N",
                        help="also run (b) in a vault with N more skills (default: 2,000; "
                        "--quick: 0)")
    parser.add_argument("--only", default="", help="comma-separated figure groups: "
                        "a,b,d,e,s,cli (default: all)")
    return parser.parse_args(argv)


def selected(args: argparse.Namespace) -> set[str]:
    """The figure groups --only names, or all of them."""
    return set(filter(None, args.only.split(","))) or set(GROUPS)


def config(args: argparse.Namespace) -> dict[str, Any]:
    quick = args.quick
    return {"latency_n": 15 if quick else 40, "latency_warm": 3, "fan_width": 1000,
            "fan_reps": 1 if quick else 3, "widths": [10, 100, 1000] if quick
            else [10, 100, 1000, 5000], "records_n": 2000 if quick else 10000,
            "records_reps": 2 if quick else 3, "lifecycle_n": 300 if quick else 1000,
            "cli_runs": 2 if quick else 5, "python_fanout": not quick,
            "big_vault": args.big_vault if args.big_vault is not None else
            (0 if quick else 2000),
            # (s): the planner's advance at these sizes, and a wide fan-out against x1,000
            "scale_sizes": [2000, 20000] if quick else [10000, 100000], "scale_reps": 9,
            "scale_fan": 20000 if quick else 100000, "scale_fan_reps": 1 if quick else 5}
