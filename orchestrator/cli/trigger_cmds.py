"""`skillq eval NAME --triggers [--improve]`: how well a skill's description makes a model
load it (orchestrator/evals/triggers.py). `skillq eval` (eval_cmds.py) hands over to
``triggers_cmd`` when --triggers is given. Progress on stderr; the report as tables, or
--json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.cli.common import err, one_line, out, vault

if TYPE_CHECKING:
    from orchestrator.evals.triggers import Score, Scored, TriggerReport


def triggers_cmd(name: str, vault_opt: Path | None, improve: bool, budget_usd: float | None,
                 as_json: bool) -> None:
    """Put the skill's trigger queries (benchmarks.json ``triggers``) to a router on the
    queues; with ``improve``, try other descriptions and write the best as a draft."""
    from orchestrator.cli.run_bar import spend_bar
    from orchestrator.connect import connect
    from orchestrator.evals.triggers import run_triggers, trigger_queries

    loaded = vault(vault_opt)
    skill = loaded.get(name)
    trigger_queries(skill)  # nothing to score: said before the servers are reached
    conn = connect()
    with spend_bar(f"trigger eval of {skill.name}") as show:
        report = run_triggers(conn, loaded, skill, improve=improve, budget_usd=budget_usd,
                              on_progress=show)
    print_triggers(report, as_json)
    if report.stopped:
        err.print(f"stopped: {report.stopped}", markup=False)
    found = report.improvement
    if found is not None and found.draft is not None:
        err.print(f"draft: {found.draft}\nto use it: cp {found.draft} {skill.skill_md} (a "
                  f"published skill: chmod u+w it first), try it, then `skillq publish "
                  f"{skill.name}`", markup=False)


def print_triggers(report: TriggerReport, as_json: bool) -> None:
    if as_json:
        print(json.dumps(as_dict(report), ensure_ascii=False))
        return
    from rich.table import Table
    from rich.text import Text  # a query is shown as written, never read as markup

    out.print(f"trigger eval of {report.skill} v{report.version}: "
              f"{one_line(report.current.description)}", markup=False)
    queries = Table(title="queries", title_justify="left")
    for column in ("query", "should load", "held out", "loaded", "right"):
        queries.add_column(column, overflow="fold")
    for r in report.current.results:
        queries.add_row(Text(one_line(r.query)), _yes(r.should_trigger), _yes(r.held_out),
                        Text(", ".join(r.loaded) or "-"),
                        Text("error: " + one_line(r.error)) if not r.decided and r.error
                        else _yes(r.triggered == r.should_trigger))
    out.print(queries)
    scores = Table(title="scores", title_justify="left")
    for column in ("description", "part", "TP", "FP", "FN", "TN", "precision", "recall", "F1"):
        scores.add_column(column, overflow="fold")
    rows = [("current", report.current)]
    found = report.improvement
    if found is not None:
        rows += [(f"candidate {i}", c.scored) for i, c in enumerate(found.candidates, 1)
                 if c.scored is not None]
    for label, scored in rows:
        for part, s in (("train", scored.train), ("held out", scored.held_out)):
            scores.add_row(label, part, str(s.tp), str(s.fp), str(s.fn), str(s.tn),
                           _num(s.precision), _num(s.recall), _num(s.f1))
    out.print(scores)
    if found is not None:
        for i, c in enumerate(found.candidates, 1):
            why = f" (not scored: {c.rejected})" if c.rejected else ""
            out.print(f"candidate {i}{why}: {one_line(c.description)}", markup=False)
        out.print(found.note, markup=False)
    out.print(f"spent ${report.spent_usd:.4f}", markup=False)


def as_dict(report: TriggerReport) -> dict[str, Any]:
    found = report.improvement
    return {"skill": report.skill, "version": report.version,
            "current": _scored(report.current),
            "improve": None if found is None else {
                "candidates": [{"description": c.description, "rejected": c.rejected,
                                **(_scored(c.scored) if c.scored is not None else {})}
                               for c in found.candidates],
                "best": found.best, "draft": str(found.draft) if found.draft else None,
                "describer_run": found.describer_run, "note": found.note},
            "spent_usd": report.spent_usd, "stopped": report.stopped}


def _scored(scored: Scored) -> dict[str, Any]:
    return {"description": scored.description, "complete": scored.complete,
            "train": _score(scored.train), "held_out": _score(scored.held_out),
            "queries": [{"query": r.query, "should_trigger": r.should_trigger,
                         "held_out": r.held_out, "loaded": list(r.loaded),
                         "triggered": r.triggered, "decided": r.decided,
                         "run_id": r.run_id, "error": r.error} for r in scored.results]}


def _score(s: Score) -> dict[str, Any]:
    return {"tp": s.tp, "fp": s.fp, "fn": s.fn, "tn": s.tn, "precision": s.precision,
            "recall": s.recall, "f1": s.f1}


def _yes(value: bool) -> str:
    return "yes" if value else "no"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
