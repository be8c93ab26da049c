"""A session's calls as an index the engine's evaluators read, growing (and shrinking) a call at a time.

The guard keeps one for the session and, for a rule the session already broke, one of its own without the
calls that broke it (``seqjudge.guard.aside``): both append a call, let the evaluators read it, and take the
proposed call back the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from seqjudge.rules.index import Grouping, TraceIndex
from seqjudge.rules.select import Selector
from seqjudge.trace import Call, Trace


class Calls:
    """``trace`` (its calls the index's, in order; lineage rules read their outputs) and its index, with the
    ``same:`` groupings asked for so far, grown with it."""

    def __init__(self, trace: Trace, singles: Sequence[tuple[Selector, str]]) -> None:
        self.trace = trace
        self.index = TraceIndex([], [], [], [], singles)
        self.index.source = trace
        self.groupings: dict[tuple[str, ...], Grouping] = {}

    def next_step(self, same_step: bool) -> int:
        """The step of a call after the last: a step of its own, or the last call's (run in parallel)."""
        last = self.index.steps[-1] if self.index.n else -1
        return last if same_step and last >= 0 else last + 1

    def append(self, call: Call, step: int) -> int:
        """Add ``call`` in ``step`` at the end; its position."""
        self.trace.calls.append(call)  # first: the lineage sources read the call's output from the trace
        try:
            i = self.index.append(call.tool_name, call.status == "ok", call.arguments, step)
        except BaseException:
            self.trace.calls.pop()
            raise
        for grouping in self.groupings.values():
            grouping.added(i)
        return i

    def pop(self) -> None:
        """Remove the last call (``append`` undone)."""
        i = self.index.n - 1
        for grouping in self.groupings.values():
            grouping.removed(i)
        self.index.pop()
        self.trace.calls.pop()

    def grouping(self, keys: tuple[str, ...]) -> Grouping:
        """The calls grouped by ``keys`` (a ``same:`` list), grown with them."""
        grouping = self.groupings.get(keys)
        if grouping is None:
            grouping = self.groupings[keys] = Grouping(self.index, keys)
        return grouping
