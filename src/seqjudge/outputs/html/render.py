"""Render the one-file HTML report: ``report.html.j2`` with its style, script, charts and data inline.

Trace data is untrusted (tool outputs, messages, arguments written by an agent or a user):
- the template autoescapes every value;
- the per-trace data is embedded as JSON in a ``<script type="application/json">`` block, with ``<``, ``>``
  and ``&`` written as ``\\u003c`` etc., so no value can close the block or open a tag;
- the page's script reads that JSON and only ever inserts it as text (``textContent``), never as HTML;
- a Content-Security-Policy allows exactly the page's own script (by its SHA-256) and no network at all,
  so even a value that escaped all of the above could neither run nor fetch anything.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from seqjudge.outputs.html import svg, view
from seqjudge.outputs.html.deltas import VERDICTS, Deltas, compute_deltas
from seqjudge.store import RunInfo, StoredResult
from seqjudge.version import __version__

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TEMPLATE = "report.html.j2"


@dataclass(frozen=True)
class Calibration:
    """A calibration plot (PNG) and/or its figures, from ``seqjudge.calibrate`` or a file beside the store."""

    source: str
    png: bytes | None = None
    figures: dict[str, Any] | None = None
    note: str | None = None  # what it was made from, against the run's rules and traces (provenance)

    @property
    def data_uri(self) -> str | None:
        if not self.png or not self.png.startswith(PNG_MAGIC):
            return None
        return "data:image/png;base64," + base64.b64encode(self.png).decode("ascii")

    @property
    def choice(self) -> dict[str, Any] | None:
        """The chosen threshold of a ``seqjudge.calibrate.Calibration`` dump (None for other JSON)."""
        selection = (self.figures or {}).get("selection")
        if not isinstance(selection, dict) or not isinstance(selection.get("row"), dict):
            return None
        return selection

    @property
    def sweep_chart(self) -> Markup | None:
        """Recall, precision and false-pass rate over the threshold sweep of a calibration dump."""
        rows = (self.figures or {}).get("sweep")
        if self.choice is None or not isinstance(rows, list):
            return None
        series = []
        for name, key, colour, dash in (
            ("recall", "recall", svg.COLOURS["fail"], None),
            ("precision", "precision", "#0969da", None),
            ("false-pass rate", "false_pass_rate", svg.COLOURS["review"], "5 3"),
        ):
            points = [
                (float(r["threshold"]), float(r[key]))
                for r in rows
                if isinstance(r, dict)
                and isinstance(r.get(key), int | float)
                and isinstance(r.get("threshold"), int | float)
                and 0.0 <= r["threshold"] <= 1.0
            ]
            series.append(svg.Series(name, colour, points, dash))
        threshold = self.choice.get("threshold")
        marker = float(threshold) if isinstance(threshold, int | float) else None
        return svg.lines(series, title="Threshold sweep against the human labels", marker=marker)

    @property
    def scalars(self) -> list[tuple[str, Any]]:
        """The figures worth a line each (numbers and short text); nested values are left out."""
        return [
            (k, round(v, 4) if isinstance(v, float) else v)
            for k, v in (self.figures or {}).items()
            if isinstance(v, int | float | str) and not isinstance(v, bool) and len(str(v)) <= 80
        ]


def json_for_script(value: Any) -> Markup:
    """JSON that is safe inside ``<script type="application/json">``: no ``<``, ``>`` or ``&`` survive
    (so ``</script>`` and ``<!--`` cannot appear), and JSON.parse reads the escapes back unchanged."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for raw, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(raw, escaped)
    return Markup(text)


def _asset(name: str) -> str:
    return resources.files("seqjudge.outputs.html").joinpath(name).read_text(encoding="utf-8")


def fixed(value: float | None, digits: int = 2) -> str:
    """``value`` with ``digits`` decimals, "–" for None, and never "-0.00" (a kappa of -0.001 is 0.00)."""
    if value is None:
        return "–"
    text = f"{value:.{digits}f}"
    return text.lstrip("-") if float(text) == 0 else text


