"""Checks across skills: what each orchestrator step calls, passes and reads back."""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from typing import Any

from shared.graph import cycle_text, find_cycle
from shared.manifest import InputSpec, Step
from shared.problems import Problem
from shared.refs import Ref, RefSyntaxError, parse_template, walk_strings
from shared.skill import SUB_SKILLS, Skill
from shared.valuetypes import ValueType, compatible

Skills = Mapping[str, Skill]


def literal_type(value: Any) -> ValueType | None:
    """The declared-type equivalent of a YAML literal (None when it cannot be told)."""
    if isinstance(value, bool):
        return ValueType("boolean")
    if isinstance(value, int):
        return ValueType("integer")
    if isinstance(value, float):
        return ValueType("number")
    if isinstance(value, str):
        return ValueType("string")
    if isinstance(value, dict):
        return ValueType("object")
    if isinstance(value, list) and value:
        kinds = {literal_type(v) for v in value}
        only = next(iter(kinds))
        return only.array() if len(kinds) == 1 and only is not None else None
    return None


def ref_type(ref: Ref, owner: Skill, step: Step | None, skills: Skills) -> ValueType | None:
    """The type a reference evaluates to inside ``owner``, when the manifests tell it."""
    if ref.kind == "input":
        spec = owner.manifest.input(ref.name)
        return spec.value_type if spec and not ref.path else None
    if ref.kind == "item":
        if step is None or step.for_each is None or ref.path:
            return None
        outer = value_type(step.for_each, owner, None, skills)
        return outer.element() if outer and outer.is_array else None
    producer = next((s for s in owner.manifest.steps or () if s.id == ref.name), None)
    if producer is not None and producer.approval is not None:  # the approver's inputs
        given = next((i for i in producer.approval.inputs if ref.path and
                      i.name == ref.path[0]), None)
        return given.value_type if given is not None and len(ref.path) == 1 else None
    callee = skills.get(producer.skill_name) if producer else None
    if producer is None or callee is None:
        return None
    fan_out = producer.for_each is not None
    if not ref.path:
        return ValueType("object", 1 if fan_out else 0)
    out = callee.manifest.output(ref.path[0])
    if out is None or len(ref.path) > 1:
        return None
    vtype = out.value_type
    # A fan-out step's output is one value per item; arrays are concatenated (flattened).
    return (vtype if vtype.is_array else vtype.array()) if fan_out else vtype


def value_type(value: Any, owner: Skill, step: Step | None, skills: Skills) -> ValueType | None:
    if isinstance(value, str) and "${" in value:
        try:
            template = parse_template(value)
        except RefSyntaxError:
            return None
        single = template.single
        return ref_type(single, owner, step, skills) if single else ValueType("string")
    return literal_type(value)


def check_pipeline(owner: Skill, skills: Skills, broken: set[str]) -> Iterator[Problem]:
    steps = owner.manifest.steps or ()
    for i, step in enumerate(steps):
        if step.approval is not None:
            yield from _check_approval(owner, i, step, skills)
            continue
        callee = skills.get(step.skill_name)
        if callee is None:
            if step.skill_name not in broken:
                close = difflib.get_close_matches(step.skill_name, list(skills), n=1)
                hint = f"did you mean '{close[0]}'?" if close else "add it to the vault"
                yield owner.problem(("steps", i, "skill"), f"no skill '{step.skill_name}' in "
                                    f"this vault; {hint}")
            continue
        yield from _check_call(owner, i, step, callee, skills)
    for i, out in enumerate(owner.manifest.outputs):
        if out.from_ is None:
            continue
        got = value_type(out.from_, owner, None, skills)
        if got is not None and not compatible(got, out.value_type):
            yield owner.problem(("outputs", i, "from"), f"gives {got} but output '{out.name}' "
                                f"is declared {out.type}")
        yield from _check_output_refs(owner, ("outputs", i, "from"), out.from_, skills)


def _check_call(owner: Skill, i: int, step: Step, callee: Skill, skills: Skills
                ) -> Iterator[Problem]:
    declared: dict[str, InputSpec] = {}
    for declared_input in callee.manifest.inputs:
        # the first of duplicates, as Manifest.input does
        declared.setdefault(declared_input.name, declared_input)
    for key, value in step.with_.items():
        loc = ("steps", i, "with", key)
        spec = declared.get(key)
        if spec is None:
            close = difflib.get_close_matches(key, list(declared), n=1)
            hint = f"did you mean '{close[0]}'?" if close else \
                f"it takes: {', '.join(declared) or 'no inputs'}"
            yield owner.problem(loc, f"'{callee.name}' has no input '{key}'; {hint}")
            continue
        got = value_type(value, owner, step, skills)
        if got is not None and "inputs" not in callee.repaired and \
                not compatible(got, spec.value_type):
            yield owner.problem(loc, f"passes {got} but '{callee.name}' declares input "
                                f"'{key}' as {spec.type}")
        yield from _check_output_refs(owner, loc, value, skills)
    for spec in callee.manifest.inputs:
        if spec.required and spec.name not in step.with_:
            yield owner.problem(("steps", i, "with"), f"step '{step.id}' does not give "
                                f"'{callee.name}' its required input '{spec.name}' "
                                f"({spec.type}); add `{spec.name}: ...` under with")
    fan = step.for_each
    if fan is not None:
        got = value_type(fan, owner, None, skills) if isinstance(fan, str) else None
        if not isinstance(fan, list | str):
            yield owner.problem(("steps", i, "for_each"), "for_each needs a list: a YAML list "
                                "or a reference to one such as ${inputs.urls}")
        elif isinstance(fan, str) and "${" in fan and got is not None and not got.is_array:
            yield owner.problem(("steps", i, "for_each"), f"for_each needs a list, but {fan} "
                                f"is {got}")
        yield from _check_output_refs(owner, ("steps", i, "for_each"), step.for_each, skills)


