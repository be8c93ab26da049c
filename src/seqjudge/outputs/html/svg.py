"""Small inline-SVG charts for the HTML report, drawn in Python so the report needs no JavaScript library.

Every piece of text that reaches the SVG (rule ids come from user files) goes through ``_esc``: the charts
are inserted into the page unescaped, so escaping here is what keeps them inert. Each chart has a
``<title>`` and an ``aria-label`` and prints its numbers as text, so it reads without colour or a mouse.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from markupsafe import Markup

# Colour-blind safe (Okabe-Ito derived) and readable on white; verdicts also always carry a text label.
COLOURS = {
    "pass": "#1a7f37",
    "fail": "#cf222e",
    "review": "#b35900",
    "critical": "#cf222e",
    "warning": "#b35900",
    "new": "#cf222e",
    "fixed": "#1a7f37",
    "axis": "#6e7781",
    "grid": "#d8dee4",
    "text": "#1f2328",
}
FONT = "font-family=\"system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif\""


def _esc(text: object) -> str:
    return escape(str(text), quote=True)


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _svg(width: int, height: int, label: str, body: list[str]) -> Markup:
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
        f'role="img" aria-label="{_esc(label)}" {FONT} font-size="12" class="chart">'
        f"<title>{_esc(label)}</title>"
    )
    return Markup(head + "".join(body) + "</svg>")


def _gridline(x1: float, x2: float, y: float, label: str) -> str:
    """A horizontal gridline with its value written left of the axis."""
    return (
        f'<line x1="{_num(x1)}" x2="{_num(x2)}" y1="{_num(y)}" y2="{_num(y)}" stroke="{COLOURS["grid"]}"/>'
        f'<text x="{_num(x1 - 6)}" y="{_num(y + 4)}" text-anchor="end" fill="{COLOURS["axis"]}">'
        f"{label}</text>"
    )


@dataclass(frozen=True)
class Segment:
    key: str  # a COLOURS key
    value: int


def verdict_bar(counts: dict[str, int], *, width: int = 600, height: int = 18) -> Markup:
    """One horizontal bar split pass / review / fail, for the run at a glance."""
    total = sum(counts.get(k, 0) for k in ("pass", "review", "fail"))
    label = ", ".join(f"{counts.get(k, 0)} {k}" for k in ("pass", "review", "fail"))
    if total == 0:
        return _svg(width, height, "no traces", [f'<rect width="{width}" height="{height}" fill="#eaeef2"/>'])
    body: list[str] = []
    x = 0.0
    for key in ("pass", "review", "fail"):
        n = counts.get(key, 0)
        if not n:
            continue
        w = width * n / total
        body.append(
            f'<rect x="{_num(x)}" y="0" width="{_num(w)}" height="{height}" fill="{COLOURS[key]}">'
            f"<title>{n} {key}</title></rect>"
        )
        x += w
    return _svg(width, height, f"Verdicts: {label}", body)


def histogram(
    bins: Sequence[dict[str, int]],
    labels: Sequence[str],
    *,
    threshold: float | None = None,
    width: int = 560,
    height: int = 220,
) -> Markup:
    """Stacked bars (pass / review / fail) per score bin; the last bin is the score 1.0 exactly.

    ``threshold`` draws the review threshold as a dashed line at its place on the 0..1 axis."""
    left, right, top, bottom = 36, 10, 14, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max([sum(b.values()) for b in bins] + [1])
    step = plot_w / len(bins)
    body: list[str] = []
    for tick in _ticks(peak):
        y = top + plot_h - plot_h * tick / peak
        body.append(_gridline(left, width - right, y, str(tick)))
    for i, counts in enumerate(bins):
        x = left + i * step + 2
        y = top + plot_h
        total = sum(counts.values())
        for key in ("pass", "review", "fail"):
            n = counts.get(key, 0)
            if not n:
                continue
            h = plot_h * n / peak
            y -= h
            body.append(
                f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(step - 4)}" height="{_num(h)}" '
                f'fill="{COLOURS[key]}"><title>{_esc(labels[i])}: {n} {key}</title></rect>'
            )
        if total:
            body.append(
                f'<text x="{_num(x + (step - 4) / 2)}" y="{_num(y - 3)}" text-anchor="middle" '
                f'fill="{COLOURS["text"]}">{total}</text>'
            )
        body.append(
            f'<text x="{_num(x + (step - 4) / 2)}" y="{height - bottom + 15}" text-anchor="middle" '
            f'fill="{COLOURS["axis"]}">{_esc(labels[i])}</text>'
        )
    if threshold is not None and 0.0 <= threshold <= 1.0:
        # The first len(bins) - 1 bins cover [0, 1) evenly; the threshold falls among them.
        x = left + (len(bins) - 1) * step * threshold
        body.append(
            f'<line x1="{_num(x)}" x2="{_num(x)}" y1="{top - 6}" y2="{top + plot_h}" '
            f'stroke="{COLOURS["text"]}" stroke-dasharray="4 3"/>'
            f'<text x="{_num(x - 4)}" y="{top + 2}" text-anchor="end" fill="{COLOURS["text"]}">'
            f"threshold {threshold:g}</text>"
        )
    body.append(
        f'<line x1="{left}" x2="{width - right}" y1="{top + plot_h}" y2="{top + plot_h}" '
        f'stroke="{COLOURS["axis"]}"/>'
        f'<text x="{left + plot_w / 2}" y="{height - 4}" text-anchor="middle" fill="{COLOURS["axis"]}">'
        "score</text>"
    )
    total = sum(sum(b.values()) for b in bins)
    return _svg(width, height, f"Score distribution of {total} trace(s)", body)


def _ticks(peak: int) -> list[int]:
    """Up to five round gridline values from 0 to ``peak``."""
    step = 1
    for candidate in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000):
        step = candidate
        if peak / candidate <= 5:
            break
    else:
        step = max(1, peak // 5)
    return list(range(0, peak + 1, step))


def hbars(
    rows: Sequence[tuple[str, list[Segment]]],
    *,
    title: str,
    width: int = 560,
    row_h: int = 22,
    label_w: int = 190,
) -> Markup:
    """Horizontal bars, one per labelled row, each made of coloured segments, with the total printed."""
    if not rows:
        return _svg(width, row_h, f"{title}: none", [])
    peak = max([sum(s.value for s in segs) for _, segs in rows] + [1])
    plot_w = width - label_w - 48
    height = row_h * len(rows) + 4
    body: list[str] = []
    for i, (label, segs) in enumerate(rows):
        y = 2 + i * row_h
        shown = label if len(label) <= 28 else label[:27] + "…"
        body.append(
            f'<text x="{label_w - 8}" y="{y + row_h / 2 + 4}" text-anchor="end" fill="{COLOURS["text"]}">'
            f"<title>{_esc(label)}</title>{_esc(shown)}</text>"
        )
        x = float(label_w)
        for seg in segs:
            if not seg.value:
                continue
            w = plot_w * seg.value / peak
            body.append(
                f'<rect x="{_num(x)}" y="{y + 3}" width="{_num(w)}" height="{row_h - 6}" '
                f'fill="{COLOURS[seg.key]}"><title>{_esc(label)}: {seg.value} {_esc(seg.key)}</title></rect>'
            )
            x += w
        total = sum(s.value for s in segs)
        body.append(
            f'<text x="{_num(x + 6)}" y="{y + row_h / 2 + 4}" fill="{COLOURS["text"]}">{total}</text>'
        )
    return _svg(width, height, title, body)


def diverging(
    rows: Sequence[tuple[str, int, int]], *, title: str, width: int = 560, row_h: int = 22, label_w: int = 190
) -> Markup:
    """Per labelled row, ``fixed`` drawn leftwards (green) and ``new`` rightwards (red) from a centre axis."""
    if not rows:
        return _svg(width, row_h, f"{title}: none", [])
    peak = max([max(fixed, new) for _, fixed, new in rows] + [1])
    half = (width - label_w - 60) / 2
    centre = label_w + 30 + half
    height = row_h * len(rows) + 4
    body: list[str] = [
        f'<line x1="{_num(centre)}" x2="{_num(centre)}" y1="0" y2="{height}" stroke="{COLOURS["axis"]}"/>'
    ]
    for i, (label, fixed, new) in enumerate(rows):
        y = 2 + i * row_h
        mid = y + row_h / 2 + 4
        shown = label if len(label) <= 28 else label[:27] + "…"
        body.append(
            f'<text x="{label_w - 8}" y="{mid}" text-anchor="end" fill="{COLOURS["text"]}">'
            f"<title>{_esc(label)}</title>{_esc(shown)}</text>"
        )
        if fixed:
            w = half * fixed / peak
            body.append(
                f'<rect x="{_num(centre - w)}" y="{y + 3}" width="{_num(w)}" height="{row_h - 6}" '
                f'fill="{COLOURS["fixed"]}"><title>{_esc(label)}: {fixed} fixed</title></rect>'
                f'<text x="{_num(centre - w - 4)}" y="{mid}" text-anchor="end" fill="{COLOURS["text"]}">'
                f"−{fixed}</text>"
            )
        if new:
            w = half * new / peak
            body.append(
                f'<rect x="{_num(centre)}" y="{y + 3}" width="{_num(w)}" height="{row_h - 6}" '
                f'fill="{COLOURS["new"]}"><title>{_esc(label)}: {new} new</title></rect>'
                f'<text x="{_num(centre + w + 4)}" y="{mid}" fill="{COLOURS["text"]}">+{new}</text>'
            )
    return _svg(width, height, title, body)


@dataclass(frozen=True)
class Series:
    name: str
    colour: str
    points: list[tuple[float, float]]  # (x, y), both in 0..1
    dash: str | None = None


def lines(
    series: Sequence[Series], *, title: str, marker: float | None = None, x_label: str = "threshold",
    width: int = 560, height: int = 240,
) -> Markup:  # fmt: skip
    """Lines over a 0..1 by 0..1 plot (a threshold sweep), with a legend and a vertical ``marker``."""
    left, right, top, bottom = 36, 10, 26, 34
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(x: float, y: float) -> tuple[float, float]:
        return left + plot_w * x, top + plot_h * (1 - y)

    body: list[str] = []
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        _, y = px(0, tick)
        x, _ = px(tick, 0)
        body.append(
            _gridline(left, width - right, y, f"{tick:g}")
            + f'<text x="{_num(x)}" y="{height - bottom + 15}" text-anchor="middle" fill="{COLOURS["axis"]}">'
            f"{tick:g}</text>"
        )
    for s in series:
        if not s.points:
            continue
        path = " ".join(f"{_num(px(x, y)[0])},{_num(px(x, y)[1])}" for x, y in sorted(s.points))
        dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
        body.append(
            f'<polyline points="{path}" fill="none" stroke="{_esc(s.colour)}" stroke-width="2"{dash}>'
            f"<title>{_esc(s.name)}</title></polyline>"
        )
    x = left
    for s in series:
        body.append(
            f'<rect x="{x}" y="6" width="12" height="4" fill="{_esc(s.colour)}"/>'
            f'<text x="{x + 16}" y="12" fill="{COLOURS["text"]}">{_esc(s.name)}</text>'
        )
        x += 24 + 7 * len(s.name)
    if marker is not None and 0.0 <= marker <= 1.0:
        mx, _ = px(marker, 0)
        body.append(
            f'<line x1="{_num(mx)}" x2="{_num(mx)}" y1="{top}" y2="{top + plot_h}" '
            f'stroke="{COLOURS["text"]}" stroke-dasharray="4 3"><title>chosen {marker:g}</title></line>'
        )
    body.append(
        f'<text x="{left + plot_w / 2}" y="{height - 4}" text-anchor="middle" fill="{COLOURS["axis"]}">'
        f"{_esc(x_label)}</text>"
    )
    return _svg(width, height, title, body)