def _environment() -> Environment:
    folder = str(resources.files("seqjudge.outputs.html"))
    # Autoescape on for every template: the report shows untrusted trace data.
    env = Environment(
        loader=FileSystemLoader(folder),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["fixed"] = fixed
    return env


def _csp(script: str) -> str:
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return (
        "default-src 'none'; "
        f"script-src 'sha256-{digest}'; "
        "style-src 'unsafe-inline'; "
        "img-src data:; "
        "base-uri 'none'; form-action 'none'"
    )


LISTED_CHANGES = 30  # changed traces listed in the comparison panel (the table shows them all)


def _compare_view(deltas: Deltas) -> dict[str, Any]:
    rule_rows = deltas.rule_rows()
    changes = deltas.changes
    return {
        "deltas": deltas,
        "c": deltas.comparison,
        "matrix": [[deltas.transitions.get((b, a), 0) for a in VERDICTS] for b in VERDICTS],
        "verdicts": VERDICTS,
        "chart": svg.diverging(rule_rows[: view.MAX_RULE_BARS], title="Violations fixed and new, per rule"),
        "rule_rows": rule_rows,
        "changes": changes[:LISTED_CHANGES],
        "changes_more": max(0, len(changes) - LISTED_CHANGES),
    }


def render_report(
    info: RunInfo,
    stored: list[StoredResult],
    *,
    baseline: tuple[RunInfo, list[StoredResult]] | None = None,
    calibration: Calibration | None = None,
    generated_at: datetime | None = None,
    rates: Any = None,
    rates_note: str | None = None,
) -> str:
    """The report of one run (optionally against a baseline run) as one self-contained HTML page.
    ``rates``: the run's violation rates (a ``seqjudge.rates.RatesReport``), or ``rates_note`` saying why
    there are none."""
    results = [s.result for s in stored]
    deltas = None
    if baseline is not None:
        base_info, base_stored = baseline
        deltas = compute_deltas(
            [s.result for s in base_stored], results, baseline_id=base_info.id, baseline_label=base_info.label
        )
    table = view.rows(stored, deltas)
    data = {
        "run": info.id,
        "compare": deltas is not None,
        "traces": [view.detail(s.trace, s.result, row.delta) for s, row in zip(stored, table, strict=True)],
    }
    return _page(
        info=info,
        check=None,
        health=view.health(info, results),
        rows=table,
        compare=None if deltas is None else _compare_view(deltas),
        calibration=calibration,
        rates=rates,
        rates_note=rates_note,
        data=data,
        generated_at=(generated_at or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC"),
        model=(info.fingerprint or {}).get("model") or info.config.get("model"),
    )


@dataclass(frozen=True)
class CheckPage:
    """What the page of `seqjudge check --format html` says in place of a stored run's header."""

    source: str  # the TRACES argument
    rules: str  # the rule file's name
    risk_level: str
    listed_limit: int  # traces that did not pass listed in full, at most
    not_listed: int  # traces that did not pass beyond that limit: counted only
    deferred_note: str | None  # what the engine left to the judge


def render_check(page: CheckPage, health: view.Health, rows: list[view.Row], details: list[Any]) -> str:
    """The page of `seqjudge check`: the engine's verdicts with no store and no judge. ``rows`` and
    ``details`` are the listed traces only; ``health`` counts every trace."""
    return _page(
        info=None,
        check=page,
        health=health,
        rows=rows,
        compare=None,
        calibration=None,
        rates=None,
        rates_note=None,
        data={"run": None, "compare": False, "traces": details},
        generated_at=None,  # the same input makes the same page, as every `check` format does
        model=None,
    )


def _page(*, data: dict[str, Any], **context: Any) -> str:
    script = _asset("report.js")
    style = _asset("report.css")
    if "</script" in script.lower() or "</style" in style.lower():
        # Both are inserted raw: neither may end its own element early.
        raise RuntimeError("report.js / report.css must not contain a closing tag")
    return (
        _environment()
        .get_template(TEMPLATE)
        .render(
            **context,
            data_json=json_for_script(data),
            script=Markup(script),
            style=Markup(style),
            csp=_csp(script),
            version=__version__,
        )
    )
