"""`seqjudge check`'s formats: text (an actionable block per violation, a line per trace), one JSON
document, or JSONL (one report a line, written as the engine serialised it); sarif, junit, markdown and html
live in their own modules and follow the same protocol.

Every format streams. A ``CheckOutput`` says what one trace contributes in ``render`` (the trace and its
report data in, bytes out), which runs wherever the trace is checked: in a worker process for a large JSONL
file (``checkpool``), so the formatting is spread over the cores as the checking is. The writer itself, in
this process, writes its head in ``start``, each trace's bytes as they come in input order (``line``), and
its closing part from the running ``Totals`` in ``finish``: it keeps no report, so memory does not grow
with the number of traces. ``render`` may use what the writer set up in ``__init__`` (forked workers
inherit it), never what ``line`` gathers.
"""

from __future__ import annotations

import json
import os
from typing import IO, Any

from seqjudge.checkpool import Checked, Checks, Origin
from seqjudge.outputs.coverage import coverage_lines
from seqjudge.outputs.streams import byte_writer
from seqjudge.outputs.textview import PLAIN, Palette, Totals, report_bytes
from seqjudge.report import DEFAULT_THRESHOLD, report_line
from seqjudge.rules.engine import FINITE
from seqjudge.rules.model import RuleSet
from seqjudge.safetext import json_bytes, shown
from seqjudge.trace import PlainTrace, Trace


def deferred_note(totals: Totals) -> str | None:
    """What the engine left to the judge, counted and named by rule, said in every format (None when
    nothing was deferred)."""
    if not totals.deferred:
        return None
    named = ", ".join(f"{rule_id} on {n} trace(s)" for rule_id, n in totals.deferred.most_common())
    return (
        f"{sum(totals.deferred.values())} judge-rule decision(s) deferred: run `seqjudge judge` "
        f"or `seqjudge run` with a model to decide them. Deferred: {named}."
    )


class CheckOutput:
    # True when ``render`` needs the trace's models (call outputs, messages): the command then reads plain
    # JSONL records as ``Trace`` too, not as the engine-only ``PlainTrace``.
    models = False

    def __init__(
        self,
        out: IO[str],
        *,
        source: str,
        ruleset: RuleSet,
        threshold: float = DEFAULT_THRESHOLD,
        risk_level: str = "medium",
        title: str | None = None,
    ) -> None:
        self.out = out
        self.source = source  # the TRACES argument: a file, a folder, or - for stdin or several paths
        # What the reader is shown as checked: every path given (several, or a config's list), not "-".
        self.title = title or source
        self.ruleset = ruleset
        self.threshold = threshold  # what the verdicts were decided with (`check --threshold/--risk-level`)
        self.risk_level = risk_level

    def render(self, trace: Trace | PlainTrace, data: dict[str, Any], origin: Origin | None) -> bytes:
        """The trace's part of the output (may be empty). Runs in a worker or here: uses only what
        ``__init__`` set."""
        raise NotImplementedError

    def start(self) -> None:
        """Called once before the first trace, after the workers may have been forked."""
        self._write = byte_writer(self.out)

    def count(self, checked: Checked) -> None:
        """Called for every trace, in input order, before ``--failures-only`` leaves passing ones out."""

    def line(self, checked: Checked) -> None:
        """Write one trace's rendered part, in input order."""
        self.write(checked.line)

    def write(self, parts: bytes | memoryview) -> None:
        """Write one or several traces' parts (joined, in input order) as they are."""
        if parts:
            self._write(parts)

    def joins(self) -> bool:
        """Whether a worker may join its chunk's parts for this writer, to be written by one ``write``: its
        ``count`` does nothing and its ``line`` writes the part (it may say how, in ``write``). A writer
        that looks at each trace is handed them one by one."""
        cls = type(self)
        return cls.count is CheckOutput.count and cls.line is CheckOutput.line

    def take(self, checked: Checked, failures_only: bool) -> None:
        """One trace's result, in input order: counted, and written unless it passed under
        ``--failures-only``."""
        self.count(checked)
        if not (failures_only and checked.verdict == "pass"):
            self.line(checked)

    def take_all(self, checks: Checks, failures_only: bool) -> None:
        """A worker chunk's results, in input order: the parts it joined (those ``--failures-only`` keeps)
        written by one ``line`` call, or each trace's taken."""
        if checks.parts is None:
            self.write(checks.joined)
            return
        for part, verdict in zip(checks.parts, checks.verdicts, strict=True):
            self.take(Checked(part, verdict), failures_only)

    def finish(self, totals: Totals) -> None:
        """Called once after the last trace."""

    def abandon(self) -> None:
        """Called instead of ``finish`` when the run ends early (an error, an interrupt): a writer that
        wrote out of order puts the output back the way the others leave it, what was written so far."""