def _check_approval(owner: Skill, i: int, step: Step, skills: Skills) -> Iterator[Problem]:
    """What an approval step shows and its inputs' defaults: references that exist, and
    defaults of the inputs' declared types."""
    assert step.approval is not None
    for name, value in step.approval.show.items():
        yield from _check_output_refs(owner, ("steps", i, "approval", "show", name), value,
                                      skills)
    for j, spec in enumerate(step.approval.inputs):
        if not spec.has_default:
            continue
        loc = ("steps", i, "approval", "inputs", j, "default")
        got = value_type(spec.default, owner, step, skills)
        if got is not None and not compatible(got, spec.value_type):
            yield owner.problem(loc, f"gives {got} but the approver's input '{spec.name}' is "
                                f"declared {spec.type}")
        yield from _check_output_refs(owner, loc, spec.default, skills)


def _check_output_refs(owner: Skill, loc: tuple[str | int, ...], value: Any, skills: Skills
                       ) -> Iterator[Problem]:
    steps = {s.id: s for s in owner.manifest.steps or ()}
    for sub, text in walk_strings(value):
        if "${" not in text:
            continue
        try:
            refs = parse_template(text).refs
        except RefSyntaxError:
            continue  # reported by the skill's own checks
        for ref in refs:
            if ref.kind != "step" or not ref.path or ref.name not in steps:
                continue
            producer = steps[ref.name]
            if producer.approval is not None:
                names = [i.name for i in producer.approval.inputs]
                if ref.path[0] not in names:
                    yield owner.problem((*loc, *sub), f"{ref}: approval step '{ref.name}' "
                                        f"takes no input '{ref.path[0]}'; it takes: "
                                        f"{', '.join(names) or 'none'}")
                continue
            callee = skills.get(producer.skill_name)
            if callee is not None and callee.manifest.output(ref.path[0]) is None:
                names = [o.name for o in callee.manifest.result_outputs]
                close = difflib.get_close_matches(ref.path[0], names, n=1)
                hint = f"did you mean '{close[0]}'?" if close else \
                    f"it outputs: {', '.join(names) or 'nothing'}"
                yield owner.problem((*loc, *sub), f"{ref}: '{callee.name}' has no output "
                                    f"'{ref.path[0]}'; {hint}")


def check_sub_skills_file(skill: Skill, skills: Skills, broken: set[str]) -> Iterator[Problem]:
    listed = skill.sub_skills.names if skill.sub_skills else ()
    for j, name in enumerate(listed):
        if name not in skills and name not in broken:
            yield skill.file_problem(SUB_SKILLS, f"sub_skills[{j}].skill_id",
                                     f"no skill '{name}' in this vault")
    if skill.manifest.steps is None or skill.sub_skills is None:
        return
    called = list(dict.fromkeys(s.skill_name for s in skill.manifest.calling_steps))
    fix = f"run `skillq sync {skill.name}` to regenerate it from steps"
    for name in called:
        if name not in listed:
            yield skill.file_problem(SUB_SKILLS, "sub_skills", f"misses '{name}', which a step "
                                     f"calls; {fix}")
    for j, name in enumerate(listed):
        if name in listed[:j]:
            yield skill.file_problem(SUB_SKILLS, f"sub_skills[{j}]", f"lists '{name}' twice; "
                                     "keep one entry")
        if name not in called:
            yield skill.file_problem(SUB_SKILLS, f"sub_skills[{j}]", f"lists '{name}', which "
                                     f"no step calls; {fix}")


def sub_skill_edges(skills: Skills) -> dict[str, set[str]]:
    """Skill -> the skills it uses, through its steps or its sub-skills.json."""
    edges: dict[str, set[str]] = {}
    for name, skill in skills.items():
        used = {s.skill_name for s in skill.manifest.calling_steps}
        used |= set(skill.sub_skills.names if skill.sub_skills else ())
        edges[name] = used
    return edges


def check_sub_skill_cycles(skills: Skills) -> Iterator[tuple[Problem, frozenset[str]]]:
    """Each cycle of skills using each other: the problem and the skills on it."""
    edges = {k: set(v) for k, v in sub_skill_edges(skills).items()}
    for _ in range(len(edges)):
        cycle = find_cycle(edges)
        if cycle is None:
            return
        owner = skills[cycle[0]]
        members = frozenset(cycle)
        if owner.manifest.steps:
            yield owner.problem(("steps",), f"sub-skills call each other in a cycle: "
                                f"{cycle_text(cycle)}; a skill cannot (indirectly) call "
                                "itself"), members
        else:
            yield owner.file_problem(SUB_SKILLS, "sub_skills", f"sub-skills form a cycle: "
                                     f"{cycle_text(cycle)}"), members
        edges[cycle[-2]].discard(cycle[-1])  # break it and look for the next one
