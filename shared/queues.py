"""Queue classes: the queue a step goes to follows its approach (the cost hierarchy)."""

from __future__ import annotations

from enum import StrEnum

from shared.manifest import Approach


class QueueClass(StrEnum):
    DEFAULT = "default"  # api, code, web: scale with processes
    DOM0 = "dom0"  # one browser per machine: concurrency 1
    CMD0 = "cmd0"  # one screen, mouse and keyboard per machine: concurrency 1
    AGENT = "agent"  # LLM steps
    GPU = "gpu"

    @property
    def exclusive(self) -> bool:
        """One step at a time per machine (a worker of this class runs at concurrency 1)."""
        return self in (QueueClass.DOM0, QueueClass.CMD0)


def queue_for(approach: Approach, *, gpu: bool = False) -> QueueClass:
    if gpu:
        return QueueClass.GPU
    return {
        Approach.DOM0: QueueClass.DOM0,
        Approach.CMD0: QueueClass.CMD0,
        Approach.AGENT: QueueClass.AGENT,
    }.get(approach, QueueClass.DEFAULT)


# The planner's own bookkeeping tasks go to a queue no exclusive worker serves, so a
# busy browser never holds up a pipeline's progress (and no chord body lands on dom0).
CONTROL_QUEUE = "control"
