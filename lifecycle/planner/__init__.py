"""The planner: moves one pipeline run forward from what PostgreSQL records.

Fan-out lists are known only at run time and Celery's own fan-in (chords) counts a
redelivered task twice under at-least-once delivery, so fan-in is tracked here: each
call locks the run's row and decides what is ready, what finished, what died and what
retries next. It is idempotent: calling it twice in a row dispatches nothing new. The
caller commits, then sends the returned dispatches.

It runs once per settled step, per failed item and per watch, so it reads only what it
needs, each an index range on ix_step_runs_run_step_state (migration 0015), never every
attempt of the run: the attempts of its running steps that want something (a retry or
a lost item without its next attempt, a retry falling due, a running item whose
heartbeat stopped), whether a running step has an item still open, its failed items
once it has none, and a finished step's outputs when a later step or the run's outputs
refer to them. A 100,000-item fan-out's advance costs what a 10-item one's does.

The modules, each importing only those above it:

- decisions: what is ready, settled, done, how many items a message, when to watch,
  from the plan and the run's progress ledger (plain data: no session, no SQL);
- records: the SQL and the ORM: the run's row locked, reads of step rows, the batch
  sizing query, attempts inserted;
- work: one advance's state, its Outcome, and failing the run;
- values: finished steps' values, and the scope references resolve against;
- launch: a ready step's items resolved, routed, recorded and batched into Dispatch;
- revive: retries due, lost attempts (lifecycle/policy.py decides), stopped heartbeats;
- forward: ``advance`` itself: revive, settle and launch until nothing changes, end.
"""

from lifecycle.planner.decisions import MAX_BATCH, MIN_MESSAGES
from lifecycle.planner.forward import advance
from lifecycle.planner.records import FINAL, HISTORY_WINDOW, LAZY, lock_run, locked_run
from lifecycle.planner.work import Outcome
from lifecycle.policy import MAX_LOST  # re-dispatches after a dead worker: policy's rule

__all__ = [
    "FINAL",
    "HISTORY_WINDOW",
    "LAZY",
    "MAX_BATCH",
    "MAX_LOST",
    "MIN_MESSAGES",
    "Outcome",
    "advance",
    "lock_run",
    "locked_run",
]