class TextOutput(CheckOutput):
    """A block per violation and a line per trace, then the deferred note, the per-rule tally and totals.

    Colour (rich's styles) only when the output is a terminal that takes it: not into a file or a pipe, not
    under ``NO_COLOR``; ``FORCE_COLOR`` forces it (rich's rules)."""

    def __init__(self, out: IO[str], **settings: Any) -> None:
        super().__init__(out, **settings)
        self.palette = _palette(out)

    def render(self, trace: Trace | PlainTrace, data: dict[str, Any], origin: Origin | None) -> bytes:
        return report_bytes(trace, data, self.palette)

    def finish(self, totals: Totals) -> None:
        note = deferred_note(totals)
        lines = ([note] if note else []) + totals.tally() + [totals.line()] + coverage_lines(totals.coverage)
        # Once a run: through the one terminal-safe path (rule ids and tool names come from the rule file).
        self.out.write(shown("\n".join(lines)) + "\n")


def _palette(out: IO[str]) -> Palette:
    """The verdict words in colour when ``out`` is a colour terminal, else plain."""
    if os.environ.get("NO_COLOR"):  # https://no-color.org: any non-empty value
        return PLAIN
    isatty = getattr(out, "isatty", None)
    if not (isatty is not None and isatty()) and not os.environ.get("FORCE_COLOR"):
        return PLAIN  # a file or a pipe: decided without importing rich (start-up time)
    from rich.color import ColorSystem  # rich only when text goes somewhere that may show colour
    from rich.console import Console
    from rich.style import Style

    if Console(file=out).color_system is None:  # not a terminal (or a dumb one), unless FORCE_COLOR
        return PLAIN

    def paint(text: str, style: str) -> str:
        return Style.parse(style).render(text, color_system=ColorSystem.STANDARD)

    return Palette(
        fail=paint(PLAIN.fail, "bold red"),
        warn=paint(PLAIN.warn, "bold yellow"),
        failed=paint(PLAIN.failed, "bold red"),
        passed=paint(PLAIN.passed, "green"),
        review=paint(PLAIN.review, "bold yellow"),
        mark=paint(PLAIN.mark, "bold red"),
    )


class JsonOutput(CheckOutput):
    """``{"reports": [...], "summary": {...}}``: the reports written one a line as they come, the summary
    (known only at the end) after them. The same document as one ``json.dump`` of both would be."""

    def render(self, trace: Trace | PlainTrace, data: dict[str, Any], origin: Origin | None) -> bytes:
        # What report_line writes, without its newline, after the separator from the report before it (the
        # first report goes without its comma): parts so made join into the document as they are.
        return b",\n    " + json_bytes(data)

    def start(self) -> None:
        super().start()
        self._write(b'{\n  "reports": [')
        self._first = True

    def write(self, parts: bytes | memoryview) -> None:
        if parts:
            self._write(parts[1:] if self._first else parts)
            self._first = False

    def finish(self, totals: Totals) -> None:
        summary = json.dumps(totals.as_dict(), ensure_ascii=False, indent=2).replace("\n", "\n  ")
        self._write(b"\n  ],\n  " if not self._first else b"],\n  ")
        self._write(b'"summary": ' + summary.encode() + b"\n}\n")


class JsonlOutput(CheckOutput):
    def render(self, trace: Trace | PlainTrace, data: dict[str, Any], origin: Origin | None) -> bytes:
        return report_line(data, finite=FINITE)  # the engine's data
