"""main: start the stack, measure the selected figures, stop everything, report."""

from __future__ import annotations

import os
import signal
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import raw_tasks

from .bench import Bench
from .cli import config, parse_args, selected
from .config import SKILLQ_WORKER, console, progress_display
from .figure import Figure
from .figures_fanout import fig_big_vault, fig_fanouts, fig_strict_fan, fig_widths
from .figures_latency import (
    cli_latency,
    fig_durable_floor,
    fig_latency,
    fig_latency_cpu,
    fig_raw_waits,
    fig_strict_latency,
)
from .figures_records import fig_records
from .figures_scale import fig_scale
from .profiling import profile
from .report import print_phases, print_profiles, render, source_state, write_results
from .stack import Stack, remove_home
from .vaultgen import make_big_vault


def main(description: str, argv: list[str] | None = None) -> int:
    args = parse_args(description, argv)
    quick = args.quick
    only = selected(args)
    cfg = config(args)

    def stop_on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop_on_term)
    home = Path(tempfile.mkdtemp(prefix="skillq-bench-"))
    stack = Stack(home)
    figures: list[Figure] = []
    profiles: dict[str, list[tuple[float, float, str]]] = {}
    started, load_at_start, interrupted = datetime.now(UTC), os.getloadavg(), False
    source = source_state()  # at the start: other people may edit the tree meanwhile
    try:
        big = None
        if cfg["big_vault"] and "b" in only:
            big = make_big_vault(home / "big-vault", cfg["big_vault"])
        with progress_display() as progress:
            phase = progress.add_task("stack", total=None)

            def step(text: str) -> None:
                progress.update(phase, description=f"[bold]{text}")

            stack.start(step)
            b = Bench(stack, progress)
            step("warming up (and filling bench-cached's cache entry)")
            for _ in range(3):
                b.skillq_once("bench-cached")
                b.skillq_once("bench-true")
                b.raw_once(stack.raw, raw_tasks.NOOP)
                b.raw_once(stack.strict, raw_tasks.NOOP)
            worker = stack.worker_pid(SKILLQ_WORKER)
            if "a" in only:
                step("(a) one-step latency")
                figures += fig_latency(b, cfg["latency_n"], cfg["latency_warm"])
                figures.append(fig_strict_latency(b, cfg["latency_n"]))
                figures.append(fig_durable_floor(b, cfg["latency_n"]))
                figures.append(fig_raw_waits(b, cfg["latency_n"]))
                figures.append(fig_latency_cpu(b, 2 * cfg["latency_n"]))
            if "cli" in only:
                step("`skillq run` from the command line")
                figures.append(cli_latency(b, cfg["cli_runs"]))
            if "b" in only:
                step(f"(b, c) fan-outs x{cfg['fan_width']:,}")
                figures += fig_fanouts(b, cfg["fan_width"], cfg["fan_reps"],
                                       cfg["python_fanout"])
                figures.append(fig_strict_fan(b, cfg["fan_width"], cfg["fan_reps"]))
                if big is not None:
                    figures.append(fig_big_vault(b, big, cfg["fan_width"], cfg["fan_reps"]))
            if "e" in only:
                step("(e) widths")
                figures += fig_widths(b, cfg["widths"])
            if "d" in only:
                step("(d) run records")
                figures += fig_records(b, cfg["records_n"], cfg["records_reps"],
                                       cfg["lifecycle_n"])
            if "s" in only:
                step("(s) the planner and a fan-out at scale")
                figures += fig_scale(b, cfg["scale_sizes"], cfg["scale_reps"],
                                     cfg["fan_width"], cfg["scale_fan"],
                                     cfg["scale_fan_reps"])
            if args.py_spy:
                step("profiling the skillq worker with py-spy")
                profiles = profile(b, worker, args.py_spy, cfg["fan_width"])
            step("done")
    except KeyboardInterrupt:
        interrupted = True
        console.print("[yellow]interrupted: stopping the workers and servers; the figures "
                      "measured so far follow[/]")
    finally:
        with console.status("stopping workers and servers"):
            stack.stop()
        remove_home(stack, home, keep=args.keep)

    print_profiles(profiles)
    console.print(render(figures))
    print_phases(figures)
    write_results(figures, started=started, quick=quick, interrupted=interrupted, cfg=cfg,
                  load_at_start=load_at_start, source=source, embedded=stack.embedded)
    if interrupted:
        return 130
    failed = [f.key for f in figures if f.passed is False]
    return 1 if failed else 0
