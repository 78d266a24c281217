"""Reading a vault: validate, list, show, catalog."""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from orchestrator.cli.common import VaultOption, err, one_line, out, vault, vault_path
from orchestrator.cli.tables import Column, emit
from shared import agentskills
from shared.catalog import CatalogEntry, catalog_line, to_prompt
from shared.errors import VaultError
from shared.problems import Problem, display_path
from shared.skill import Skill, is_skill_folder
from shared.stepgraph import step_dependencies
from shared.vault import Vault, load_vault, skill_folders, vault_of

if TYPE_CHECKING:
    # Library state and notes need SQLAlchemy: imported by the commands that show them,
    # so `validate` never loads it.
    from orchestrator.library.reach import LibraryView


class Spec(enum.StrEnum):
    skillq = "skillq"
    agentskills = "agentskills"


class CatalogFormat(enum.StrEnum):
    text = "text"
    xml = "xml"


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
    app.command("list")(list_skills)
    app.command("show")(show)
    app.command("catalog")(catalog)


def validate(
    path: Annotated[Path | None, typer.Argument(
        help="A skill folder or a whole vault (default: the vault).", show_default=False)] = None,
    spec: Annotated[Spec, typer.Option(
        help="skillq: the full skill contract; agentskills: the Agent Skills specification "
             "only, with the reference validator's verdict.")] = Spec.skillq,
    strict: Annotated[bool, typer.Option(
        "--strict", help="skillq rules: refuse every field skillq would keep without using "
        "it (Claude Code's, unknown ones in a plain folder, a Claude Code model alias) "
        "instead of warning about it.")] = False,
    vault_opt: VaultOption = None,
) -> None:
    """Check skills and report every problem as `<file>: <field>: <what to fix>`.

    A field skillq keeps without using it is a `warning:` line, never a problem.
    Exit 0 when valid, 1 when a problem was found, 2 on a usage error.
    """
    target = path if path is not None else vault_path(vault_opt)
    if not target.exists():
        raise VaultError(f"{display_path(target)} does not exist")
    stray = _neither_skill_nor_vault(target)
    if stray is not None:
        out.print(str(stray), markup=False)
        out.print(f"✗ nothing to check in {display_path(target)} ({spec} rules)", style="red")
        raise typer.Exit(1)
    warnings: list[Problem] = []
    if spec is Spec.agentskills:  # the reference's verdict: strict already
        problems, count = _validate_agentskills(target)
    else:
        root, folder = vault_of(target)
        loaded = load_vault(root, strict=strict)
        problems = loaded.problems_in(folder) if folder else list(loaded.problems)
        warnings = loaded.warnings_in(folder) if folder else list(loaded.warnings)
        count = 1 if folder else len(loaded.folders)
    for problem in problems:
        out.print(str(problem), markup=False)
    for warning in warnings:
        out.print(f"warning: {warning}", style="yellow", markup=False)
    rules = f"{spec} rules, strict" if strict and spec is Spec.skillq else f"{spec} rules"
    if problems:
        out.print(f"✗ {len(problems)} problem(s) in {count} skill folder(s) checked "
                  f"({rules})", style="red")
        raise typer.Exit(1)
    kept = f"; {len(warnings)} warning(s): what skillq keeps without using " \
        "(`--strict` refuses it)" if warnings else ""
    out.print(f"✓ {count} skill(s) valid ({rules}){kept}", style="green")


def _neither_skill_nor_vault(target: Path) -> Problem | None:
    """The problem of a folder with no SKILL.md whose sub-folders hold none either.

    Reporting "0 skill(s) valid" there would pass a CI check on the wrong folder (a typo'd
    path, the repository root), so it fails, as pytest does when it collects nothing.
    """
    if not target.is_dir() or is_skill_folder(target):
        return None
    folders = skill_folders(target)
    if any(is_skill_folder(f) for f in folders):
        return None
    shown = display_path(target)
    count = len(folders)
    inside = ("it has no sub-folders" if not count else
              f"none of its {count} sub-folder{'s' if count > 1 else ''} has a SKILL.md")
    return Problem(shown, "SKILL.md",
                   f"neither a skill folder (no SKILL.md here) nor a vault ({inside}); pass a "
                   f"skill folder or a vault of skill folders, or start one with "
                   f"`skillq new NAME --vault {shown}`")


