"""Checks on one skill that need nothing but the skill itself."""

from __future__ import annotations

import re
import shlex
from collections import Counter
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from shared.errors import AgentError
from shared.graph import cycle_text, find_cycle
from shared.inputs import input_problems
from shared.manifest import Approach
from shared.model_spec import is_claude_code_alias, resolve
from shared.output_schema import schema_problem
from shared.problems import Problem
from shared.refs import RefSyntaxError, Template, parse_template, walk_strings
from shared.screen_checks import check_screen
from shared.skill import BENCHMARKS, Skill
from shared.skillfiles import SchemaAssertion, ScriptAssertion, TestCase
from shared.stepgraph import step_dependencies
from shared.valuetypes import type_error

_ENV_VAR = re.compile(r"\$(\{|[A-Za-z_])")
_SCRIPT_SUFFIXES = {".py", ".sh", ".bash", ".js", ".mjs", ".cjs", ".ts", ".rb", ".pl", ".php",
                    ".R", ".jl", ".lua"}
_NEEDS_RUN = {Approach.API, Approach.CODE, Approach.WEB, Approach.DOM0, Approach.CMD0}
_AGENT_ONLY = frozenset({"catalog", "max_turns", "budget_usd", "timeout", "interactive",
                         "question_timeout"})


def check_skill(skill: Skill) -> list[Problem]:
    problems: list[Problem] = []
    problems.extend(_check_shape(skill))
    problems.extend(_check_fields(skill))
    problems.extend(_check_model(skill))
    if skill.manifest.run is not None:
        problems.extend(check_command(skill))
    if skill.manifest.steps is not None:
        problems.extend(_check_steps(skill, problems))
    problems.extend(check_screen(skill))
    problems.extend(_check_benchmarks(skill))
    return problems


def _dupes(names: list[str]) -> list[str]:
    return [n for n, c in Counter(names).items() if c > 1]


def _check_shape(skill: Skill) -> Iterator[Problem]:
    m = skill.manifest
    if m.run is not None and m.steps is not None:
        yield skill.problem(("steps",), "a skill has either run (a script leaf) or steps (an "
                            "orchestrator), not both; split it into two skills")
    if m.steps is not None and not m.steps:
        yield skill.problem(("steps",), "an orchestrator needs at least one step")
    if m.run is None and m.steps is None and m.approach in _NEEDS_RUN and \
            m.browser is None and m.desktop is None and \
            not skill.repaired & {"run", "steps", "browser", "desktop"}:
        screen = {Approach.DOM0: ", browser actions", Approach.CMD0: ", desktop actions"}
        yield skill.problem(("approach",), f"approach {m.approach} needs run.command (the "
                            f"script to run){screen.get(m.approach, '')} or steps; without "
                            "them set approach: agent")
    if m.cache.enabled and m.effective_approach is Approach.AGENT and m.steps is None:
        yield skill.problem(("cache", "enabled"), "agent skills must not cache: their output "
                            "depends on LLM reasoning; remove cache or set enabled: false")
    agent_leaf = m.steps is None and m.kind == "instructions" and \
        m.effective_approach is Approach.AGENT
    if agent_leaf:  # a model answers in JSON: it has no file of its own to hand back
        for i, out in enumerate(m.outputs):
            if out.value_type.base == "file":
                yield skill.problem(("outputs", i, "type"), f"an agent step cannot return a "
                                    f"file ('{out.name}'); return its text as a string, or "
                                    "write the file from a script step")
    if m.cache.enabled and any(i.value_type.base == "directory" for i in m.inputs):
        yield skill.problem(("cache", "enabled"), "a skill given a folder must not cache: "
                            "its result depends on what the folder holds, which changes "
                            "under the same path; remove cache or set enabled: false")
    for i, out in enumerate(m.outputs):
        if out.value_type.base == "directory":
            yield skill.problem(("outputs", i, "type"), f"a skill cannot return a folder "
                                f"('{out.name}'): a step's own folders are gone when it ends; "
                                "return a file (type file), or the path as a string")
    for key in sorted(_AGENT_ONLY & m.model_fields_set):
        if not agent_leaf and not skill.repaired & {"approach", "run", "steps"}:
            yield skill.problem((key,), f"only an agent step (approach: agent, no run or "
                                f"steps) uses {key}; remove it")


