"""The closing warnings of `check` and `run` about what the input left unchecked (``rules.coverage``)."""

from __future__ import annotations

from seqjudge.rules.coverage import LISTED, Coverage
from seqjudge.safetext import terminal

SHOWN_TRACES = 5  # traces with out-of-catalog calls named in text; JSON lists them all


def coverage_lines(coverage: Coverage | None) -> list[str]:
    """One line per finding, then how to make them fatal, then the coverage notes (catalog tools no trace
    called); empty when there is nothing to say."""
    if coverage is None:
        return []
    notes = [
        f"note: tool {item['tool']!r} (rule {', '.join(item['rules'])}) is in {coverage.catalog_name} but no "
        "trace calls it: these traces did not exercise those rules on it"
        for item in coverage.catalog_not_called()
    ]
    if not coverage.warnings():
        return notes
    lines: list[str] = []
    rules = coverage.unexercised()
    if rules:
        lines.append(
            f"warning: {len(rules)} rule(s) exercised on no trace of {coverage.traces} (they checked "
            "nothing): " + ", ".join(rules)
        )
    for item in coverage.unknown_tools():
        where = "no trace calls it" + (
            f" and {coverage.catalog_name} does not list it" if coverage.catalog_name else ""
        )
        guess = f"; did you mean {item['did_you_mean']!r}?" if item["did_you_mean"] else ""
        lines.append(f"warning: tool {item['tool']!r} (rule {', '.join(item['rules'])}): {where}{guess}")
    outside = coverage.out_of_catalog
    for trace_id, tools in list(outside.items())[:SHOWN_TRACES]:
        lines.append(
            f"warning: trace {terminal(trace_id)!r} calls tools that {coverage.catalog_name} does not list "
            f"(a trace of another agent or domain?): {', '.join(terminal(t) for t in tools)}"
        )
    if coverage.outside > SHOWN_TRACES:
        lines.append(
            f"warning: ... and {coverage.outside - SHOWN_TRACES} more trace(s) calling tools outside the "
            f"catalog (--format json lists the first {LISTED:,})"
        )
    if not coverage.strict:
        lines.append("warning: --strict makes these an error (exit 2); use it in CI")
    return lines + notes
