"""``sequence``: the tools succeed in this order (``strict``: with nothing else in between)."""

from __future__ import annotations

from bisect import bisect_right
from functools import partial
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator

from seqjudge.rules.base import (
    Evaluator,
    Operand,
    Ordering,
    Pointless,
    RuleBase,
    SameMixin,
    SelectorFactory,
    Wording,
    check_operand,
    never_met,
    operand_text,
)
from seqjudge.rules.evaluate import BARE_PASS, Finding, Flaw
from seqjudge.rules.evaluate import at as _at
from seqjudge.rules.evaluate import ats as _ats

if TYPE_CHECKING:
    from seqjudge.rules.index import View
    from seqjudge.rules.select import Selector


class SequenceRule(SameMixin, RuleBase):
    type: Literal["sequence"]
    tools: list[Operand] = Field(min_length=2)
    strict: bool = False

    rank = 7
    # A call that breaks the order is known when proposed; whether the sequence completes, only at the end.
    guard_kinds = frozenset({"out_of_order"})
    guard_at_end = "whether the sequence is completed"
    operand_fields = ()
    operand_list_fields = ("tools",)

    @field_validator("tools")
    @classmethod
    def _ops(cls, value: list[Operand]) -> list[Operand]:
        for op in value:
            check_operand(op)
        return value

    def pointless(self, aliases: dict[str, list[str]]) -> list[Pointless]:
        out = super().pointless(aliases)
        for i, member in enumerate(self.tools):
            out += never_met(("tools", i), member, "to progress through a sequence")
        return out

    def default_id(self) -> str:
        return "sequence:" + ">".join(operand_text(t) for t in self.tools)

    def describe(self) -> str:
        order = " consecutively" if self.strict else " in order"
        return " -> ".join(operand_text(x) for x in self.tools) + order

    def requirement(self, say: Wording) -> str:
        w = say.words
        names = ", then ".join(w(t) for t in self.tools)
        if self.strict:
            return (
                f"Strict sequence: {names}. Calls before the first successful {w(self.tools[0])} "
                "are ignored. Not checked if it never succeeds. After it, every following call must "
                "be the next tool of the sequence, each in a later step, with nothing else in between "
                "(a failed attempt of the awaited tool waits for its retry). Violation: `out_of_order` "
                "at the first call that is not the awaited tool, `incomplete_sequence` if the trace "
                "ends before the last tool succeeded."
            )
        return (
            f"Sequence: {names} must succeed in this order, each in a later step than the previous "
            "one; other calls may come in between and repeats of tools already reached are ignored. "
            "Not checked if none of them is called. Violation: `out_of_order` when a later tool of "
            "the sequence is called (any status) before its predecessors succeeded, or succeeds in "
            "the same step as its predecessor; `incomplete_sequence` (at the last completed call) if "
            "the trace ends before the last tool succeeded."
        )

    def ordering(self) -> Ordering | None:
        return ("chain", list(self.tools), self.strict)

    def walks_group(self) -> bool:
        return self.strict  # a strict sequence reads every call after its start

    def compile(self, c: SelectorFactory) -> Evaluator:
        sels = [c(x) for x in self.tools]
        # Members named by tool alone (the common shape): which members a call matches depends on its name
        # only, so it is looked up instead of asking every member's selector about every call.
        by_name: dict[str, list[int]] | None = None
        if not any(sel.conditions for sel in sels):
            by_name = {}
            for m, sel in enumerate(sels):
                for name in sel.names:
                    by_name.setdefault(name, []).append(m)
        names = " -> ".join(s.text for s in sels)
        expected = names + (" consecutively" if self.strict else " in this order")
        return partial(sequence, self, sels, by_name, (names, expected))


