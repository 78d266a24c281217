"""Drawing the sub-skill DAG and the step graph: as a tree, Mermaid or Graphviz dot."""

from __future__ import annotations

import json
import re

from rich.tree import Tree

from shared.builtin import APPROVAL
from shared.skill import Skill
from shared.stepgraph import step_dependencies
from shared.vault import Vault


def _calls(skill: Skill) -> list[tuple[str, str]]:
    """(label, callee) for each use of another skill: its steps, else its sub-skills.json."""
    if skill.manifest.steps:
        return [(f"{s.id}{' (for each)' if s.for_each is not None else ''}", s.skill_name)
                for s in skill.manifest.steps]
    return [("uses", name) for name in (skill.sub_skills.names if skill.sub_skills else ())]


def edges(vault: Vault, root: str) -> list[tuple[str, str, str]]:
    """(caller, label, callee) for every edge reachable from ``root``, each once."""
    seen: set[str] = set()
    found: list[tuple[str, str, str]] = []
    todo = [root]
    while todo:
        name = todo.pop(0)
        if name in seen or name not in vault.skills:
            continue
        seen.add(name)
        for label, callee in _calls(vault.skills[name]):
            found.append((name, label, callee))
            todo.append(callee)
    return found


def tree(vault: Vault, root: str) -> Tree:
    top = Tree(_node(vault, root))
    _grow(vault, root, top, {root})
    return top


def _node(vault: Vault, name: str) -> str:
    skill = vault.skills.get(name)
    if name == APPROVAL:  # skillq's own step: a person's decision
        return f"[bold]{name}[/] [dim](a person approves)[/]"
    if skill is None:
        return f"{name} [red](missing)[/]"
    m = skill.manifest
    kind = "orchestrator" if m.is_orchestrator else str(m.effective_approach)
    return f"[bold]{name}[/] [dim]({kind})[/]"


def _grow(vault: Vault, name: str, branch: Tree, path: set[str]) -> None:
    skill = vault.skills.get(name)
    if skill is None:
        return
    for label, callee in _calls(skill):
        prefix = f"[cyan]{label}[/] → " if label != "uses" else "uses → "
        if callee in path:
            branch.add(f"{prefix}{callee} [red](cycle)[/]")
            continue
        child = branch.add(prefix + _node(vault, callee))
        _grow(vault, callee, child, path | {callee})


def _mermaid_id(name: str) -> str:
    return "n_" + re.sub(r"[^A-Za-z0-9_]", "_", name)


def mermaid(vault: Vault, root: str) -> str:
    lines = ["graph TD"]
    names = dict.fromkeys([root] + [n for e in edges(vault, root) for n in (e[0], e[2])])
    lines += [f'  {_mermaid_id(n)}["{n}"]' for n in names]
    lines += [f'  {_mermaid_id(a)} -->|"{label}"| {_mermaid_id(b)}'
              for a, label, b in edges(vault, root)]
    return "\n".join(lines)


def dot(vault: Vault, root: str) -> str:
    lines = [f"digraph {json.dumps(root)} {{", "  rankdir=LR;", "  node [shape=box];"]
    lines += [f"  {json.dumps(a)} -> {json.dumps(b)} [label={json.dumps(label)}];"
              for a, label, b in edges(vault, root)]
    if len(lines) == 3:
        lines.append(f"  {json.dumps(root)};")
    return "\n".join([*lines, "}"])


def step_edges(skill: Skill) -> list[tuple[str, str]]:
    """(step, the step it waits for) for an orchestrator's steps."""
    return [(sid, dep) for sid, deps in step_dependencies(skill.manifest).items() for dep in deps]


def steps_mermaid(skill: Skill) -> str:
    steps = skill.manifest.steps or ()
    lines = ["graph LR"]
    lines += [f'  {_mermaid_id(s.id)}["{s.id}: {s.skill}"]' for s in steps]
    lines += [f"  {_mermaid_id(dep)} --> {_mermaid_id(sid)}" for sid, dep in step_edges(skill)]
    return "\n".join(lines)


def steps_dot(skill: Skill) -> str:
    steps = skill.manifest.steps or ()
    lines = [f"digraph {json.dumps(skill.name + ' steps')} {{", "  rankdir=LR;"]
    lines += [f"  {json.dumps(s.id)} [label={json.dumps(s.id + ': ' + s.skill)}];"
              for s in steps]
    lines += [f"  {json.dumps(dep)} -> {json.dumps(sid)};" for sid, dep in step_edges(skill)]
    return "\n".join([*lines, "}"])


def steps_tree(skill: Skill) -> Tree:
    top = Tree(f"[bold]{skill.name}[/] steps")
    deps = step_dependencies(skill.manifest)
    for step in skill.manifest.steps or ():
        after = f" [dim](after {', '.join(deps[step.id])})[/]" if deps[step.id] else ""
        fan = " [dim]for each[/]" if step.for_each is not None else ""
        top.add(f"[cyan]{step.id}[/] → {step.skill}{fan}{after}")
    return top
