"""What every rule type's evaluator returns, and the helpers they share (the evaluators themselves live with
their rule types, in ``seqjudge.rules.types``: the rule's outcome on one view of an indexed trace).

The semantics are the README's contract. Two principles run through all of them:
- obligations are met only by successful calls, while prohibitions and triggers count every attempt;
- "A precedes B" means A's step is earlier than B's, so calls in one step never precede each other.
Positions are 0-based here and in JSON; messages say "call N" 1-based, as a person counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

from seqjudge.rules.index import View

# What the engine says of a rule only the judge decides.
DEFERRED = "Written in words: only the LLM judge can decide it."


@dataclass(slots=True)
class Flaw:
    """A violation before it is stamped with the rule's id, description and severity."""

    type: str
    offending: int | None
    expected: str
    actual: str
    explanation: str
    suggestion: str
    missing: tuple[str, str, int, str] | None = None  # required, dependent, dependent index, impact


@dataclass(slots=True)
class Finding:
    outcome: str  # passed | failed | not_exercised
    explanation: str
    call_indices: list[int] = field(default_factory=list)
    flaws: list[Flaw] = field(default_factory=list)
    details: dict[str, Any] | None = None


# A pass the report will not explain (``View.explain`` is False: a lean report's passed rule, a ``same:``
# group's pass that is only counted): returned instead of building an explanation nobody reads. Shared, so
# never changed.
BARE_PASS = Finding("passed", "")


@cache
def never_called(text: str) -> Finding:
    """The finding of a rule whose trigger ``text`` is never called: the same each time, so built once
    (shared, so never changed)."""
    return Finding("not_exercised", f"{text} is never called.")


def at(v: View, i: int) -> str:
    return f"{v.index.names[i]} (call {i + 1})"


def ats(v: View, positions: list[int]) -> list[str]:
    """``at`` of each position, in one comprehension rather than a call a position."""
    names = v.index.names
    out = []
    for i in positions:  # (a loop: a comprehension would be a second call)
        out.append(f"{names[i]} (call {i + 1})")
    return out


def name(v: View, i: int) -> str:
    return v.index.names[i]


def failed_note(v: View, every: list[int], limit: int | None = None) -> str:
    if not every or v.index.ok_by_name is v.index.by_name:
        return ""  # no call, or no failed call in the whole trace (TraceIndex): no comprehension's call
    failed = [i for i in every if not v.index.ok[i] and (limit is None or i < limit)]
    if not failed:
        return ""
    where = ", ".join(str(i + 1) for i in failed[:5]) + (" ..." if len(failed) > 5 else "")
    return f" It was attempted but failed (call {where}), and a failed call does not count."
