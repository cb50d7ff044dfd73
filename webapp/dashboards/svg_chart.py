"""A small line chart of nights as SVG, drawn on the server: the evidence archive's picture
of a series (a site admin opens it in any browser, with no script and no dependency).

Names are text: every label is escaped. Values may be missing (a night without a value):
the line breaks there.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from xml.sax.saxutils import escape, quoteattr

WIDTH, HEIGHT = 860, 380
LEFT, RIGHT, TOP, BOTTOM = 70, 190, 40, 50
COLOURS = ("#1f5fa8", "#8a8a8a", "#b07a1a", "#3a8a3a", "#7a3a8a")
FAILED_COLOUR = "#c0392b"
Y_TICKS = 5

_Scale = Callable[[date], float]
_ValueScale = Callable[[float], float]


@dataclass(frozen=True)
class Line:
    """One series on the chart: its label and its (night, value) points."""

    label: str
    points: list[tuple[date, float | None]]
    main: bool = False  # drawn solid and thick; the others dotted


def nights_svg(
    *,
    title: str,
    unit: str,
    lines: list[Line],
    change_night: date | None = None,
    failed_nights: list[date] | None = None,
) -> str:
    """The chart as an SVG document: nights on x, values on y (from 0), a dashed line on
    the change night, a red mark under each night with failures of the main series."""
    drawn = {night for line in lines for night, _ in line.points}
    nights = sorted(drawn | set(failed_nights or []))
    values = [v for line in lines for _, v in line.points if v is not None]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{LEFT}" y="22" font-size="14" font-weight="bold">{escape(title)}</text>',
    ]
    if not nights:
        parts.append(f'<text x="{LEFT}" y="{HEIGHT // 2}">No nights to show.</text></svg>')
        return "\n".join(parts)
    x_of = _x_scale(nights[0], nights[-1])
    top = _nice_top(max(values, default=1.0))
    y_of = _y_scale(top)
    parts += _axes(nights, x_of, top, y_of, unit)
    if change_night is not None:
        x = x_of(change_night)
        parts.append(
            f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{HEIGHT - BOTTOM}" '
            'stroke="black" stroke-dasharray="6 4"/>'
            f'<text x="{x + 4:.1f}" y="{TOP + 12}">change {change_night.isoformat()}</text>'
        )
    for night in failed_nights or []:
        x = x_of(night)
        y = HEIGHT - BOTTOM + 14
        parts.append(
            f'<text x="{x:.1f}" y="{y}" fill="{FAILED_COLOUR}" text-anchor="middle">✕</text>'
        )
    for index, line in enumerate(lines):
        parts += _line(line, COLOURS[index % len(COLOURS)], index, x_of, y_of)
    parts.append("</svg>")
    return "\n".join(parts)


def _x_scale(first: date, last: date) -> _Scale:
    span = max((last - first).days, 1)
    width = WIDTH - LEFT - RIGHT
    return lambda night: LEFT + width * (night - first).days / span


def _y_scale(top: float) -> _ValueScale:
    height = HEIGHT - TOP - BOTTOM
    return lambda value: HEIGHT - BOTTOM - height * value / top


def _nice_top(highest: float) -> float:
    """A round top of the y axis at or above `highest` (1, 2 or 5 times a power of ten)."""
    if highest <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(highest))
    return next(step * power for step in (1, 2, 5, 10) if step * power >= highest)


def _axes(nights: list[date], x_of: _Scale, top: float, y_of: _ValueScale, unit: str) -> list[str]:
    bottom, right = HEIGHT - BOTTOM, WIDTH - RIGHT
    parts = [
        f'<line x1="{LEFT}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="black"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" stroke="black"/>',
        f'<text x="12" y="{TOP - 8}">{escape(unit)}</text>',
    ]
    for tick in range(Y_TICKS + 1):
        value = top * tick / Y_TICKS
        y = y_of(value)
        parts.append(
            f'<line x1="{LEFT - 4}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#e5e5e5"/>'
            f'<text x="{LEFT - 8}" y="{y + 4:.1f}" text-anchor="end">{value:g}</text>'
        )
    step = max(1, len(nights) // 8)
    for night in nights[::step]:
        x = x_of(night)
        parts.append(
            f'<text x="{x:.1f}" y="{bottom + 32}" text-anchor="middle">{night:%m-%d}</text>'
        )
    return parts


def _line(line: Line, colour: str, index: int, x_of: _Scale, y_of: _ValueScale) -> list[str]:
    width, dash = ("2.5", "") if line.main else ("1.5", ' stroke-dasharray="2 3"')
    parts = []
    for segment in _segments(line.points):
        points = " ".join(f"{x_of(n):.1f},{y_of(v):.1f}" for n, v in segment)
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="{colour}" '
            f'stroke-width="{width}"{dash}/>'
        )
        for night, value in segment:
            parts.append(
                f'<circle cx="{x_of(night):.1f}" cy="{y_of(value):.1f}" r="2.5" fill="{colour}"/>'
            )
    legend_y = TOP + 16 * index + 10
    legend_x = WIDTH - RIGHT + 12
    parts.append(
        f'<line x1="{legend_x}" y1="{legend_y}" x2="{legend_x + 20}" y2="{legend_y}" '
        f'stroke="{colour}" stroke-width="{width}"{dash}/>'
        f"<text x={quoteattr(str(legend_x + 26))} y={quoteattr(str(legend_y + 4))}>"
        f"{escape(line.label)}</text>"
    )
    return parts


def _segments(points: list[tuple[date, float | None]]) -> list[list[tuple[date, float]]]:
    """The runs of consecutive points with a value (a missing value breaks the line)."""
    segments: list[list[tuple[date, float]]] = [[]]
    for night, value in sorted(points):
        if value is None:
            if segments[-1]:
                segments.append([])
            continue
        segments[-1].append((night, value))
    return [s for s in segments if s]
