"""``ask_question``: an agent step asks a person rather than guess (seed 000's
Question-Asking Protocol), and waits for the answer holding no worker slot.

The first call opens a wait (lifecycle/waits.py) and is deferred, as an execute_skill
call is (calls.py): the step ends ``waiting``. An answer puts it back in its queue; it
runs again with its turns replayed, and this time the call returns the answer. Past the
deadline, the call returns the question's default, or the step fails naming the
question. Offered only where someone can answer (workers/agent/step.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import RunContext, Tool
from pydantic_ai.exceptions import CallDeferred

from lifecycle import waits
from shared.agent_prompt import tools_spec
from shared.attempt_id import AttemptId
from shared.db.session import transaction
from shared.db.wait_models import QUESTION
from shared.secrets import redact
from shared.states import WaitState


class QuestionUnanswered(Exception):
    """Nobody answered a question with no default in time: the step fails with this."""


@dataclass
class Questions:
    database_url: str
    row_id: str
    skill: str
    timeout_s: float
    secrets: Mapping[str, str] = field(default_factory=dict)  # the step's: never stored
    waiting: list[int] = field(default_factory=list)  # the open waits this attempt left

    def ask_question(self, rc: RunContext[None], question: str,
                     choices: list[str] | None = None, free_text: bool | None = None,
                     default: str | None = None) -> dict[str, Any]:
        attempt = AttemptId.parse(self.row_id)
        # what the model may have read of a secret stays out of the record and the inbox
        asked = waits.Asked(kind=QUESTION, prompt=redact(question, self.secrets),
                            choices=tuple(redact(c, self.secrets) for c in choices or ()),
                            free_text=not choices if free_text is None else free_text,
                            default=None if default is None else redact(default, self.secrets),
                            timeout_s=self.timeout_s)
        with transaction(self.database_url) as session:
            wait = waits.ask(session, f"{attempt.calls_prefix}{rc.tool_call_id}", attempt,
                             self.skill, asked)
            state, wait_id, answer = WaitState(wait.state), wait.id, wait.answer
            stored_default = wait.default
        if state is WaitState.OPEN:
            self.waiting.append(wait_id)
            raise CallDeferred(metadata={"wait": wait_id})
        if state is WaitState.ANSWERED:
            return {"answer": answer}
        if state is WaitState.TIMED_OUT and stored_default is not None:
            return {"answer": stored_default, "note": "nobody answered in time: this is the "
                    "question's default"}
        why = "nobody answered it in time and it has no default" \
            if state is WaitState.TIMED_OUT else "its run ended first"
        raise QuestionUnanswered(f"question #{wait_id} ({question!r}) was not answered: {why}")

    def tool(self) -> Tool[None]:
        spec = tools_spec.ASK_QUESTION_TOOL
        return Tool.from_schema(self.ask_question, name=spec.name,
                                description=spec.description,
                                json_schema=dict(spec.parameters), takes_ctx=True)
