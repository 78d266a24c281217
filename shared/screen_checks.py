"""Checks on a skill's ``browser:`` and ``desktop:`` fields (shared/screen_spec.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from shared.manifest import Approach, Manifest
from shared.problems import Problem
from shared.refs import RefSyntaxError, parse_template, walk_strings
from shared.screen_secrets import (
    SECRET_FIELDS,
    WHERE,
    Part,
    SecretRef,
    SecretRefError,
    split_secrets,
)
from shared.screen_spec import DesktopAction, ScreenAction, produced_outputs
from shared.skill import Skill
from shared.valuetypes import parse_type

Loc = tuple[str | int, ...]
_FIELD_QUEUE = {"browser": Approach.DOM0, "desktop": Approach.CMD0}


def check_screen(skill: Skill) -> Iterator[Problem]:
    m = skill.manifest
    declared = [f for f in ("browser", "desktop") if getattr(m, f) is not None]
    if len(declared) > 1:
        yield skill.problem(("desktop",), "a skill drives either a browser or a desktop, not "
                            "both; split it into two skills")
    for field in declared:
        want = _FIELD_QUEUE[field]
        if m.approach is not want:
            yield skill.problem(("approach",), f"{field} actions run on the {want} queue; set "
                                f"approach: {want}")
        other = [f for f in ("run", "steps") if getattr(m, f) is not None]
        if other:
            yield skill.problem((field,), f"a skill has {field} or {other[0]}, not both; keep "
                                "one (a script can drive the screen itself under run)")
    if m.browser is not None:
        yield from _check_browser(skill, m)
    if m.desktop is not None:
        yield from _check_actions(skill, ("desktop",), m.desktop.actions)


def _check_browser(skill: Skill, m: Manifest) -> Iterator[Problem]:
    assert m.browser is not None
    spec = m.browser
    if (spec.actions is None) == (spec.script is None):
        yield skill.problem(("browser",), "give either actions (a list of browser actions) "
                            "or script (a .py file with run(page, inputs) -> dict), one of them")
    if spec.actions is not None:
        if not spec.actions:
            yield skill.problem(("browser", "actions"), "is empty; list at least one action")
        yield from _check_actions(skill, ("browser",), spec.actions)
    if spec.script is not None:
        problem = _file_problem(skill.folder, spec.script, suffixes=(".py",))
        if problem:
            yield skill.problem(("browser", "script"), problem)


def _check_actions(skill: Skill, field: Loc, actions: tuple[ScreenAction, ...]
                   ) -> Iterator[Problem]:
    inputs = {i.name for i in skill.manifest.inputs}
    for i, action in enumerate(actions):
        where: Loc = (*field, "actions", i, action.kind)
        body = action.body.model_dump(exclude={"output"}, exclude_none=True)
        for sub, text in walk_strings(body):
            if "${" not in text:
                continue
            try:
                parts = split_secrets(text)
                refs = [r for p in parts if isinstance(p, str) for r in parse_template(p).refs]
            except (RefSyntaxError, SecretRefError) as exc:
                yield skill.problem((*where, *sub), str(exc))
                continue
            yield from _check_secrets(skill, (*where, *sub), action.kind, parts)
            for ref in refs:
                if ref.kind != "input":
                    yield skill.problem((*where, *sub), f"{ref}: actions see only this "
                                        "skill's inputs and declared secrets; write "
                                        "${inputs.NAME} or ${secrets.NAME}")
                elif ref.name not in inputs:
                    yield skill.problem((*where, *sub), f"{ref}: this skill has no input "
                                        f"'{ref.name}'; declare it under inputs")
        image = getattr(action.body, "image", None)
        if isinstance(action, DesktopAction) and image is not None:
            problem = _file_problem(skill.folder, image, suffixes=(".png",))
            if problem:
                yield skill.problem((*where, "image"), problem)
    yield from _check_outputs(skill, field, actions)


def _check_secrets(skill: Skill, where: Loc, kind: str, parts: list[Part]
                   ) -> Iterator[Problem]:
    """A secret only where its value is typed or visited, and only one the skill
    declares (the worker hands a step its declared secrets, no others)."""
    declared = set(skill.manifest.auth)
    for ref in (p for p in parts if isinstance(p, SecretRef)):
        if (kind, where[-1]) not in SECRET_FIELDS:
            yield skill.problem(where, f"{ref}: a secret may stand only in {WHERE} "
                                "(this field is shown in errors and logs); move it there")
        elif ref.name not in declared:
            yield skill.problem(where, f"{ref}: this skill does not declare the secret "
                                f"'{ref.name}'; add it under auth (auth: [{ref.name}]) "
                                f"and set it with `skillq secrets set {ref.name}`")


def _check_outputs(skill: Skill, field: Loc, actions: tuple[ScreenAction, ...]
                   ) -> Iterator[Problem]:
    declared = {o.name: o for o in skill.manifest.outputs}
    made: set[str] = set()
    for i, name, kind in produced_outputs(actions):
        where: Loc = (*field, "actions", i, actions[i].kind, "output")
        spec = declared.get(name)
        if name in made:
            yield skill.problem(where, f"output '{name}' is already set by an earlier action; "
                                "give each action its own output")
        elif spec is None:
            yield skill.problem(where, f"'{name}' is not an output of this skill; declare it "
                                f"under outputs (type: {kind})")
        elif parse_type(spec.type) != parse_type(kind):
            yield skill.problem(where, f"{actions[i].kind} produces {kind}, but output "
                                f"'{name}' is declared {spec.type}; declare it {kind}")
        made.add(name)
    for j, out in enumerate(skill.manifest.outputs):
        if out.name not in made and out.from_ is None:
            yield skill.problem(("outputs", j), f"no action sets output '{out.name}'; add an "
                                f"extract, screenshot or locate with output: {out.name}, or "
                                "remove it")


def _file_problem(folder: Path, name: str, *, suffixes: tuple[str, ...]) -> str | None:
    """Why ``name`` is not a usable file of the skill folder, or None."""
    path = PurePosixPath(name)
    if path.is_absolute() or not (folder / name).resolve().is_relative_to(folder.resolve()):
        return f"'{name}' is outside the skill folder; use a file inside it"
    if path.suffix.lower() not in suffixes:
        return f"'{name}' must be a {' or '.join(suffixes)} file"
    if not (folder / name).is_file():
        return f"'{name}' does not exist in {folder.name}/; add the file or fix the name"
    return None
