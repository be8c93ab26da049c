"""The progress bar of `seqjudge run`: traces done (of how many), failures, tokens, cost, time left.

Shown only when standard output is a terminal: piped output, CI logs and tests stay clean. It is transient
(it disappears when the run ends) so the summary that follows reads the same with or without it.
"""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def progress_wanted(stream: Any = None) -> bool:
    stream = stream if stream is not None else sys.stdout
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class RunProgress:
    """``with RunProgress(total) as bar: ... bar.update(summary)``; does nothing when not ``enabled``."""

    def __init__(self, total: int | None, *, enabled: bool | None = None, already: int = 0) -> None:
        self.enabled = progress_wanted() if enabled is None else enabled
        self.already = already  # traces stored before this invocation (a resumed run): the bar starts there
        self._progress: Progress | None = None
        self._task: Any = None
        self.total = total

    def __enter__(self) -> RunProgress:
        if not self.enabled:
            return self
        counted = MofNCompleteColumn() if self.total is not None else TextColumn("{task.completed} traces")
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]judging"),
            BarColumn(),
            counted,
            TextColumn("· {task.fields[failures]}"),
            TextColumn("· {task.fields[tokens]} tokens"),
            TextColumn("· {task.fields[cost]}"),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
            console=Console(file=sys.stdout),
            transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task(
            "run", total=self.total, completed=self.already, failures="0 failed", tokens="0", cost="$0.00"
        )
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def update(self, summary: Any) -> None:
        if self._progress is None:
            return
        unscored = summary.judge_status.get("unscored", 0)
        failures = f"{summary.verdicts['fail']} failed"
        if unscored:
            failures += f", {unscored} unscored"
        tokens = summary.tokens
        cost = summary.cost_totals()
        self._progress.update(
            self._task,
            completed=summary.traces,
            failures=failures,
            tokens=f"{tokens['input'] + tokens['output']:,}",
            cost=f"${cost['usd']:.2f}" if cost else "cost n/a",
        )
