"""A step attempt's id, "<run>/<step>/<item>/<attempt>": step_runs.id, the argument of
a step's Celery message, the tag on its processes, a nested run's parent_step_run_id.

Read and written in one place, so that no caller counts slashes on its own. Neither a
run id ("run-" and hex) nor a step id (a manifest's step id, or the skill's name for a
lone skill) holds a "/", so the text is four parts. Parsing is on the path of every
claim: one split and two int() calls, no regex.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AttemptId:
    run_id: str
    step_id: str
    item: int  # the item's index in the step's fan-out; -1 for a step that does not fan out
    attempt: int  # 1 for the first

    @staticmethod
    def text(run_id: str, step_id: str, item: int, attempt: int) -> str:
        """``str(AttemptId(...))`` without making the object: a wide launch makes its
        ids by the thousand."""
        return f"{run_id}/{step_id}/{item}/{attempt}"

    @classmethod
    def parse(cls, text: str) -> AttemptId:
        """The id ``text`` names; ValueError when it is not "<run>/<step>/<item>/<attempt>"
        with whole numbers for item and attempt."""
        parts = text.rsplit("/", 3)
        if len(parts) == 4 and parts[0] and parts[1]:
            try:
                return cls(parts[0], parts[1], int(parts[2]), int(parts[3]))
            except ValueError:
                pass
        raise ValueError(f"not an attempt id (<run>/<step>/<item>/<attempt>): {text!r}")

    def __str__(self) -> str:
        return AttemptId.text(self.run_id, self.step_id, self.item, self.attempt)

    @property
    def item_key(self) -> str:
        """"<run>/<step>/<item>": the step item, whichever its attempt (an agent step's
        execute_skill calls are named from it: each attempt's replay finds them)."""
        return f"{self.run_id}/{self.step_id}/{self.item}"

    @property
    def calls_prefix(self) -> str:
        """"<run>/<step>/<item>#": how the ids of the execute_skill calls an agent step
        item makes begin (the tool call's id follows), whichever attempt made them."""
        return f"{self.item_key}#"

    @property
    def attempts_prefix(self) -> str:
        """"<run>/<step>/<item>/": how the id of every attempt of the same step item
        begins (a new attempt ends the processes an earlier one left, by their tags)."""
        return f"{self.run_id}/{self.step_id}/{self.item}/"
