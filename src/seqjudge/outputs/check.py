"""`seqjudge check`'s formats: text (an actionable block per violation, a line per trace), one JSON
document, or JSONL (one report a line, written as the engine serialised it).

A ``CheckOutput`` receives each trace's report as the engine's data (``Engine.check_data``), or, when it
says ``lines``, as the already serialised JSONL line (which lets worker processes do the checking), and
writes its closing part in ``finish``. ``models``: it needs the trace as a ``Trace`` model (the text
format lists the calls), so the command reads full models instead of the lighter plain records.
"""

from __future__ import annotations

import json
from typing import IO, Any, ClassVar

from seqjudge.checkpool import Checked
from seqjudge.outputs.coverage import coverage_lines
from seqjudge.outputs.streams import byte_writer
from seqjudge.outputs.textview import Totals, trace_line, violation_block
from seqjudge.report import Report
from seqjudge.trace import PlainTrace, Trace


def deferred_note(totals: Totals) -> str | None:
    """What the engine left to the judge, said in every format (None when nothing was deferred)."""
    if not totals.deferred:
        return None
    return (
        f"{sum(totals.deferred.values())} judge-rule decision(s) deferred: run `seqjudge judge` "
        "or `seqjudge run` with a model to decide them."
    )


class CheckOutput:
    models: ClassVar[bool] = False
    lines: ClassVar[bool] = False

    def __init__(self, out: IO[str], *, source: str) -> None:
        self.out = out
        self.source = source  # the TRACES argument: a file, a folder, or - for stdin

    def report(self, trace: Trace | PlainTrace, data: dict[str, Any]) -> None:
        raise NotImplementedError

    def line(self, checked: Checked) -> None:
        raise NotImplementedError

    def finish(self, totals: Totals) -> None:
        """Called once after the last trace."""


class TextOutput(CheckOutput):
    models = True

    def report(self, trace: Trace | PlainTrace, data: dict[str, Any]) -> None:
        assert isinstance(trace, Trace)
        report = Report.model_validate(data)
        for v in report.violations:
            self.out.write(violation_block(trace, report, v) + "\n\n")
        self.out.write(trace_line(report) + "\n")

    def finish(self, totals: Totals) -> None:
        note = deferred_note(totals)
        if note:
            self.out.write(note + "\n")
        self.out.write(totals.line() + "\n")
        for line in coverage_lines(totals.coverage):
            self.out.write(line + "\n")


class JsonOutput(CheckOutput):
    def __init__(self, out: IO[str], *, source: str) -> None:
        super().__init__(out, source=source)
        self.reports: list[dict[str, Any]] = []

    def report(self, trace: Trace | PlainTrace, data: dict[str, Any]) -> None:
        self.reports.append(data)  # already what model_dump(mode="json") of its Report gives

    def finish(self, totals: Totals) -> None:
        json.dump(
            {"summary": totals.as_dict(), "reports": self.reports}, self.out, ensure_ascii=False, indent=2
        )
        self.out.write("\n")


class JsonlOutput(CheckOutput):
    lines = True

    def __init__(self, out: IO[str], *, source: str) -> None:
        super().__init__(out, source=source)
        self._write = byte_writer(out)

    def line(self, checked: Checked) -> None:
        self._write(checked.line)
