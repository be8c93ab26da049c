"""What reading an input did, counted so that nothing an importer passes over goes unsaid.

The loader counts records read and traces and calls made; importers count every item they do not turn into
a call or a message, by reason (``IngestStats.skip``). ``seqjudge convert`` and ``seqjudge check -v`` print
the result with ``report``.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import IO

from seqjudge.safetext import shown


@dataclass(slots=True)
class IngestStats:
    files: int = 0
    records: int = 0
    traces: int = 0
    calls: int = 0
    uncounted: int = 0  # traces checked elsewhere (a worker process) whose calls were not counted here
    # reason -> count; a reason is a plural noun phrase ("system messages (instructions, not conversation)")
    skipped: Counter[str] = field(default_factory=Counter)
    formats: Counter[str] = field(default_factory=Counter)  # format name -> files read with it

    def skip(self, reason: str, count: int = 1) -> None:
        self.skipped[reason] += count

    def skipped_text(self, since: Counter[str] | None = None) -> str:
        """The skip counts (those added after ``since``, when given) as one phrase, biggest first."""
        counts = self.skipped - since if since is not None else +self.skipped
        if not counts:
            return "nothing skipped"
        return "skipped " + "; ".join(f"{n} {reason}" for reason, n in counts.most_common())

    def line(self) -> str:
        formats = ", ".join(
            f"{name}" + (f" x{n}" if n > 1 else "") for name, n in sorted(self.formats.items())
        )
        return (
            f"read {self.records} record(s) from {self.files} file(s)"
            + (f" ({formats})" if formats else "")
            + f": {self.traces} trace(s), {self.calls} call(s)"
            + (
                f" (not counting those of {self.uncounted} trace(s) checked by workers)"
                if self.uncounted
                else ""
            )
            + f"; {self.skipped_text()}"
        )


def report(stats: IngestStats, stream: IO[str] | None = None) -> None:
    """Print the counts on one line (stderr by default), prefixed like the loader's other notes."""
    print(shown(f"seqjudge: {stats.line()}"), file=stream if stream is not None else sys.stderr)