def _validate_agentskills(target: Path) -> tuple[list[Problem], int]:
    if target.is_file() and target.name.lower() == "skill.md":
        target = target.parent
    if agentskills.find_skill_md(target) is not None or not target.is_dir():
        return agentskills.validate_agentskills(target), 1
    folders = skill_folders(target)
    if not folders:  # an empty folder is judged as one skill, as the reference does
        return agentskills.validate_agentskills(target), 1
    return [p for f in folders for p in agentskills.validate_agentskills(f)], len(folders)


SKILL_COLUMNS = (Column("name", wrap=False), Column("label"), Column("kind", spare=3),
                 Column("approach", spare=2), Column("version", "v", justify="right", spare=4),
                 Column("pin", spare=1), Column("state"), Column("description"))


def list_skills(
    as_json: Annotated[bool, typer.Option("--json", help="A JSON array, one object per skill."
                                          )] = False,
    vault_opt: VaultOption = None,
) -> None:
    """One row per skill, pinned ones first: name, label, kind, approach, version, pin,
    state (enabled or disabled) and description.

    On a terminal a table fitted to its width; in a pipe a header line of the keys, then
    one tab-separated line per skill, whole, so `skillq list | grep NAME` and `cut -f1`
    work; `--json` an array of objects with those keys.
    """
    from orchestrator.library.reach import library_view

    loaded = vault(vault_opt)
    library = library_view(loaded.root)
    rows = []
    for name in library.pinned_first(sorted(loaded.skills)):
        m = loaded.skills[name].manifest
        rows.append({"name": name, "label": library.label(name, m.label), "kind": str(m.kind),
                     "approach": None if m.is_orchestrator else str(m.effective_approach),
                     "version": m.version, "pin": library.pin_cell(name),
                     "state": library.state_cell(name), "description": one_line(m.description)})
    emit(rows, SKILL_COLUMNS, as_json=as_json,
         title=f"{len(rows)} skill(s) in {display_path(loaded.root)}",
         empty="no skills in this vault")
    if loaded.problems:
        err.print(f"{len(loaded.problems)} problem(s) in this vault: run `skillq validate`",
                  style="yellow")
    _library_note(library)


def _library_note(library: LibraryView) -> None:
    if library.missing:
        err.print(library.missing, style="dim", markup=False)


def show(name: str, vault_opt: VaultOption = None) -> None:
    """A skill's manifest, inputs, outputs, steps, sub-skills, test cases and aggregates."""
    from orchestrator.cli.notes_cmds import mark_open_notes
    from orchestrator.library.reach import library_view

    loaded = vault(vault_opt)
    skill = loaded.get(name)
    m = skill.manifest
    library = library_view(loaded.root)
    out.print(f"[bold]{escape(library.label(skill.name, m.label))}[/] ({skill.name}) "
              f"v{m.version} · {m.kind}"
              + ("" if m.is_orchestrator else f" · approach {m.effective_approach}")
              + f" · {skill.form} form" + escape(library.markers(skill.name)))
    _library_note(library)
    out.print(one_line(m.description), markup=False)
    out.print(f"folder: {display_path(skill.folder)}", markup=False)
    mark_open_notes(skill.name)
    facts = {"run": m.run.command if m.run else None,
             "timeout/retries": f"{m.run.timeout:g}s / {m.run.retries}" if m.run else None,
             "auth": ", ".join(m.auth) or None,
             "requires": ", ".join([*m.requires.capabilities, *m.requires.software,
                                    *([f"daemon {m.requires.daemon}"] if m.requires.daemon
                                      else [])]) or None,
             "cache": f"ttl {m.cache.ttl}s" if m.cache.enabled else None,
             "model": m.model, "estimated": " · ".join(
                 x for x in (m.estimated_cost, m.estimated_duration) if x) or None}
    for key, value in facts.items():
        if value:
            out.print(f"{key}: {value}", markup=False)
    _table("inputs", ("name", "type", "required", "default", "description"),
           [(i.name, i.type, "yes" if i.required else "", repr(i.default) if i.has_default
             else "", one_line(i.description)) for i in m.inputs])
    _table("outputs", ("name", "type", "from", "description"),
           [(o.name, o.type, o.from_ or "", one_line(o.description))
            for o in m.result_outputs])
    if m.steps:
        deps = step_dependencies(m)
        _table("steps", ("id", "skill", "after", "for_each", "on_failure"),
               [(s.id, s.skill, ", ".join(deps[s.id]), "" if s.for_each is None
                 else str(s.for_each), str(s.on_failure)) for s in m.steps])
    if skill.sub_skills and skill.sub_skills.sub_skills:
        _table("sub-skills", ("skill", "role"),
               [(s.skill_id, s.role) for s in skill.sub_skills.sub_skills])
    _show_benchmarks(skill)
    problems = loaded.problems_in(skill.folder)
    for problem in problems:
        out.print(f"problem: {problem}", style="red", markup=False)
    for warning in loaded.warnings_in(skill.folder):
        out.print(f"warning: {warning}", style="yellow", markup=False)


