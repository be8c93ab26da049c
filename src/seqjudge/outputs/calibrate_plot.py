"""The calibration plot: where known-correct and known-incorrect traces score, the chosen threshold with its
95% interval, and precision and recall against the threshold.

matplotlib is imported only here, and only when a plot is asked for. The figure is drawn on its own Agg
canvas (``matplotlib.figure.Figure``), never through pyplot, so making a plot changes no global backend
state of a program that embeds seqjudge (the HTML report embeds ``calibration_png()`` as base64).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from seqjudge.calibrate import Calibration
from seqjudge.errors import InputError
from seqjudge.outputs.streams import write_bytes
from seqjudge.provenance import SUITE_KEY

PASS_COLOUR = "#2b8a3e"
FAIL_COLOUR = "#c92a2a"
BAND_COLOUR = "#868e96"
MAX_BARS = 25  # more distinct scores than this: a histogram instead of one bar per score
BAR_WIDTH = 0.012


MISSING = "the calibration plot needs matplotlib, which is not installed"
INSTALL = "pip install 'seqjudge[plot]' (or pip install matplotlib), then run calibrate with --plot again"


def _matplotlib() -> tuple[type, type]:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise InputError(
            MISSING, where="--plot", hint=INSTALL + "; the JSON and the text summary do not need it"
        ) from None
    return Figure, FigureCanvasAgg


def plot_unavailable() -> str | None:
    """Why no plot can be drawn here (matplotlib missing, with how to install it); None when one can."""
    try:
        _matplotlib()
    except InputError:
        return f"{MISSING}: {INSTALL}"
    return None


def calibration_png(
    cal: Calibration, *, title: str | None = None, dpi: int = 110, suite: dict[str, object] | None = None
) -> bytes:
    """The plot as PNG bytes; ``suite`` (``provenance.Suite.as_dict()``) is written into it as a text chunk,
    so that the HTML report embeds it only beside runs of the same rules and traces."""
    figure_cls, canvas_cls = _matplotlib()
    fig = figure_cls(figsize=(8.0, 6.4))
    canvas_cls(fig)
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [1, 1]})
    chosen = cal.selection
    band = chosen.intervals.get("threshold")

    fails = [s["score"] for s in cal.scores if s["label"] == "fail"]
    passes = [s["score"] for s in cal.scores if s["label"] != "fail"]
    labels = [f"known correct (pass, n={len(passes)})", f"known incorrect (fail, n={len(fails)})"]
    distinct = sorted(set(fails) | set(passes))
    if len(distinct) <= MAX_BARS:
        # Few distinct scores (the usual case: 0.0 on a critical failure, passed/checked otherwise): one
        # stacked bar per score, starting *at* the score, so a bar at the threshold sits on the side that
        # is not flagged, as `score < threshold` says.
        n_pass = [passes.count(v) for v in distinct]
        n_fail = [fails.count(v) for v in distinct]
        top.bar(
            distinct, n_pass, width=BAR_WIDTH, align="edge", color=PASS_COLOUR, alpha=0.8, label=labels[0]
        )
        top.bar(
            distinct,
            n_fail,
            width=BAR_WIDTH,
            align="edge",
            bottom=n_pass,
            color=FAIL_COLOUR,
            alpha=0.8,
            label=labels[1],
        )
    else:
        top.hist(
            [passes, fails],
            bins=[i / 20 for i in range(21)],
            label=labels,
            color=[PASS_COLOUR, FAIL_COLOUR],
            alpha=0.75,
        )
    top.set_ylabel("traces")
    top.set_title(title or "Score distributions by human verdict")

    # A threshold between two candidates flags what the next candidate up flags: steps hold to the left.
    rows = [r for r in cal.sweep if r.threshold <= 1.0]
    xs = [r.threshold for r in rows]

    def series(name: str) -> list[float]:
        return [float("nan") if getattr(r, name) is None else getattr(r, name) for r in rows]

    bottom.step(xs, series("precision"), where="pre", label="precision", color="#1c7ed6")
    bottom.step(xs, series("recall"), where="pre", label="recall (failing traces caught)", color="#e67700")
    bottom.step(
        xs, series("false_pass_rate"), where="pre", label="false-pass rate", color=FAIL_COLOUR, linestyle=":"
    )
    bottom.set_ylim(-0.03, 1.03)
    bottom.set_xlim(-0.02, 1.03)
    bottom.set_xlabel("threshold (a trace is flagged when its score is below it)")
    bottom.set_ylabel("rate")

    for ax in (top, bottom):
        if band is not None:
            ax.axvspan(
                band[0],
                min(band[1], 1.0),
                color=BAND_COLOUR,
                alpha=0.18,
                lw=0,
                label="95% interval of the threshold" if ax is top else None,
            )
        ax.axvline(
            min(chosen.threshold, 1.0),
            color="black",
            linestyle="--",
            lw=1.2,
            label=f"chosen threshold {chosen.threshold:.3g}" if ax is top else None,
        )
        ax.grid(alpha=0.25)
    top.legend(fontsize=8, loc="upper center")
    bottom.legend(fontsize=8, loc="lower left")
    note = f"objective: {chosen.rule}"
    if chosen.fallback:
        note += " (not met: best F1 used)"
    if chosen.wide:
        note += "; the interval is wide"
    fig.text(0.01, 0.005, note, fontsize=7, color="#495057")
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    buf = io.BytesIO()
    metadata = {SUITE_KEY: json.dumps(suite, sort_keys=True)} if suite is not None else None
    fig.savefig(buf, format="png", dpi=dpi, metadata=metadata)
    return buf.getvalue()


def write_plot(
    cal: Calibration, path: str | Path, *, title: str | None = None, suite: dict[str, object] | None = None
) -> Path:
    return write_png(calibration_png(cal, title=title, suite=suite), path)


def write_png(data: bytes, path: str | Path) -> Path:
    """Write a drawn plot; an unwritable path is bad input (exit 2), not a traceback."""
    p = Path(path)
    write_bytes(data, p, option="--plot")
    return p
