"""A builder's tool calls answered once: each answer is recorded by its call, and a
replay of the call (the builder's step running again, its model's turns replayed) gets
the answer its model read the first time.

Without it a replayed ``read_file`` would read what later calls wrote, the replayed
history would differ from the recorded one, and the model would be asked (and paid)
again from there (workers/agent/replay.py). A call that changes the draft
(``write_file``) is done again on a replay, in its order, so a draft folder rebuilt on
another machine ends as the first one did; its answer is still the recorded one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic_ai import RunContext, Tool
from sqlalchemy.dialects.postgresql import insert

from shared.attempt_id import AttemptId
from shared.db.build_models import DraftToolResult
from shared.db.session import transaction


@dataclass
class ToolJournal:
    database_url: str
    row_id: str  # the builder's attempt: its calls are keyed by its step item

    def durable(self, tool: Tool[None], *, redo: bool = False) -> Tool[None]:
        """``tool`` answering each call as it first did; ``redo``: done again anyway."""
        function: Callable[..., Any] = tool.function
        prefix = AttemptId.parse(self.row_id).calls_prefix

        def call(rc: RunContext[None], **arguments: Any) -> Any:
            key = f"{prefix}{rc.tool_call_id}"
            with transaction(self.database_url) as session:
                found = session.get(DraftToolResult, key)
            if found is not None and not redo:
                return found.result
            answer = function(rc, **arguments) if tool.takes_ctx else function(**arguments)
            if found is not None:
                return found.result
            with transaction(self.database_url) as session:
                session.execute(insert(DraftToolResult).values(key=key, result=answer)
                                .on_conflict_do_nothing())
            return answer

        return Tool.from_schema(call, name=tool.name, description=tool.description,
                                json_schema=tool.function_schema.json_schema, takes_ctx=True)
