"""`skillq publish`, `skillq versions`, `skillq rollback`, `skillq bench`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer

from orchestrator.cli.common import VaultOption, err, out, vault
from orchestrator.cli.tables import Column, aside, emit
from shared.errors import SkillqError
from shared.skill import Skill
from shared.skillfiles import RunSource

if TYPE_CHECKING:
    from orchestrator.publish import Published
    from orchestrator.versions import VersionStats


def register(app: typer.Typer) -> None:
    app.command("publish")(publish_cmd)
    app.command("versions")(versions_cmd)
    app.command("rollback")(rollback_cmd)
    app.command("bench")(bench_cmd)


@contextmanager
def _status() -> Iterator[Callable[[str], None]]:
    with err.status("", spinner="dots") as shown:
        yield lambda text: shown.update(text)


def _done(result: Published) -> None:
    if result.unchanged:
        out.print(f"{result.skill} v{result.version} is already published with these files "
                  f"({result.folder_hash[:19]}); nothing to do", markup=False)
        return
    origin = f" (rollback of v{result.rolled_back_from})" if result.rolled_back_from else ""
    out.print(f"✓ published {result.skill} v{result.version}{origin}: {result.files} file(s), "
              f"folder {result.folder_hash}; tests: {result.tests}", style="green",
              markup=False)


def publish_cmd(name: str, vault_opt: VaultOption = None) -> None:
    """Validate a skill, run its test cases, give it the next version, store that version
    (files, hashes, who/where/when) and make its folder read-only.

    Exit 0 when published (or already published unchanged), 1 when refused.
    """
    from orchestrator.connect import connect
    from orchestrator.publish import publish

    loaded = vault(vault_opt)
    loaded.get(name)
    conn = connect()
    with _status() as status:
        result = publish(conn, loaded, name, status=status)
    _done(result)


def rollback_cmd(
    name: str,
    to: Annotated[int, typer.Option("--to", help="The published version to restore.",
                                    min=1)],
    force: Annotated[bool, typer.Option(help="Discard unpublished edits in the folder.")
                     ] = False,
    vault_opt: VaultOption = None,
) -> None:
    """Make version N's files the newest version again (published as a new number with
    N's files: version numbers are never reused)."""
    from orchestrator.connect import connect
    from orchestrator.rollback import rollback

    loaded = vault(vault_opt)
    loaded.get(name)
    conn = connect(workers=False)
    with _status() as status:
        result = rollback(conn, loaded, name, to, force=force, status=status)
    _done(result)


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def _folder_state(skill: Skill, published: dict[int, dict[str, str]]) -> str:
    from shared.folderhash import changes
    from shared.published import snapshot

    version = skill.manifest.version
    if version not in published:
        return f"{skill.folder}: v{version}, not published"
    found = changes(published[version], snapshot(skill.folder).fingerprints)
    if not found:
        return f"{skill.folder}: v{version}, the published files"
    return (f"{skill.folder}: a draft of v{version} (" + "; ".join(str(c) for c in found)
            + f"); production runs refuse it until `skillq publish {skill.name}`")


VERSION_COLUMNS = (
    Column("version", justify="right"),
    Column("published_at", "published at"),
    Column("published_by", "by", spare=2),
    Column("folder_hash", "folder hash", wrap=False, spare=3),
    Column("runs", justify="right"),
    Column("success_rate", "success rate", show=lambda r: _rate(r["success_rate"]),
           justify="right"),
    Column("note", spare=1),
)


def versions_cmd(
    name: str,
    as_json: Annotated[bool, typer.Option(
        "--json", help="A JSON array, one object per version (success rate 0-1); the "
        "folder's state goes to stderr.")] = False,
    vault_opt: VaultOption = None,
) -> None:
    """Published versions of a skill with their provenance and how each has run."""
    from orchestrator.connect import connect
    from orchestrator.versions import version_stats
    from shared.db.session import transaction
    from shared.published import files_of, list_versions

    loaded = vault(vault_opt)
    skill = loaded.get(name)
    conn = connect(workers=False)
    with transaction(conn.endpoints.database_url) as session:
        found = list(list_versions(session, name))
        stats = version_stats(session, name, orchestrator=skill.manifest.is_orchestrator)
        published = {r.version: files_of(r).fingerprints for r in found}
        rows: list[dict[str, Any]] = [{
            "version": r.version, "published": True, "published_at": r.published_at,
            "published_by": f"{r.published_by}@{r.published_host}",
            "folder_hash": r.folder_hash, "rolled_back_from": r.rolled_back_from,
            "runs": s.runs if (s := stats.get(r.version)) else 0,
            "success_rate": s.success_rate if s else None,
            "note": f"rollback of v{r.rolled_back_from}" if r.rolled_back_from else None,
        } for r in found]
    rows += [{"version": v, "published": False, "published_at": None, "published_by": None,
              "folder_hash": None, "rolled_back_from": None, "runs": stats[v].runs,
              "success_rate": stats[v].success_rate, "note": "never published"}
             for v in sorted(set(stats) - set(published))]
    emit(rows, VERSION_COLUMNS, as_json=as_json, title=f"{name}: versions",
         empty=f"{name} has no published version; `skillq publish {name}` makes v1")
    state = _folder_state(skill, published)
    if as_json:
        err.print(state, markup=False)
    else:
        aside(state)


