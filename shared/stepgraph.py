"""The step graph of an orchestrator: which steps each step waits for."""

from __future__ import annotations

from shared.manifest import Manifest
from shared.refs import RefSyntaxError, parse_template, walk_strings


def step_dependencies(manifest: Manifest) -> dict[str, list[str]]:
    """Step id -> the ids it waits for: its `needs` plus every step its values reference.

    Unknown ids and malformed references are left out (validation reports them).
    """
    steps = manifest.steps or ()
    known = {s.id for s in steps}
    deps: dict[str, list[str]] = {}
    for step in steps:
        found = list(step.needs)
        for _, text in walk_strings([step.for_each, dict(step.with_),
                                       step.approval_values]):
            if "${" not in text:
                continue
            try:
                refs = parse_template(text).refs
            except RefSyntaxError:
                continue
            found.extend(r.name for r in refs if r.kind == "step")
        deps[step.id] = [d for d in dict.fromkeys(found) if d in known]
    return deps
