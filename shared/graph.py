"""Directed graphs of steps and of sub-skills: cycles (named by their path) and order."""

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


def topological_order(edges: Mapping[str, Iterable[str]]) -> list[str]:
    """Nodes with every node after the nodes it points to (dependencies first).

    ``edges[a]`` lists what ``a`` depends on. Ties keep the mapping's order, so steps
    run in the order the author wrote them when nothing else decides. A cycle (which
    validation reports) is cut at its back edge. Iterative, for graphs of any depth.
    """
    deps = {node: [d for d in dict.fromkeys(targets) if d in edges]
            for node, targets in edges.items()}
    order: list[str] = []
    done: set[str] = set()
    for root in deps:
        stack: list[tuple[str, int]] = [(root, 0)]
        on_path = {root}
        while stack:
            node, i = stack[-1]
            if node in done:
                stack.pop()
                on_path.discard(node)
                continue
            if i < len(deps[node]):
                stack[-1] = (node, i + 1)
                nxt = deps[node][i]
                if nxt not in done and nxt not in on_path:
                    stack.append((nxt, 0))
                    on_path.add(nxt)
                continue
            stack.pop()
            on_path.discard(node)
            done.add(node)
            order.append(node)
    return order