BENCH_COLUMNS = (
    Column("version", show=lambda r: r["label"]),
    Column("runs", justify="right"),
    Column("success_rate", "success rate", show=lambda r: r["shown"]["rate"], justify="right"),
    Column("median_ms", "median", show=lambda r: r["shown"]["median"], justify="right"),
    Column("p90_ms", "p90", show=lambda r: r["shown"]["p90"], justify="right"),
    Column("avg_cost_usd", "avg cost", show=lambda r: r["shown"]["avg"], justify="right"),
    Column("total_cost_usd", "total cost", show=lambda r: r["shown"]["total"],
           justify="right"),
)


def _bench_row(s: VersionStats) -> dict[str, Any]:
    shown = {"rate": _rate(s.success_rate), "median": _ms(s.median_ms),
             "p90": _ms(s.p90_ms), "avg": _usd(s.avg_cost_usd),
             "total": _usd(s.total_cost_usd if s.runs else None)}
    return {"version": s.version, "label": f"v{s.version}", "runs": s.runs,
            "success_rate": s.success_rate, "median_ms": s.median_ms, "p90_ms": s.p90_ms,
            "avg_cost_usd": s.avg_cost_usd, "total_cost_usd": s.total_cost_usd,
            "shown": shown}


def bench_cmd(
    name: str,
    compare: Annotated[tuple[int, int] | None, typer.Option(
        "--compare", help="Two versions side by side, e.g. --compare 1 2.")] = None,
    source: Annotated[RunSource | None, typer.Option(
        help="Only runs from this source (default: all).")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="A JSON array, one object per version (success rate 0-1, "
        "durations in ms, costs in USD).")] = False,
    vault_opt: VaultOption = None,
) -> None:
    """Duration (median, p90), cost and success rate of each version, from the run
    records; with --compare, two versions and the change between them."""
    from orchestrator.cli.eval_compare_view import print_eval_compare
    from orchestrator.connect import connect
    from orchestrator.evals.compare import compare_evals, row_json
    from orchestrator.versions import no_runs, version_stats
    from shared.db.session import transaction

    loaded = vault(vault_opt)
    skill = loaded.get(name)
    conn = connect(workers=False)
    with transaction(conn.endpoints.database_url) as session:
        stats = version_stats(session, name, orchestrator=skill.manifest.is_orchestrator,
                              source=source.value if source else None)
        evals = compare_evals(session, name, *compare) if compare else []
    versions = list(compare) if compare else sorted(stats)
    if not versions:
        raise SkillqError(f"{name} has no finished runs to compare yet")
    rows = [_bench_row(stats.get(v) or no_runs(v)) for v in versions]
    if as_json:
        found = [{k: v for k, v in r.items() if k not in ("label", "shown")} for r in rows]
        if evals:  # the eval view: the same cases on both, B's difference from A
            found[1]["eval_compare"] = {"against": versions[0],
                                        "cases": [row_json(e) for e in evals]}
        emit(found, BENCH_COLUMNS, as_json=True)
        return
    if compare:
        a, b = (stats.get(v) or no_runs(v) for v in compare)
        rows.append({"label": f"v{compare[0]}→v{compare[1]}", "runs": None,
                     "shown": _change(a, b)})
    emit(rows, BENCH_COLUMNS,
         title=f"{name}: runs by version" + (f" ({source.value})" if source else ""))
    if compare and evals:
        print_eval_compare(evals, *compare)


def _pct(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "-"
    if a == 0:
        return "±0%" if b == 0 else "new"
    return f"{(b - a) / a * 100:+.0f}%"


def _change(a: VersionStats, b: VersionStats) -> dict[str, str]:
    rate = "-" if a.success_rate is None or b.success_rate is None \
        else f"{(b.success_rate - a.success_rate) * 100:+.0f} pts"
    return {"rate": rate, "median": _pct(a.median_ms, b.median_ms),
            "p90": _pct(a.p90_ms, b.p90_ms), "avg": _pct(a.avg_cost_usd, b.avg_cost_usd),
            "total": ""}
