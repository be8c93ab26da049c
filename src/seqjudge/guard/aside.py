"""A rule the session already broke, decided as if the calls that broke it had not run.

The engine reports a rule's first violation, so once a call broke a rule (a call the guard was not asked
about, or one run past a fail-open decision, in shadow mode, by a host that overrode a deny, or in a history
given at the session's start) a repeat is not a violation "at" the proposed call, and the guard would let a
second blocklisted call through. For such a rule the guard keeps the session's calls without those that broke
it (that rule's only: another rule still sees them, a prerequisite they met say): the calls the rule flagged
are set aside one by one, in order, until the rule holds on the rest (or only what the engine cannot settle
remains), and the proposed call is decided on that, by the engine's evaluator as before. The calls are read
in order and each is set aside when the rule flags it among those kept before it: the same as setting aside
the first violation again and again, since a look-back violation at a call depends only on the calls before
it. Only broken rules pay for it: a second index of the session's calls, grown with the session, each new
call evaluated once (and, at the start, every call from the rule's first violation on).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Sequence

from seqjudge.guard.calls import Calls
from seqjudge.guard.decision import RuleDecision
from seqjudge.rules.select import Selector
from seqjudge.trace import Trace

# "call 5", "calls 2, 7": how messages number calls (``seqjudge.rules.evaluate``: 1-based positions).
_NUMBERED = re.compile(r"\b(calls? )(\d+(?:, \d+)*)")
_NAMED = 5  # earlier violations a message names by number


class SetAside:
    """One broken rule's view of the session: its calls but those that broke the rule, steps numbered
    afresh from 0 as the engine numbers a trace without them (``trace.assign_steps``)."""

    def __init__(
        self,
        session: Calls,
        singles: Sequence[tuple[Selector, str]],
        flagged: Callable[[Calls, int], bool],
        clean: int,
    ) -> None:
        """``flagged``: whether the rule has a look-back violation at a call of a ``Calls`` (the last);
        ``clean``: the session's calls before this position hold for the rule (its first violation);
        ``singles``: the engine's (``TraceIndex``)."""
        trace = session.trace
        own = Trace(
            trace_id=trace.trace_id,
            calls=[],
            messages=list(trace.messages),
            context=trace.context,
            metadata=trace.metadata,
        )
        self.session = session
        self.calls = Calls(own, singles)
        self.flagged = flagged
        self.kept: list[int] = []  # the session's position of each of this view's calls
        self.aside: list[int] = []  # the session's calls set aside, in order
        self.upto = 0  # the session's calls read so far
        self._said: list[int] = []  # the calls set aside when ``_earlier`` was worded
        self._earlier = ""
        self._read(clean, check=False)  # (the calls before the rule's first violation hold)

    def catch_up(self) -> None:
        """Read the calls the session recorded since, setting aside each one the rule flags."""
        self._read(self.session.index.n, check=True)

    def _read(self, upto: int, check: bool) -> None:
        session = self.session
        for p in range(self.upto, upto):
            i = self.calls.append(session.trace.calls[p], self.step_for(session.index.steps[p]))
            try:
                flagged = check and self.flagged(self.calls, i)
            except BaseException:
                self.calls.pop()  # (read again at the next decision)
                raise
            if flagged:
                self.calls.pop()
                self.aside.append(p)
                self._move_messages()
            else:
                self.kept.append(p)
            self.upto = p + 1

    def _move_messages(self) -> None:
        """Keep each message after the calls it followed in the session: a message after ``k`` of the
        session's calls follows ``k`` less those set aside before it here (lineage rules read user messages
        by the calls made before them)."""
        messages = self.session.trace.messages
        if not messages:
            return
        aside = self.aside
        self.calls.trace.messages = [
            m if m.at is None else m.model_copy(update={"at": m.at - bisect_left(aside, m.at)})
            for m in messages
        ]
        self.calls.index.messages_moved()

    def step_for(self, step: int) -> int:
        """This view's step for a call after its calls that is in the session's step ``step``."""
        if not self.kept:
            return 0
        last = self.calls.index.steps[-1]
        return last if self.session.index.steps[self.kept[-1]] == step else last + 1

    def told(self, decision: RuleDecision) -> RuleDecision:
        """``decision`` (on this view, the proposed call last) as the session's: its calls numbered as the
        session's, and the calls that broke the rule named."""
        if len(self._said) != len(self.aside):  # (worded again only when another call was set aside)
            where = ", ".join(str(p + 1) for p in self.aside[:_NAMED])
            if len(self.aside) > _NAMED:
                where += f" and {len(self.aside) - _NAMED} more"
            plural = "s" if len(self.aside) > 1 else ""
            self._said = self.aside[:]
            self._earlier = f"already broke this rule at call{plural} {where}"
        if decision.outcome == "allow" and decision.message == "holds":
            message = f"holds for this call; the session {self._earlier} (finish() reports it)"
            return RuleDecision(decision.rule_id, "allow", message)
        kept, n = self.kept, self.session.index.n  # (the proposed call follows the session's calls)

        def renumber(m: re.Match[str]) -> str:
            out = []
            for text in m.group(2).split(", "):
                k = int(text) - 1
                out.append(str((kept[k] if k < len(kept) else n if k == len(kept) else k) + 1))
            return m.group(1) + ", ".join(out)

        message = f"{_NUMBERED.sub(renumber, decision.message)} The session {self._earlier}."
        suggestion = None if decision.suggestion is None else _NUMBERED.sub(renumber, decision.suggestion)
        return RuleDecision(decision.rule_id, decision.outcome, message, suggestion)
