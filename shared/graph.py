"""Directed graphs of steps and of sub-skills: cycles, named by their path."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def find_cycle(edges: Mapping[str, Iterable[str]]) -> list[str] | None:
    """A cycle as its path, first node repeated at the end (``[a, b, a]``), or None.

    Iterative depth-first search so a 2,000-skill vault cannot hit the recursion limit.
    Edges to nodes not in ``edges`` are ignored (they are reported elsewhere as unknown).
    """
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for root in sorted(edges):
        if root in state:
            continue
        path: list[str] = [root]
        stack = [iter(sorted(edges[root]))]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
                continue
            if nxt not in edges:
                continue
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(edges[nxt])))
    return None


def cycle_text(cycle: list[str]) -> str:
    return " -> ".join(cycle)
