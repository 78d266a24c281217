"""svg-bar-chart: render labels + values as a standalone SVG bar chart.

Script protocol: inputs JSON from the file named by SKILL_INPUTS (else stdin), outputs
JSON to the file named by SKILL_OUTPUT (else the last stdout line). Exit 0 = success,
1 = permanent failure (bad input). Standard library only and deterministic: the same
inputs give the same bytes, so the worker may cache it.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from typing import NoReturn

MARGIN_TOP, MARGIN_RIGHT, MARGIN_LEFT = 48, 16, 64
CHAR_WIDTH = 7  # rough width of one 12px sans-serif character, to truncate labels
ROTATE_BELOW = 48  # px per bar under which category labels are drawn at -45 degrees
BAR_COLOR, AXIS_COLOR, GRID_COLOR, TEXT_COLOR = "#4c78a8", "#333333", "#e0e0e0", "#222222"
# Characters XML 1.0 forbids even when escaped (a commit subject can hold any byte).
INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def fail(message: str, code: int = 1) -> NoReturn:
    print(f"svg-bar-chart: {message}", file=sys.stderr)
    sys.exit(code)


def load_inputs() -> dict:
    path = os.environ.get("SKILL_INPUTS")
    try:
        if path:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        else:
            data = json.load(sys.stdin)
    except (OSError, ValueError) as exc:
        fail(f"cannot read the inputs JSON: {exc}")
    if not isinstance(data, dict):
        fail("the inputs JSON must be an object")
    return data


def emit(outputs: dict) -> None:
    text = json.dumps(outputs, ensure_ascii=False)
    target = os.environ.get("SKILL_OUTPUT")
    if target:
        with open(target, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        print(text)


def esc(text: str) -> str:
    # By hand rather than xml.sax.saxutils, whose import pulls in urllib (20+ ms).
    text = INVALID_XML.sub("", text).replace("&", "&amp;").replace("<", "&lt;")
    return text.replace(">", "&gt;").replace('"', "&quot;")


def fmt(value: float) -> str:
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def size(inputs: dict, name: str, default: int, low: int) -> int:
    value = inputs.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= 4000:
        fail(f"{name} must be an integer between {low} and 4000, got {value!r}")
    return value


def nice_scale(low: float, high: float, integers: bool) -> tuple[float, float, float]:
    # Round the axis to 1/2/5 x 10^k steps (about five ticks) so ticks read as round
    # numbers; counts never get fractional ticks like 0.5 commits.
    if low == high:
        high = low + 1
    raw = (high - low) / 5
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    if integers:
        step = max(step, 1)
    return math.floor(low / step) * step, math.ceil(high / step) * step, step


def chart(title: str, labels: list[str], values: list[float], width: int, height: int) -> str:
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title or "bar chart")}" '
        f'font-family="sans-serif" font-size="12" fill="{TEXT_COLOR}" '
        # A CSS background, not a <rect>: stays readable in dark viewers, and every
        # <rect> in the chart is a bar.
        'style="background-color:#ffffff">',
        f'<text x="{width / 2:g}" y="28" text-anchor="middle" font-size="16" '
        f'font-weight="bold">{esc(title)}</text>',
    ]
    if not values:
        parts.append(
            f'<text x="{width / 2:g}" y="{height / 2:g}" text-anchor="middle" '
            f'fill="#888888">no data</text>'
        )
        return "\n".join([*parts, "</svg>"])

    x0, x1 = MARGIN_LEFT, width - MARGIN_RIGHT
    slot = (x1 - x0) / len(values)
    # Crowded charts: tilt the category labels (more room below), show every k-th one,
    # and keep the exact values in each bar's tooltip instead of overlapping numbers.
    rotate = slot < ROTATE_BELOW
    y0, y1 = MARGIN_TOP, height - (84 if rotate else 48)
    every = math.ceil(18 / slot) if rotate else 1
    max_chars = 14 if rotate else max(3, int(slot / CHAR_WIDTH))
    integers = all(float(v).is_integer() for v in values)
    # 6% headroom so the longest bar's value label never touches the title.
    lo, hi, step = nice_scale(min(0, *values) * 1.06, max(0, *values) * 1.06, integers)

    def y(v: float) -> float:
        return round(y1 - (v - lo) / (hi - lo) * (y1 - y0), 2)

    for k in range(round((hi - lo) / step) + 1):  # horizontal grid lines + tick labels
        tick = lo + k * step
        parts.append(
            f'<line x1="{x0}" y1="{y(tick):g}" x2="{x1}" y2="{y(tick):g}" stroke="{GRID_COLOR}"/>'
            f'<text x="{x0 - 6}" y="{y(tick) + 4:g}" text-anchor="end">{fmt(tick)}</text>'
        )
    parts.append(f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="{AXIS_COLOR}"/>')
    parts.append(f'<line x1="{x0}" y1="{y(0):g}" x2="{x1}" y2="{y(0):g}" stroke="{AXIS_COLOR}"/>')

    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        left, mid = x0 + i * slot + slot * 0.15, x0 + (i + 0.5) * slot
        top, bottom = sorted((y(value), y(0)))
        parts.append(
            f'<rect x="{left:.2f}" y="{top:g}" width="{slot * 0.7:.2f}" '
            f'height="{bottom - top:.2f}" fill="{BAR_COLOR}">'
            f"<title>{esc(label)}: {fmt(value)}</title></rect>"
        )
        if len(fmt(value)) * CHAR_WIDTH <= slot:
            value_y = top - 5 if value >= 0 else bottom + 14
            parts.append(
                f'<text x="{mid:.2f}" y="{value_y:g}" text-anchor="middle">{fmt(value)}</text>'
            )
        if i % every:
            continue
        short = label if len(label) <= max_chars else label[: max_chars - 1] + "\u2026"
        where = (
            f'x="{mid + 4:.2f}" y="{y1 + 14}" text-anchor="end" '
            f'transform="rotate(-45 {mid + 4:.2f} {y1 + 14})"'
            if rotate else f'x="{mid:.2f}" y="{y1 + 18}" text-anchor="middle"'
        )
        parts.append(f"<text {where}>{esc(short)}</text>")
    return "\n".join([*parts, "</svg>"])


def main() -> None:
    inputs = load_inputs()
    title = inputs.get("title") or ""
    labels, values = inputs.get("labels", []), inputs.get("values", [])
    if not isinstance(title, str):
        fail(f"title must be a string, got {title!r}")
    if not isinstance(labels, list) or not all(isinstance(s, str) for s in labels):
        fail("labels must be a list of strings")
    if not isinstance(values, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        for v in values
    ):
        fail("values must be a list of finite numbers")
    if len(labels) != len(values):
        fail(
            f"labels has {len(labels)} items but values has {len(values)}: "
            "they must pair up one to one"
        )
    width = size(inputs, "width", 640, 200)
    height = size(inputs, "height", 360, 150)
    emit({"svg": chart(title, labels, values, width, height)})


if __name__ == "__main__":
    main()
