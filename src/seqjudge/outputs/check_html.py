"""`seqjudge check --format html`: the one-file HTML report of `seqjudge report`, written straight from
`check` with no store in between.

The page is ``outputs.html``'s (its template, charts and escaping); a trace's result is ``check_result``'s,
as for JUnit and markdown. It streams as every `check` format does: ``render`` (in a worker for a large
file) turns a trace into one JSON line holding what the health figures count and, for a trace that did not
pass, its table row and detail panel; this process adds every line to a ``HealthTally`` and keeps the rows
and details of the first ``LISTED`` traces that did not pass, so memory is bounded whatever the number of
traces. Passing traces are counted, not listed; the page says how many traces it does not list.

The detail panel shows each call's output and the trace's messages, which the engine's fast path for plain
JSONL records skips (``PlainTrace``): this writer asks for the models (``models``). Those values are
redacted with the default names (``seqjudge.redact``) before they reach the page, as a run's are before
they reach the store.

Every trace goes through ``count``, with or without ``--failures-only``: the page lists failing traces only
anyway, and its counts, like every format's summary, cover all traces.
"""

from __future__ import annotations

import json
from typing import IO, Any

from seqjudge.checkpool import Checked, Origin
from seqjudge.outputs.check import CheckOutput, deferred_note
from seqjudge.outputs.check_ci import NO_JUDGE, check_result, failed_and_reasons
from seqjudge.outputs.html import view
from seqjudge.outputs.html.render import CheckPage, render_check
from seqjudge.outputs.textview import Totals
from seqjudge.redact import redact_trace
from seqjudge.safetext import json_bytes
from seqjudge.trace import PlainTrace, Trace

LISTED = 500  # traces that did not pass, listed in full (row and detail); the rest are counted only


class HtmlOutput(CheckOutput):
    """See the module docstring. Each process renders the row and detail of its first ``LISTED`` traces
    that did not pass, and of no other: every process checks its traces in input order (see
    ``check_ci.MarkdownOutput``), so each of the input's first ``LISTED`` such traces has fewer than
    ``LISTED`` before it in whichever process checked it, and is rendered; the rest cost no detail."""

    models = True

    def __init__(self, out: IO[str], **settings: Any) -> None:
        super().__init__(out, **settings)
        self._rendered = 0  # details rendered in this process (a forked worker inherits the count)

    def render(self, trace: Trace | PlainTrace, data: dict[str, Any], origin: Origin | None) -> bytes:
        failed, reasons = failed_and_reasons(data, self.threshold, self.risk_level)
        line: dict[str, Any] = {
            "verdict": data["verdict"],
            "score": data["sequence_correctness_score"],
            "failed": [(rule_id, severity) for rule_id, _, severity in failed],
            "reasons": reasons,
        }
        if data["verdict"] != "pass" and self._rendered < LISTED:
            self._rendered += 1
            assert isinstance(trace, Trace)  # models = True: check never hands this writer a PlainTrace
            result = check_result(data, self.threshold, self.risk_level)
            shown = redact_trace(trace)  # a page is kept and shared: secrets out, as the store keeps them out
            line["row"] = vars(view.row(0, shown, result))
            line["detail"] = view.detail(shown, result)
        return json_bytes(line, shown=True)  # a lone surrogate in the trace is shown as the text \udcff

    def start(self) -> None:
        super().start()
        self.tally = view.HealthTally()
        self.rows: list[view.Row] = []
        self.details: list[dict[str, Any]] = []
        self.not_listed = 0

    def count(self, checked: Checked) -> None:
        item = json.loads(checked.line)
        failed = [(rule_id, severity, True) for rule_id, severity in item["failed"]]
        self.tally.add_parts(item["verdict"], item["score"], failed, item["reasons"], "skipped", NO_JUDGE)
        if item["verdict"] == "pass":
            return
        if len(self.rows) >= LISTED:
            self.not_listed += 1
            return
        self.rows.append(view.Row(**{**item["row"], "index": len(self.rows)}))
        self.details.append(item["detail"])

    def line(self, checked: Checked) -> None:
        """Nothing: ``count`` has taken every trace, and the page is written whole in ``finish``."""

    def finish(self, totals: Totals) -> None:
        page = CheckPage(
            source=self.title,
            rules=self.ruleset.source or f"{len(self.ruleset.rules)} rule(s)",
            risk_level=self.risk_level,
            listed_limit=LISTED,
            not_listed=self.not_listed,
            deferred_note=deferred_note(totals),
        )
        self.out.write(render_check(page, self.tally.health(self.threshold), self.rows, self.details))
