"""A tiny SVG line chart, so the live tuning view needs no plotting library."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

__all__ = ["line_chart_svg"]


def _ticks(lo: float, hi: float) -> tuple[float, float]:
    if hi <= lo:  # one point, or a flat line: give it some height
        pad = abs(hi) * 0.1 or 1.0
        return lo - pad, hi + pad
    return lo, hi


def line_chart_svg(
    xs: Sequence[float],
    ys: Sequence[float],
    x_label: str,
    y_label: str,
    width: int = 340,
    height: int = 200,
) -> str:
    """One polyline of ``ys`` against ``xs`` with labelled axes and their end values."""
    left, right, top, bottom = 58, 12, 10, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'style="font-family:sans-serif;font-size:11px">',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" '
        'stroke="#999"/>',
        f'<text x="{left + plot_w / 2}" y="{height - 4}" text-anchor="middle">'
        f"{html.escape(x_label)}</text>",
        f'<text x="12" y="{top + plot_h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 12 {top + plot_h / 2})">{html.escape(y_label)}</text>',
    ]
    if xs:
        x0, x1 = _ticks(min(xs), max(xs))
        y0, y1 = _ticks(min(ys), max(ys))
        # Values decades apart (a latency falling from the naive program's) on a log axis, so
        # the late, small improvements stay visible.
        log_y = min(ys) > 0 and max(ys) > 20 * min(ys)
        scale = math.log10 if log_y else float

        def px(x: float) -> float:
            return left + (x - x0) / (x1 - x0) * plot_w

        def py(y: float) -> float:
            lo, hi = scale(y0), scale(y1)
            return top + plot_h - (scale(y) - lo) / (hi - lo) * plot_h

        points = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, ys))
        parts += [
            f'<polyline points="{points}" fill="none" stroke="#1f77b4" stroke-width="2"/>',
            *(
                f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="#1f77b4"/>'
                for x, y in zip(xs, ys)
            ),  # fmt: skip
            f'<text x="{left - 3}" y="{top + 9}" text-anchor="end">{y1:.4g}</text>',
            f'<text x="{left - 3}" y="{top + plot_h}" text-anchor="end">{y0:.4g}</text>',
            f'<text x="{left}" y="{top + plot_h + 12}">{x0:.4g}</text>',
            f'<text x="{left + plot_w}" y="{top + plot_h + 12}" text-anchor="end">{x1:.4g}</text>',
        ]
        if log_y:
            parts.append(f'<text x="{left + 4}" y="{top + 12}" fill="#999">log scale</text>')
    else:
        parts.append(
            f'<text x="{left + plot_w / 2}" y="{top + plot_h / 2}" text-anchor="middle" '
            'fill="#999">waiting for the first result</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
