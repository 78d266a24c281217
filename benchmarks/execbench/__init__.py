"""The execution benchmark (benchmarks/execution.py), one module per part:

  config           paths, poll intervals, worker names, the console
  vaultgen         the generated vault (and the big one)
  stack            starting and stopping the servers and the workers
  cpu              CPU seconds of each process group
  bench            waiting for tasks and runs; one side or the other
  figure           the Figure row and its median
  figures_latency  (a) figures: one-step latency, `skillq run`
  figures_fanout   (b) (c) (e) figures: fan-outs, the big vault, widths
  figures_records  (d) figures: step-run records
  profiling        py-spy and hotspots
  report           the rich table and the JSON results
  cli              the command line and the run's configuration
  run              main: the whole run, start to stop

and benchmarks/daemon_scaling.py's, on the same stack and vault:

  netns            a network namespace per machine, its veth link and forwarder
  daemons          the namespaced daemons (and raw workers); timing a fan-out
  daemons_run      main: the machines one by one, the table and the results
"""

import sys
from pathlib import Path

# benchmarks/ itself: raw_tasks and validate_vault live there.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
