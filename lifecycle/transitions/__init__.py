"""The one writer of run, step and wait states.

Every change of ``pipeline_runs.state``, ``step_runs.state`` or ``waits.state`` is a
function of this package (by record: ``runs``; attempts' ``launches``, ``claims`` and
``finishes``; a person's ``waits``), and
each is checked against the transition tables of shared/states.py before it is written:
an ORM write calls ``check_run``/``check_step`` on the row's current state, and a bulk
statement's guard (``WHERE state IN (...)``) is built from the table's sources of the
new state, passed as parameters taken from the enums. The caller owns the transaction.

Other columns (outputs, errors, heartbeats) travel with the state change that sets them;
heartbeats alone are not state changes (workers/heartbeat.py). Each change of a step
attempt's state is also reported to lifecycle/step_counts.py, which keeps the per-step
counts of the newest attempts' states (written at the commit).
"""

from lifecycle.transitions.claims import (
    Claimed,
    LoneClaim,
    claim_lone,
    claim_pending,
    take_over,
)
from lifecycle.transitions.finishes import (
    LONE_ITEM,
    Finished,
    declare_lost,
    finish_attempt,
    finish_held,
    lose_process,
    resume_if_done,
    settle_parent,
    skip_failed,
    skip_failed_items,
    wait_on,
)
from lifecycle.transitions.launches import (
    COPY_FROM,
    LAUNCH_COLUMNS,
    REUSED_COLUMNS,
    add_attempt,
    launch_attempts,
    reuse_attempts,
)
from lifecycle.transitions.runs import (
    ENDED_RUN,
    cancel_open,
    cancel_pending,
    cancel_run,
    fail_run,
    is_new,
    new_run,
    start_run,
    succeed_run,
)
from lifecycle.transitions.waits import cancel_waits, decide, open_wait

__all__ = [
    "COPY_FROM",
    "ENDED_RUN",
    "LAUNCH_COLUMNS",
    "LONE_ITEM",
    "REUSED_COLUMNS",
    "Claimed",
    "Finished",
    "LoneClaim",
    "add_attempt",
    "cancel_open",
    "cancel_pending",
    "cancel_run",
    "cancel_waits",
    "claim_lone",
    "claim_pending",
    "decide",
    "declare_lost",
    "fail_run",
    "finish_attempt",
    "finish_held",
    "is_new",
    "launch_attempts",
    "lose_process",
    "new_run",
    "open_wait",
    "resume_if_done",
    "reuse_attempts",
    "settle_parent",
    "skip_failed",
    "skip_failed_items",
    "start_run",
    "succeed_run",
    "take_over",
    "wait_on",
]
