"""Daemon scaling: one fan-out on 1, then 2, then 3 daemons, each a machine of its own.

    .venv/bin/python benchmarks/daemon_scaling.py [--quick] [--items N] [--runs R]
                     [--daemons 3] [--concurrency 2] [--no-raw] [--keep]

Needs root and iproute2 (`ip netns`). It starts its own stack: a real Redis and PostgreSQL
under a temporary SKILLQ_HOME (orchestrator/embedded.py, as benchmarks/execution.py does),
and on the host one worker serving only `control` (the planner's queue). Then, one at a
time, up to --daemons simulated machines: each a network namespace with a veth link to the
host and a TCP forwarder (its own process) from the host end's address to the servers'
loopback ports, as tests/integration/test_daemons.py's `namespaced` fixture does
(benchmarks/execbench/netns.py: 10.232.y.0/30 subnets and names with this process's id,
so nothing collides with the tests), running

  skillq  `python -m workers.main --queues default --concurrency 2 --name d --daemon
          bench-dN` with a SKILLQ_HOME of its own;
  raw     `celery -A raw_tasks worker -Q bench-raw --concurrency 2` (benchmarks/raw_tasks.py)

With each count of machines up it times, after one warm-up run, --runs (3; --quick 2)
fan-outs of execution.py's figure (c) skill: `fan-true`, the script skill `bench-true`
(`true`) for each of --items (1,000; --quick 200) items, through the real launch path; and,
in turn with them, a raw Celery group of as many subprocess `true` tasks. Reported per
count: items/s (median), the scaling ratio throughput(N) / throughput(1) of each side,
skillq against raw, and how many items each daemon ran (step_runs.daemon).

Routing (lifecycle/routing.py): a step with no `requires` that every online daemon serving
`default` can run goes to the shared `default` queue, which every one of them consumes, so
the items spread over the daemons with no option set; the planner sends quick items up to
64 to a message (lifecycle/planner.py), so they spread a message at a time. The step_runs'
queue and route columns of every run are in the results, beside the per-daemon counts.

Results: a rich table, and benchmarks/results/daemons-<date>.json with every sample.
Workers, forwarders, links and namespaces are removed at the end, on Ctrl-C and on errors.
On a 2-core machine throughput cannot scale past about 2x (each daemon's pool is 2
processes, and the servers share the same cores). --quick takes about 1-2 minutes.
"""

from __future__ import annotations

import sys

from execbench.daemons_run import main  # benchmarks/execbench: daemons, daemons_run, netns

if __name__ == "__main__":
    sys.exit(main(__doc__.split("\n\n")[0]))