def _show_benchmarks(skill: Skill) -> None:
    bench = skill.benchmarks
    if bench is None:
        out.print("benchmarks: none (add test cases to benchmarks.json)")
        return
    _table("test cases", ("id", "name", "inputs", "expects"),
           [(t.id, t.name, one_line(str(dict(t.inputs))),
             "success" if t.expected.success else f"failure: {t.expected.error_contains or ''}")
            for t in bench.tests])
    agg = bench.aggregates
    rate = "-" if agg.success_rate is None else f"{agg.success_rate:.0%}"
    avg = "-" if agg.avg_duration_ms is None else f"{agg.avg_duration_ms:.0f} ms"
    cost = "-" if agg.avg_cost_usd is None else f"${agg.avg_cost_usd:.4f}"
    out.print(f"runs: {agg.total_runs} · success {rate} · avg {avg} · avg cost {cost} · "
              f"last {agg.last_run or '-'}", markup=False)


def _table(title: str, columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    if not rows:
        return
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    out.print(table)


def catalog(
    fmt: Annotated[CatalogFormat, typer.Option("--format", help="text: one `name: description` "
                   "line per skill; xml: the <available_skills> block `agentskills to-prompt` "
                   "prints, for a prompt.")] = CatalogFormat.text,
    vault_opt: VaultOption = None,
) -> None:
    """The progressive-disclosure listing: what a model sees before loading a skill.

    Pinned skills come first; disabled skills are left out (they cannot run), and so are
    skills that do not validate, each named in one warning line on stderr, and skills
    that set `disable-model-invocation: true` (a model is never offered them).
    """
    from orchestrator.library.reach import library_view

    loaded = vault(vault_opt)
    library = library_view(loaded.root)
    _library_note(library)
    for line in _invalid_skill_warnings(loaded):
        err.print(line, style="yellow", markup=False)
    valid = {n: s for n, s in loaded.skills.items() if not loaded.problems_in(s.folder)}
    skills = [valid[n] for n in library.pinned_first(sorted(valid)) if library.state(n).enabled]
    for skill in [s for s in skills if s.manifest.disable_model_invocation]:
        err.print(f"note: left out {skill.name}: it sets disable-model-invocation: true, so "
                  "no model is offered it (`skillq run` still runs it)", style="dim",
                  markup=False)
    skills = [s for s in skills if not s.manifest.disable_model_invocation]
    # The folder resolved and SKILL.md named as found, as the reference builds the path:
    # resolving the file itself would follow a symlinked SKILL.md elsewhere.
    entries = [CatalogEntry(s.name, s.manifest.description,
                            str(s.folder.resolve() / s.skill_md.name)) for s in skills]
    # Written as is, not through rich: a description holding ':smile:' or '[b]' must reach
    # the prompt unchanged, and a pipe must get the same bytes as `agentskills to-prompt`.
    if fmt is CatalogFormat.text:
        sys.stdout.write("".join(catalog_line(e) + "\n" for e in entries))
    else:
        sys.stdout.write(to_prompt(entries) + "\n")
    sys.stdout.flush()


def _invalid_skill_warnings(loaded: Vault) -> list[str]:
    """One line per skill folder left out because it does not validate."""
    lines = []
    for folder in loaded.folders:
        problems = loaded.problems_in(folder)
        if problems:
            first = problems[0]
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            lines.append(f"warning: left out {display_path(folder)}, which does not validate: "
                         f"{first.field}: {first.message}{more}; run `skillq validate "
                         f"{display_path(folder)}`")
    return lines
