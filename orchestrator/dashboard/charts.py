"""Trend charts as inline SVG: one point per run, in run order, with real axes.

x is the run's place in time order (runs bunched in one minute stay apart), labelled with
the finish times at the ticks; y is the value from 0 to a round maximum. Points take
their version's colour; a dashed line marks where a new version starts; a failed run is
a hollow red-ringed point. Each point has a <title> (run, version, value) for hovering.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from markupsafe import Markup

from orchestrator.dashboard.queries import TrendPoint

WIDTH, HEIGHT = 640, 240
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 16, 48
PALETTE = ("#2563eb", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777")
X_TICKS = 4


@dataclass(frozen=True)
class Series:
    title: str
    unit: str
    value: Callable[[TrendPoint], float | None]
    fmt: Callable[[float], str]
    detail: Callable[[TrendPoint], str] | None = None  # more of the point, when hovered


DURATION = Series("duration", "s", lambda p: None if p.duration_ms is None
                  else p.duration_ms / 1000, lambda v: f"{v:.3g}")
COST = Series("cost", "USD", lambda p: p.cost_usd, lambda v: f"{v:.4g}")
TOKENS = Series("tokens", "in + out", lambda p: p.tokens_in + p.tokens_out,
                lambda v: f"{v:,.10g}", lambda p: f"{p.tokens_in} in / {p.tokens_out} out")


def nice_max(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 times a power of ten at or above ``value``."""
    if value <= 0:
        return 0.25
    power = 10 ** math.floor(math.log10(value))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        if step * power >= value:
            return float(step * power)
    return float(10 * power)


def version_color(version: int, versions: Sequence[int]) -> str:
    return PALETTE[sorted(set(versions)).index(version) % len(PALETTE)]


def trend_svg(points: Sequence[TrendPoint], series: Series) -> Markup:
    """The chart, or a short note when no run has ended yet."""
    plotted = [(p, series.value(p)) for p in points]
    values = [v for _, v in plotted if v is not None]
    if not values:
        # Every value interpolated into this module's markup went through escape().
        return Markup(f'<p class="empty">no finished runs to chart {escape(series.title)}</p>')  # noqa: S704
    step = nice_max(max(values) / 4)  # four round steps: 0, 0.05, 0.1, ... not 0.0625
    top = 4 * step
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    n = len(plotted)

    def x_at(i: int) -> float:
        return LEFT + (inner_w / 2 if n == 1 else inner_w * i / (n - 1))

    def y_at(v: float) -> float:
        return TOP + inner_h * (1 - v / top)

    parts = [f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
             f'height="{HEIGHT}" data-series="{escape(series.title)}" data-points="{n}" '
             f'xmlns="http://www.w3.org/2000/svg">',
             f'<title>{escape(series.title)} per run ({escape(series.unit)})</title>']
    for k in range(5):  # y axis: 0 .. top in four steps, with grid lines
        v = step * k
        y = y_at(v)
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" '
                     f'y2="{y:.1f}"/>')
        parts.append(f'<text class="tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
                     f'{escape(series.fmt(v))}</text>')
    parts.append(f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" '
                 f'y2="{TOP + inner_h}"/>')
    parts.append(f'<line class="axis" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{TOP + inner_h}" '
                 f'y2="{TOP + inner_h}"/>')
    parts.append(f'<text class="label" transform="translate(14 {TOP + inner_h / 2}) '
                 f'rotate(-90)" text-anchor="middle">{escape(series.title)} '
                 f'({escape(series.unit)})</text>')
    ticks = sorted({0, n - 1, *(round(k * (n - 1) / X_TICKS) for k in range(X_TICKS + 1))})
    for i in ticks:
        x = x_at(i)
        stamp = plotted[i][0].finished_at
        parts.append(f'<line class="axis" x1="{x:.1f}" x2="{x:.1f}" y1="{TOP + inner_h}" '
                     f'y2="{TOP + inner_h + 4}"/>')
        anchor = "start" if i == 0 and n > 1 else "end" if i == n - 1 and n > 1 else "middle"
        parts.append(f'<text class="tick" x="{x:.1f}" y="{TOP + inner_h + 16}" '
                     f'text-anchor="{anchor}">{stamp:%m-%d %H:%M:%S}</text>')
    parts.append(f'<text class="label" x="{LEFT + inner_w / 2}" y="{HEIGHT - 6}" '
                 f'text-anchor="middle">run (oldest to newest, finish time)</text>')
    versions = [p.version for p, _ in plotted]
    for i in range(n):  # where a new version starts
        if i == 0 or versions[i] != versions[i - 1]:
            x = x_at(i) - (0 if i == 0 else (x_at(i) - x_at(i - 1)) / 2)
            parts.append(f'<line class="version-mark" x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" '
                         f'y2="{TOP + inner_h}"/>')
            parts.append(f'<text class="version-label" x="{x + 3:.1f}" y="{TOP + 10}">'
                         f'v{versions[i]}</text>')
    for i, (point, value) in enumerate(plotted):
        if value is None:
            continue
        color = version_color(point.version, versions)
        failed = point.state == "failed"
        fill = "white" if failed else color
        stroke = "#dc2626" if failed else color
        more = f" ({series.detail(point)})" if series.detail else ""
        parts.append(
            f'<circle class="point" cx="{x_at(i):.1f}" cy="{y_at(value):.1f}" r="4" '
            f'fill="{fill}" stroke="{stroke}" stroke-width="2" data-run="{escape(point.run_id)}"'
            f' data-version="{point.version}"><title>{escape(point.run_id)} · v{point.version}'
            f' · {escape(point.state)} · {escape(series.fmt(value))} {escape(series.unit)}'
            f'{escape(more)}</title></circle>')
    parts.append("</svg>")
    legend = " ".join(f'<span class="swatch" style="background:{version_color(v, versions)}">'
                      f'</span>v{v}' for v in sorted(set(versions)))
    legend_html = f'<div class="legend">{legend} · hollow red: failed</div>'
    return Markup("".join(parts) + legend_html)  # noqa: S704 (escaped above)
