"""Execution overhead: skillq side by side with its raw-Celery floor, same broker, same run.

    .venv/bin/python benchmarks/execution.py [--quick] [--py-spy DIR] [--big-vault N]
                                             [--only a,b,d,e,s,cli] [--keep]

It starts its own stack: a real Redis and PostgreSQL under a temporary SKILLQ_HOME (the
embedded default, orchestrator/embedded.py), or the servers named by SKILLQ_BROKER_URL and
SKILLQ_DATABASE_URL when both are set (use a Redis database and a PostgreSQL database no
other skillq uses: the skillq side sends to the real `default` and `control` queues).
Then three worker processes, each at concurrency 2:

  skillq   `python -m workers.main --queues default,control` (what `skillq up` starts),
           serving a generated vault in the temporary folder;
  raw      `celery -A raw_tasks worker -Q bench-raw` (benchmarks/raw_tasks.py: a no-op and
           a subprocess task, plain Celery defaults), on its own queue of the same broker;
  raw-strict  the same tasks with skillq's Celery settings (acks_late, prefetch 1,
              task events, track_started): an attribution row, not a target

The skillq side goes through the real `skillq run` path once its checks have passed:
orchestrator.launch.launch (the run recorded and its first step planned in one
transaction, then sent) and launch.wait_run, woken by the run's NOTIFY; a latency sample
ends when the client has the result (where `skillq run` prints it; the run's
benchmarks.json files, written just after, are awaited before the next sample as the
command awaits them before it exits). The raw side waits for a latency sample with
``AsyncResult.get()``, as a Celery user does (figure a-wait sets it beside polling every
2 ms, as (a) was measured until 2026-12-05), and polls a fan-out's results every 20 ms.

Figures (ratio, target):
  a  one-step pipeline latency vs a bare Celery round trip, median of N        <= 2x
  b  1,000-item fan-out of the cheapest step vs a group of 1,000 no-ops,
     throughput                                                                 >= 0.8x
     The cheapest step skillq can run is a cache hit: a script skill with
     `cache: {enabled: true}` whose inputs were seen before succeeds from the cache
     without spawning anything (orchestrator steps start a nested run, instruction-only
     steps have no executor). Every other step is a script, so (c) is reported too.
  c  1,000-item fan-out of a script skill running `true` vs a Celery group of 1,000
     tasks each running `true` through subprocess, time                         <= 1.15x
  d  step-run records: the planner's way (StepRun ORM objects, one commit) vs
     PostgreSQL COPY of the same rows into the same table, throughput          >= 0.35x
  e  widths 10, 100, 1,000, 5,000 (--quick: up to 1,000): the marginal time per item,
     (T(w) - T(1)) / (w - 1), stays within +-20 % of its median over the widths
  s  scale (issue 16): the planner's advance with nothing to do over a fan-out of
     10,000 and of 100,000 pending items (--quick: 2,000 and 20,000), each against its
     floor (locking, reading and writing the run's row), within 10 ms of each other
     (d3-flat); the advance after one item retries (d3r); and a 100,000-item fan-out
     of cache hits (--quick: 20,000), ms per item against the 1,000-item figure of the
     same run, within +-20 % (f), with the peak RSS of the waiting client (which also
     plans the launch) and of the skillq worker with its pool (f-rss-*)
Informational rows (no target) break the gaps down:
  a2 a3 a4   latency of a script step; raw Celery with skillq's Celery settings (acks_late,
             prefetch 1, task events, track_started); `skillq run` from the shell
  a-cpu      CPU milliseconds one one-step run costs each process group (this client, the
             worker with its pool, PostgreSQL, Redis), each side alone; the client's
             includes this benchmark's progress display, on both sides
  b2 b3      the script fan-out against no-ops; a no-op group with skillq's Celery settings
  *-cpu      CPU seconds of each process group (skillq worker and its pool children and
             their subprocesses, PostgreSQL, Redis, this client) during a fan-out
  c2         (full run) scripts running `python3 -I -S -c pass`; the workers' PATH starts
             with this venv's bin, so python3 is an interpreter, not a pyenv shim
  b-vault    (full run, --big-vault N) the same fan-out in a vault of N more skills
  d-*, d2-d6 the same rows through Core insert() and psycopg executemany; the planner's
             launch and an advance with nothing to do; a worker's claim + finish per step
             in a narrow and a wide fan-out, against a lean-SQL what-if; what pool pre-ping
             adds to a transaction; one benchmarks.json refresh
  and, after the table, the phases of a one-step run read from its records.
With --py-spy DIR, one fan-out of each kind runs again under py-spy (on-CPU, then with
idle samples) and the worker's hotspots are printed.

Results: a rich table, and benchmarks/results/execution-<date>.json with every sample.
Every process it started is stopped at the end, on Ctrl-C and on errors too. Exit status
1 when a target is missed. On 2 cores the full run takes 6-12 minutes, --quick 1-3.
"""

from __future__ import annotations

import sys

from execbench.run import main  # benchmarks/execbench: one module per part of the run

if __name__ == "__main__":
    sys.exit(main(__doc__.split("\n\n")[0]))