def sequence(
    rule: SequenceRule,
    sels: list[Selector],
    members_by_name: dict[str, list[int]] | None,
    texts: tuple[str, str],  # the members in words, and what is expected of them
    v: View,
) -> Finding:
    index = v.index
    tools, ok, args, steps = index.names, index.ok, index.args, index.steps
    k = len(sels)
    names, expected = texts
    if rule.strict:
        _, first_ok = v.positions(sels[0])
        if not first_ok:
            return Finding("not_exercised", f"{sels[0].text} never succeeded, so the sequence never started.")
        start = first_ok[0]
        done: list[int] = [start]
        r = 1
        walk = v.every_position()
        begin = bisect_right(walk, start) if isinstance(walk, list) else start + 1
        for pos in range(begin, len(walk)):
            if r == k:
                break
            i = walk[pos]
            # Members named by tool alone: a name lookup, not a call to the selector.
            if (
                tools[i] in sels[r].names
                if members_by_name is not None
                else sels[r].hit(tools[i], ok[i], args[i])
            ):
                if not ok[i]:
                    continue  # a failed attempt of the awaited tool waits for its retry
                if steps[i] > steps[done[-1]]:
                    done.append(i)
                    r += 1
                    continue
            return _sequence_break(v, sels, r, i, done, expected, strict=True)
        return _sequence_end(v, sels, r, done, expected)
    # Non-strict: walk only the calls that match a member.
    member_positions: list[int] = []
    for s in sels:
        member_positions.extend(v.positions(s)[0])
    if not member_positions:
        return Finding("not_exercised", f"None of {names} is called.")
    member_positions = sorted(set(member_positions))
    done = []
    r = 0
    for i in member_positions:
        if r == k:
            break
        ms = (
            members_by_name[tools[i]]
            if members_by_name is not None
            else [m for m, s in enumerate(sels) if s.hit(tools[i], ok[i], args[i])]
        )
        if r in ms:
            if not ok[i]:
                continue
            if not done or steps[i] > steps[done[-1]]:
                done.append(i)
                r += 1
                continue
            return _sequence_break(v, sels, r, i, done, expected, strict=False)
        if ms and ms[0] < r:  # (ms ascends)
            continue  # a repeat of a step already reached
        return _sequence_break(v, sels, r, i, done, expected, strict=False)
    return _sequence_end(v, sels, r, done, expected)


def _sequence_break(
    v: View, sels: list[Selector], r: int, i: int, done: list[int], expected: str, *, strict: bool
) -> Finding:
    awaited = sels[r].text
    got = _at(v, i)
    steps = v.index.steps
    if done and steps[i] == steps[done[-1]] and v.index.matching(sels[r], i):
        why = f"{got} ran in the same step as {_at(v, done[-1])}, so it does not follow it"
    elif strict:
        why = f"{got} came while {awaited} was awaited next"
    else:
        why = f"{got} was called before {awaited} succeeded"
    why += "."
    return Finding(
        "failed",
        why,
        [*done, i],
        [
            Flaw(
                "out_of_order",
                i,
                expected,
                f"{' -> '.join(_ats(v, done)) or 'nothing'}, then {got}",
                why,
                f"Call {sels[r].tools} (successfully) before {got}"
                + (", with nothing in between." if strict else "."),
            )
        ],
    )


def _sequence_end(v: View, sels: list[Selector], r: int, done: list[int], expected: str) -> Finding:
    if r == len(sels):
        if not v.explain:
            return BARE_PASS
        return Finding("passed", "Completed: " + ", ".join(_at(v, d) for d in done) + ".", done)
    awaited = sels[r].text
    if not done:
        # Only failed attempts of the first member: exercised, never started.
        tried = v.positions(sels[0])[0]
        return Finding(
            "failed",
            f"{awaited} was attempted but never succeeded, so the sequence never got going.",
            list(tried),
            [
                Flaw(
                    "incomplete_sequence",
                    tried[0] if tried else None,
                    expected,
                    f"{awaited} only failed",
                    f"The sequence was attempted but {awaited} never succeeded.",
                    f"Make {sels[r].tools} succeed, then continue the sequence.",
                )
            ],
        )
    last = done[-1]
    ats = _ats(v, done)
    at_last = ats[-1]
    return Finding(
        "failed",
        f"The sequence stopped after {at_last}; {awaited} never followed.",
        done,
        [
            Flaw(
                "incomplete_sequence",
                last,
                expected,
                " -> ".join(ats) + f", then no successful {awaited}",
                f"The sequence started but was not completed: {awaited} never followed {at_last}.",
                f"Complete the sequence: call {sels[r].tools} after {at_last}.",
            )
        ],
    )
