"""A run followed from this process, over the servers themselves (no local API): the
direct side of cli/follow.py."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from orchestrator.cli.follow import Cancelled, Ended
from orchestrator.run_report import failure_message, result_json, success_line

if TYPE_CHECKING:
    from orchestrator.connect import Connection
    from shared.db.models import PipelineRun


class DirectRun:
    def __init__(self, conn: Connection, run_id: str) -> None:
        self.conn, self.run_id = conn, run_id

    @classmethod
    def connecting(cls, run_id: str) -> DirectRun:
        from orchestrator.connect import connect

        return cls(connect(), run_id)

    def ended(self, run: PipelineRun) -> Ended:
        return Ended(str(run.state), result_json(self.conn, run), failure_message(run),
                     success_line(run))

    def wait(self, quiet: bool, on_end: Callable[[Ended], None]) -> Ended:
        from orchestrator.cli.run_bar import progress_bar
        from orchestrator.launch import Progress as RunProgress
        from orchestrator.launch import wait_run

        seen: list[Ended] = []  # read once, when the end was known
        with contextlib.ExitStack() as bar:
            show = bar.enter_context(progress_bar(self.run_id, quiet))

            def shown(p: RunProgress) -> None:
                show(p.total, p.done, p.counts)

            def ended(run: PipelineRun) -> None:
                bar.close()  # the bar's last frame goes out before the result does
                seen.append(self.ended(run))
                on_end(seen[0])

            run = wait_run(self.conn, self.run_id, on_progress=shown, on_end=ended)
        return seen[0] if seen else self.ended(run)

    def cancel(self, reason: str) -> Cancelled:
        from orchestrator.launch import cancel_run, run_progress

        done = cancel_run(self.conn, self.run_id, reason)
        final, _ = run_progress(self.conn, self.run_id, counts=False)
        return Cancelled(self.ended(final), done.ended_now, len(done.stopped))

    def open_waits(self) -> list[dict[str, Any]]:
        from orchestrator.waits import inbox

        return [w.as_json() for w in inbox(self.conn, self.run_id)]

    def decide(self, wait: dict[str, Any], decision: str, body: dict[str, Any]) -> None:
        from orchestrator import waits
        from orchestrator.publish import who

        which, by = f"#{wait['id']}", f"terminal:{who()}"
        if decision == "answer":
            waits.answer(self.conn, wait["run_id"], which, text=body.get("text"),
                         choice=body.get("choice"), by=by)
        elif decision == "approve":
            waits.approve(self.conn, wait["run_id"], which, given=body.get("inputs"), by=by)
        else:
            waits.reject(self.conn, wait["run_id"], which, reason=str(body.get("reason")),
                         by=by)