def _check_fields(skill: Skill) -> Iterator[Problem]:
    m = skill.manifest
    for key, names in (("inputs", [i.name for i in m.inputs]),
                       ("outputs", [o.name for o in m.outputs]), ("auth", list(m.auth))):
        for dup in _dupes(names):
            idx = names.index(dup, names.index(dup) + 1)
            yield skill.problem((key, idx), f"'{dup}' is declared twice; names must be unique")
    for i, spec in enumerate(m.inputs):
        if spec.has_default and spec.default is not None:
            err = type_error(spec.default, spec.value_type)
            if err:
                yield skill.problem(("inputs", i, "default"), f"default does not fit type: {err}")
        if spec.required and spec.has_default:
            yield skill.problem(("inputs", i, "required"), "a required input cannot have a "
                                "default; drop `required: true` or the default")
    for i, out in enumerate(m.outputs):
        if m.steps is None and out.from_ is not None and "steps" not in skill.repaired:
            yield skill.problem(("outputs", i, "from"), "only an orchestrator maps outputs from "
                                "steps; a leaf's script produces its outputs, remove `from`")
        if m.steps is not None and out.from_ is None:
            yield skill.problem(("outputs", i), "an orchestrator output needs `from:` naming "
                                "where it comes from, e.g. from: ${steps.ID.outputs.NAME}")


def _check_model(skill: Skill) -> Iterator[Problem]:
    # Here rather than at run time: a model no provider matches would otherwise be found
    # only by the worker, after the run was dispatched.
    # A Claude Code alias is kept, with a warning (shared/kept_fields.py).
    if skill.manifest.model is None or is_claude_code_alias(skill.manifest.model):
        return
    try:
        resolve(skill.manifest.model)
    except AgentError as exc:
        yield skill.problem(("model",), str(exc))


def check_command(skill: Skill) -> Iterator[Problem]:
    """run.command is argv (no shell) and must stay inside the skill folder."""
    assert skill.manifest.run is not None
    loc = ("run", "command")
    command = skill.manifest.run.command
    try:
        argv = shlex.split(command)
        # punctuation_chars splits `main.py|wc` into main.py, |, wc: operators glued to
        # words are still shell syntax.
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        operators = [t for t in lexer if t and set(t) <= set("|&;<>()")]
    except ValueError as exc:
        yield skill.problem(loc, f"cannot be split into arguments ({exc}); balance the quotes")
        return
    if not argv:
        yield skill.problem(loc, "is empty; name the program to run, e.g. python3 main.py")
        return
    if operators or "`" in command or "$(" in command:
        shown = operators[0] if operators else ("`" if "`" in command else "$(")
        yield skill.problem(loc, f"'{shown}' is shell syntax, but run.command is not run by a "
                            "shell; put the pipeline in a script and run that")
        return
    if _ENV_VAR.search(command):
        yield skill.problem(loc, "environment variables are not expanded (no shell runs the "
                            "command); read them inside the script")
        return
    root = skill.folder.resolve()
    for pos, token in enumerate(argv):
        value = token.split("=", 1)[1] if token.startswith("-") and "=" in token else token
        if "://" in value or value.startswith("-") or not value:
            continue
        path = PurePosixPath(value)
        is_path = "/" in value or path.suffix in _SCRIPT_SUFFIXES
        if not is_path:
            continue
        if path.is_absolute():
            what = "the program by name (found on PATH)" if pos == 0 else "a path in the folder"
            yield skill.problem(loc, f"'{value}' is an absolute path, outside the skill folder; "
                                f"use {what}")
            continue
        target = (root / value).resolve()
        if not target.is_relative_to(root):
            yield skill.problem(loc, f"'{value}' reaches outside the skill folder; a skill may "
                                "only run files it contains (copy the file in)")
        elif not target.exists():
            yield skill.problem(loc, f"'{value}' does not exist in {Path(skill.folder.name)}/; "
                                "add the file or fix the name")


