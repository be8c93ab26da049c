"""The guarantee part of `seqjudge calibrate`'s report: per judge rule, the certified auto-pass (and
auto-fail) threshold with its bound and coverage, or how many labels it would take; coverage against alpha
in text and as a plot (matplotlib only when a plot is asked for, as in ``calibrate_plot``)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import IO, Any

from seqjudge.calibrate_guarantee import GuaranteeReport


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _side(w: Any, name: str, g: dict[str, Any], counted: str) -> None:
    n_key, cov_key = (
        ("n_auto_passed", "auto_pass_coverage")
        if counted == "passes"
        else (
            "n_auto_failed",
            "auto_fail_coverage",
        )
    )
    if g["threshold"] is None:
        w(f"    {name}: none certified: {g['reason']}\n")
        return
    w(
        f"    {name}: confidence >= {g['threshold']:.3f}: {g[n_key]} of {g['decisions']} labelled decisions "
        f"({_pct(g[cov_key])}), {g['errors']} wrong, upper bound {g['upper_bound']:.3f} <= alpha "
        f"{g['alpha']:g}\n"
    )


def guarantee_text(report: GuaranteeReport | None, out: IO[str]) -> None:
    if report is None:
        return
    w = out.write
    w(
        f"\nguarantee per judge rule (risk level {report.risk_level}, "
        f"confidence: {report.confidence_source}): "
        f"with probability >= {1 - report.delta:.0%} the share of labelled-fail decisions among auto-passed "
        f"ones is <= {report.alpha:g}; every other judge decision goes to review\n"
    )
    if not report.rules:
        w("  no judge rule\n")
    for r in report.rules:
        w(f"  {r.rule_id}:")
        w(f" ({r.unlabelled} decision(s) without a label left out)\n" if r.unlabelled else "\n")
        _side(w, "auto-pass", r.guarantee, "passes")
        if r.auto_fail is not None:
            _side(w, "auto-fail", r.auto_fail, "fails")
        curve = ", ".join(f"{a}: {_pct(c)}" for a, c in r.coverage_by_alpha.items())
        w(f"    auto-pass coverage by alpha: {curve}\n")
    if report.note:
        w(f"  note: {report.note}\n")
    if report.certificate:
        w(f"  certificate: {report.certificate}\n")


def guarantee_png(report: GuaranteeReport, *, title: str | None = None, dpi: int = 110) -> bytes:
    """Auto-pass coverage against alpha, one line per judge rule, the chosen alpha marked."""
    from seqjudge.outputs.calibrate_plot import _matplotlib

    figure_cls, canvas_cls = _matplotlib()
    fig = figure_cls(figsize=(7.0, 4.2))
    canvas_cls(fig)
    ax = fig.subplots()
    for r in report.rules:
        xs = [float(a) for a in r.coverage_by_alpha]
        ys = [float("nan") if c is None else c for c in r.coverage_by_alpha.values()]
        ax.plot(xs, ys, marker="o", label=r.rule_id)
    ax.axvline(report.alpha, color="black", linestyle="--", lw=1, label=f"alpha {report.alpha:g}")
    ax.set_xlabel("alpha (bound on the false-pass share among auto-passed decisions)")
    ax.set_ylabel("auto-pass coverage")
    ax.set_ylim(-0.03, 1.03)
    ax.set_title(title or f"Certified auto-pass coverage (delta {report.delta:g})")
    ax.grid(alpha=0.25)
    ax.legend(fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def write_guarantee_plot(report: GuaranteeReport, path: str | Path, *, title: str | None = None) -> Path:
    from seqjudge.outputs.calibrate_plot import write_png

    return write_png(guarantee_png(report, title=title), path)
