"""Directed graphs as inline SVG, laid out here (no Graphviz): a simple layered layout.

Each node's layer is its longest path from a root, so every edge points downward; nodes
in a layer are ordered by the mean place of their parents (one barycentre sweep), which
keeps the small graphs skills have readable. Used for a skill's sub-skill graph and a
run's steps coloured by state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from markupsafe import Markup

NODE_W, NODE_H = 170, 42
GAP_X, GAP_Y = 28, 46
PAD = 12


@dataclass(frozen=True)
class Node:
    key: str
    label: str
    detail: str = ""
    css: str = ""  # extra class: a step's state, a missing skill
    href: str | None = None


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    label: str = ""


def layers(nodes: Sequence[Node], edges: Sequence[Edge]) -> dict[str, int]:
    """Longest-path layer of every node; a cycle stops growing at len(nodes)."""
    keys = [n.key for n in nodes]
    layer = dict.fromkeys(keys, 0)
    for _ in range(len(keys)):  # Bellman-Ford style relaxation: bounded even with cycles
        changed = False
        for e in edges:
            if e.source in layer and e.target in layer and e.source != e.target \
                    and layer[e.target] < layer[e.source] + 1 < len(keys) + 1:
                layer[e.target] = layer[e.source] + 1
                changed = True
        if not changed:
            break
    return layer


def positions(nodes: Sequence[Node], edges: Sequence[Edge]) -> dict[str, tuple[float, float]]:
    layer = layers(nodes, edges)
    rows: dict[int, list[str]] = {}
    for n in nodes:
        rows.setdefault(layer[n.key], []).append(n.key)
    place: dict[str, float] = {}
    for depth in sorted(rows):
        keys = rows[depth]
        if depth:
            first = {key: float(i) for i, key in enumerate(keys)}
            means = {}
            for key in keys:
                ups = [place[e.source] for e in edges if e.target == key and e.source in place]
                means[key] = sum(ups) / len(ups) if ups else first[key]
            keys.sort(key=lambda key: (means[key], first[key]))
        for i, key in enumerate(keys):
            place[key] = float(i)
    widest = max(len(r) for r in rows.values())
    out: dict[str, tuple[float, float]] = {}
    for depth, keys in rows.items():
        shift = (widest - len(keys)) * (NODE_W + GAP_X) / 2
        for i, key in enumerate(keys):
            out[key] = (PAD + shift + i * (NODE_W + GAP_X),
                        float(PAD + depth * (NODE_H + GAP_Y)))
    return out


def _clip(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars - 1] + "…"


def graph_svg(nodes: Sequence[Node], edges: Sequence[Edge], title: str) -> Markup:
    if not nodes:
        return Markup('<p class="empty">nothing to draw</p>')
    at = positions(nodes, edges)
    width = max(x for x, _ in at.values()) + NODE_W + PAD
    height = max(y for _, y in at.values()) + NODE_H + PAD
    parts = [f'<svg class="graph" role="img" viewBox="0 0 {width:.0f} {height:.0f}" '
             f'width="{width:.0f}" height="{height:.0f}" xmlns="http://www.w3.org/2000/svg">',
             f"<title>{escape(title)}</title>",
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
             'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
             'fill="#64748b"/></marker></defs>']
    for e in edges:
        if e.source not in at or e.target not in at:
            continue
        (x1, y1), (x2, y2) = at[e.source], at[e.target]
        sx, sy = x1 + NODE_W / 2, y1 + NODE_H
        tx, ty = x2 + NODE_W / 2, y2
        if ty <= sy:  # same layer or upward (a cycle): go round the side
            ty = y2 + NODE_H / 2
            tx = x2 + (NODE_W if tx < sx else 0)
        mid = (sy + ty) / 2
        parts.append(f'<path class="edge" d="M{sx:.1f},{sy:.1f} C{sx:.1f},{mid:.1f} '
                     f'{tx:.1f},{mid:.1f} {tx:.1f},{ty:.1f}" marker-end="url(#arrow)"/>')
        if e.label:
            parts.append(f'<text class="edge-label" x="{(sx + tx) / 2 + 4:.1f}" '
                         f'y="{mid:.1f}">{escape(_clip(e.label, 28))}</text>')
    for n in nodes:
        x, y = at[n.key]
        box = (f'<g class="node {escape(n.css)}" data-key="{escape(n.key)}">'
               f'<rect x="{x:.1f}" y="{y:.1f}" width="{NODE_W}" height="{NODE_H}" rx="6"/>'
               f'<text class="node-label" x="{x + 8:.1f}" y="{y + 17:.1f}">'
               f'{escape(_clip(n.label, 24))}</text>'
               f'<text class="node-detail" x="{x + 8:.1f}" y="{y + 33:.1f}">'
               f'{escape(_clip(n.detail, 28))}</text><title>{escape(n.label)}'
               f'{" — " + escape(n.detail) if n.detail else ""}</title></g>')
        parts.append(f'<a href="{escape(n.href)}">{box}</a>' if n.href else box)
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 (every text went through escape())