def _check_steps(skill: Skill, problems: list[Problem]) -> Iterator[Problem]:
    steps = skill.manifest.steps or ()
    ids = [s.id for s in steps]
    for dup in _dupes(ids):
        yield skill.problem(("steps", ids.index(dup, ids.index(dup) + 1), "id"),
                            f"step id '{dup}' is used twice; step ids must be unique")
    known = set(ids)
    inputs = {i.name for i in skill.manifest.inputs}
    for i, step in enumerate(steps):
        for j, need in enumerate(step.needs):
            if need not in known:
                yield skill.problem(("steps", i, "needs", j), f"no step '{need}' in this skill")
        fields = ((("for_each",), step.for_each), (("with",), dict(step.with_)),
                  (("approval",), step.approval_values))
        for prefix, value in fields:
            for loc, template in _templates(problems, skill, ("steps", i, *prefix), value):
                for ref in template.refs:
                    where = ("steps", i, *prefix, *loc)
                    if ref.kind == "item" and (step.for_each is None or prefix == ("for_each",)):
                        yield skill.problem(where, f"{ref} is only defined inside a step with "
                                            "for_each (it is the current element)")
                    elif ref.kind == "input" and ref.name not in inputs:
                        yield skill.problem(where, f"{ref}: this skill has no input "
                                            f"'{ref.name}'; declare it under inputs")
                    elif ref.kind == "step" and ref.name not in known:
                        yield skill.problem(where, f"{ref}: no step '{ref.name}' in this skill")
            if isinstance(value, str) and "${" not in value and prefix == ("for_each",):
                yield skill.problem(("steps", i, "for_each"), "for_each needs a list: a YAML "
                                    "list or a reference to one such as ${inputs.urls}")
    for i, out in enumerate(skill.manifest.outputs):
        if out.from_ is None:
            continue
        for _, template in _templates(problems, skill, ("outputs", i, "from"), out.from_):
            for ref in template.refs:
                if ref.kind == "item":
                    yield skill.problem(("outputs", i, "from"), f"{ref} is not defined here")
                elif ref.kind == "input" and ref.name not in inputs:
                    yield skill.problem(("outputs", i, "from"), f"{ref}: no input '{ref.name}'")
                elif ref.kind == "step" and ref.name not in known:
                    yield skill.problem(("outputs", i, "from"), f"{ref}: no step '{ref.name}'")
    cycle = None if _dupes(ids) else find_cycle(step_dependencies(skill.manifest))
    if cycle:
        first = ids.index(cycle[0])
        yield skill.problem(("steps", first), f"steps depend on each other in a cycle: "
                            f"{cycle_text(cycle)}; break it")


def _templates(problems: list[Problem], skill: Skill, loc: tuple[str | int, ...],
               value: object) -> Iterator[tuple[tuple[str | int, ...], Template]]:
    """Each string of ``value`` holding references, parsed; a malformed one becomes a problem."""
    for sub, text in walk_strings(value):
        if "${" not in text:
            continue
        try:
            yield sub, parse_template(text)
        except RefSyntaxError as exc:
            problems.append(skill.problem((*loc, *sub), str(exc)))


def _check_benchmarks(skill: Skill) -> Iterator[Problem]:
    bench = skill.benchmarks
    if bench is None:
        return
    if bench.skill != skill.name:
        yield skill.file_problem(BENCHMARKS, "skill", f"is '{bench.skill}' but the skill is "
                                 f"named '{skill.name}'; make them equal")
    ids = [t.id for t in bench.tests]
    for dup in _dupes(ids):
        yield skill.file_problem(BENCHMARKS, f"tests[{ids.index(dup, ids.index(dup) + 1)}].id",
                                 f"test id '{dup}' is used twice")
    outputs = {o.name for o in skill.manifest.result_outputs}
    for i, test in enumerate(bench.tests):
        for field, msg in input_problems(skill.manifest, dict(test.inputs)):
            # A case expecting failure may test bad inputs on purpose; a name the skill
            # does not declare is still a typo.
            if test.expected.success or msg.startswith("unknown input"):
                yield skill.file_problem(BENCHMARKS, f"tests[{i}].inputs{field}", msg)
        yield from _assertion_problems(skill, i, test)
        for key in test.expected.output_values:
            if key not in outputs:
                yield skill.file_problem(BENCHMARKS, f"tests[{i}].expected.{key}",
                                         f"'{key}' is not an output of {skill.name}; expected "
                                         "takes success, output_contains, error_contains, "
                                         "max_duration_ms or an output name")


def _assertion_problems(skill: Skill, i: int, test: TestCase) -> Iterator[Problem]:
    """A schema that is one, a checker script that is in the folder (issue 45's
    assertions; a judge's statement is the model's to read)."""
    for j, found in enumerate(test.assertions):
        at = f"tests[{i}].assertions[{j}]"
        if isinstance(found, SchemaAssertion):
            why = schema_problem(found.json_schema)
            if why is not None:
                yield skill.file_problem(BENCHMARKS, f"{at}.schema", why)
        elif isinstance(found, ScriptAssertion):
            path = (skill.folder / found.script).resolve()
            if not path.is_relative_to(skill.folder.resolve()):
                yield skill.file_problem(BENCHMARKS, f"{at}.script", f"'{found.script}' is "
                                         "outside the skill's folder; give a path inside it")
            elif not path.is_file():
                yield skill.file_problem(BENCHMARKS, f"{at}.script", f"no file '{found.script}'"
                                         f" in {skill.folder.name}/; add the checker script, "
                                         "or fix the path")
