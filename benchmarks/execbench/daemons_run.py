"""main for benchmarks/daemon_scaling.py: the stack, the machines one by one, the report."""

from __future__ import annotations

import os
import signal
import socket
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.table import Table

from .config import console, progress_display
from .daemons import (
    CONTROL,
    SKILL,
    Machine,
    ScaleBench,
    add_machine,
    measure,
    parse_args,
    warm_up,
)
from .figure import Figure, med
from .netns import Namespaces, available
from .report import source_state, write_results
from .stack import Stack, remove_home


def figures_of(rows: list[dict[str, Any]], width: int) -> list[Figure]:
    out: list[Figure] = []
    base_sk = base_raw = None
    for row in rows:
        n = row["daemons"]
        sk_s = [r["s"] for r in row["skillq"][1:]]
        raw_s = [r["s"] for r in row["raw"][1:]]
        tput = width / med(sk_s)
        raw_tput = width / med(raw_s) if raw_s else None
        base_sk = base_sk or tput
        base_raw = base_raw or raw_tput
        split = ", ".join(f"{d} {c}" for d, c in row["median_run"]["daemons"].items())
        # CPU seconds of the median run, every process of the run: steadier than wall time
        # on a busy machine
        cpu_s = sum(v for v in row["median_run"]["cpu_s"].values() if v > 0)
        out.append(Figure(
            f"n{n}", f"{n} daemon(s): fan-out x{width:,}, script `true`", tput, raw_tput,
            "items/s", tput / raw_tput if raw_tput else None,
            note=f"median of {len(sk_s)} ({med(sk_s):.2f} s); items by daemon (median run): "
            f"{split}" + (f"; IDLE: {', '.join(row['idle_daemons'])}"
                          if row["idle_daemons"] else ""),
            samples={"skillq_s": sk_s, "raw_s": raw_s,
                     "warmup_s": {"skillq": row["skillq"][0]["s"],
                                  "raw": row["raw"][0]["s"] if row["raw"] else None},
                     "scaling": tput / base_sk, "cpu_s_median_run": cpu_s,
                     "raw_scaling": raw_tput / base_raw if raw_tput and base_raw else None,
                     "runs": row["skillq"], "raw_runs": row["raw"],
                     "items_by_daemon_total": row["items_by_daemon_total"]}))
    return out


def render(figures: list[Figure], width: int, concurrency: int,
           load: tuple[float, float]) -> Table:
    table = Table(title=f"fan-out x{width:,} of a script `true` over N daemons (own network "
                  f"namespace each, concurrency {concurrency}; {os.cpu_count()} CPUs)",
                  caption=f"load average {load[0]:.1f} at the start, {load[1]:.1f} at the "
                  "end; CPU: every process of the run (workers, pools, forwarders, servers, "
                  "client) in the median skillq run")
    for column in ("daemons", "skillq", "scaling", "raw Celery", "raw scaling",
                   "skillq / raw", "CPU s", "items by daemon (median run)"):
        table.add_column(column, justify="left" if column.startswith(("items", "d")) else
                         "right", overflow="fold")
    for f in figures:
        raw = f.samples["raw_scaling"]
        split = f.note.split("items by daemon (median run): ", 1)[-1]
        table.add_row(f.key[1:], f"{f.skillq:,.0f} items/s", f"{f.samples['scaling']:.2f}x",
                      "-" if f.raw is None else f"{f.raw:,.0f} items/s",
                      "-" if raw is None else f"{raw:.2f}x",
                      "-" if f.ratio is None else f"{f.ratio:.2f}x",
                      f"{f.samples['cpu_s_median_run']:.1f}", split)
    return table


def main(description: str, argv: list[str] | None = None) -> int:
    args = parse_args(description, argv)
    why_not = available()
    if why_not:
        console.print(f"[red]cannot run: {why_not}[/]")
        return 2
    raw = not args.no_raw

    def stop_on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop_on_term)
    home = Path(tempfile.mkdtemp(prefix="skillq-daemonbench-"))
    stack, nss = Stack(home), None
    rows: list[dict[str, Any]] = []
    machines: list[Machine] = []
    started, load_at_start, interrupted = datetime.now(UTC), os.getloadavg(), False
    source = source_state()
    cfg = {"items": args.items, "runs": args.runs, "daemons": args.daemons,
           "concurrency": args.concurrency, "raw": raw, "skill": SKILL}
    try:
        nss = Namespaces()
        with progress_display() as progress:
            phase = progress.add_task("stack", total=None)

            def step(text: str) -> None:
                progress.update(phase, description=f"[bold]{text}")

            stack.start_servers(step)
            step("starting the host's control worker")
            stack._spawn(CONTROL, [sys.executable, "-m", "workers.main", "--queues",
                                   "control", "--concurrency", "2", "--name", CONTROL],
                         stack.env)
            stack._wait_ready([f"{CONTROL}@{socket.gethostname()}"])
            b = ScaleBench(stack, progress)
            for n in range(1, args.daemons + 1):
                step(f"starting daemon {n} in its own network namespace")
                machines.append(add_machine(stack, nss, args.concurrency, raw))
                if (forwarder := machines[-1].ns.forwarder) is not None:
                    b.forwarders[f"forward-{n}"] = forwarder.pid
                if n == 1:
                    step("warming up")
                    warm_up(b, raw)
                step(f"{n} daemon(s): x{args.items:,} fan-outs")
                rows.append(measure(b, machines, args.items, args.runs, raw))
            step("done")
    except KeyboardInterrupt:
        interrupted = True
        console.print("[yellow]interrupted: stopping the daemons, namespaces and servers; "
                      "the counts measured so far follow[/]")
    finally:
        with console.status("stopping workers, namespaces and servers"):
            stack.stop()  # workers first (their pools too), then the servers
            problems = nss.delete_all() if nss is not None else []
        for problem in problems:
            console.print(f"[red]{problem}[/]")
        remove_home(stack, home, keep=args.keep)

    figures = figures_of(rows, args.items)
    if figures:
        console.print(render(figures, args.items, args.concurrency,
                             (load_at_start[0], os.getloadavg()[0])))
    write_results(figures, started=started, quick=args.quick, interrupted=interrupted,
                  cfg=cfg, load_at_start=load_at_start, source=source,
                  embedded=stack.embedded, kind="daemons",
                  extra={"machines": [{"daemon": m.daemon, "namespace": m.ns.name,
                                       "host_ip": m.ns.host_ip, "ns_ip": m.ns.ns_ip,
                                       "raw_node": m.raw_node} for m in machines]})
    return 130 if interrupted else 0
