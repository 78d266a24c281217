"""`skillq publish`, `skillq versions`, `skillq rollback`, `skillq bench`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from orchestrator.cli.common import VaultOption, err, out, vault
from orchestrator.connect import connect
from orchestrator.publish import Published, publish
from orchestrator.rollback import rollback
from orchestrator.versions import VersionStats, no_runs, version_stats
from shared.db.session import transaction
from shared.errors import SkillqError
from shared.folderhash import changes
from shared.published import files_of, list_versions, snapshot
from shared.skill import Skill
from shared.skillfiles import RunSource


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
    loaded = vault(vault_opt)
    loaded.get(name)
    conn = connect(workers=False)
    with _status() as status:
        result = rollback(conn, loaded, name, to, force=force, status=status)
    _done(result)


def _rate(stats: VersionStats | None) -> str:
    if stats is None or stats.success_rate is None:
        return "-"
    return f"{stats.success_rate * 100:.0f}%"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def _console() -> Console:
    # In a pipe, lines stay whole (no 80-column crop).
    return out if out.is_terminal else Console(width=100_000, highlight=False)


def _folder_state(skill: Skill, published: dict[int, dict[str, str]]) -> str:
    version = skill.manifest.version
    if version not in published:
        return f"{skill.folder}: v{version}, not published"
    found = changes(published[version], snapshot(skill.folder).fingerprints)
    if not found:
        return f"{skill.folder}: v{version}, the published files"
    return (f"{skill.folder}: a draft of v{version} (" + "; ".join(str(c) for c in found)
            + f"); production runs refuse it until `skillq publish {skill.name}`")


def versions_cmd(name: str, vault_opt: VaultOption = None) -> None:
    """Published versions of a skill with their provenance and how each has run."""
    loaded = vault(vault_opt)
    skill = loaded.get(name)
    conn = connect(workers=False)
    with transaction(conn.endpoints.database_url) as session:
        rows = list(list_versions(session, name))
        stats = version_stats(session, name, orchestrator=skill.manifest.is_orchestrator)
        published = {r.version: files_of(r).fingerprints for r in rows}
        session.expunge_all()
    table = Table(title=f"{name}: versions", title_justify="left")
    for column in ("version", "published at", "by", "folder hash", "runs", "success rate",
                   "note"):
        table.add_column(column, overflow="fold")
    for r in rows:
        s = stats.get(r.version)
        note = f"rollback of v{r.rolled_back_from}" if r.rolled_back_from else ""
        table.add_row(Text(str(r.version)), Text(f"{r.published_at:%Y-%m-%d %H:%M:%S %Z}"),
                      Text(f"{r.published_by}@{r.published_host}"), Text(r.folder_hash),
                      Text(str(s.runs if s else 0)), Text(_rate(s)), Text(note))
    for version in sorted(set(stats) - set(published)):
        s = stats[version]
        table.add_row(Text(str(version)), Text("-"), Text("-"), Text("-"), Text(str(s.runs)),
                      Text(_rate(s)), Text("never published"))
    _console().print(table)
    out.print(_folder_state(skill, published), markup=False)


def bench_cmd(
    name: str,
    compare: Annotated[tuple[int, int] | None, typer.Option(
        "--compare", help="Two versions side by side, e.g. --compare 1 2.")] = None,
    source: Annotated[RunSource | None, typer.Option(
        help="Only runs from this source (default: all).")] = None,
    vault_opt: VaultOption = None,
) -> None:
    """Duration (median, p90), cost and success rate of each version, from the run
    records; with --compare, two versions and the change between them."""
    loaded = vault(vault_opt)
    skill = loaded.get(name)
    conn = connect(workers=False)
    with transaction(conn.endpoints.database_url) as session:
        stats = version_stats(session, name, orchestrator=skill.manifest.is_orchestrator,
                              source=source.value if source else None)
    versions = list(compare) if compare else sorted(stats)
    if not versions:
        raise SkillqError(f"{name} has no finished runs to compare yet")
    table = Table(title=f"{name}: runs by version" + (f" ({source.value})" if source else ""),
                  title_justify="left")
    for column in ("version", "runs", "success rate", "median", "p90", "avg cost",
                   "total cost"):
        table.add_column(column, justify="right" if column != "version" else "left")
    for v in versions:
        s = stats.get(v) or no_runs(v)
        table.add_row(f"v{v}", str(s.runs), _rate(s), _ms(s.median_ms), _ms(s.p90_ms),
                      _usd(s.avg_cost_usd), _usd(s.total_cost_usd if s.runs else None))
    if compare:
        a, b = (stats.get(v) or no_runs(v) for v in compare)
        table.add_row(*_change(a, b, f"v{compare[0]}→v{compare[1]}"))
    _console().print(table)


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def _pct(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "-"
    if a == 0:
        return "±0%" if b == 0 else "new"
    return f"{(b - a) / a * 100:+.0f}%"


def _change(a: VersionStats, b: VersionStats, label: str) -> tuple[str, ...]:
    rate = "-" if a.success_rate is None or b.success_rate is None \
        else f"{(b.success_rate - a.success_rate) * 100:+.0f} pts"
    return (label, "", rate, _pct(a.median_ms, b.median_ms), _pct(a.p90_ms, b.p90_ms),
            _pct(a.avg_cost_usd, b.avg_cost_usd), "")
