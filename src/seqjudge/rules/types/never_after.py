"""``never_after``: once ``trigger`` has been called, no ``forbidden`` call in a later step."""

from __future__ import annotations

from bisect import bisect_right
from functools import partial
from typing import TYPE_CHECKING, Literal

from pydantic import field_validator

from seqjudge.rules.base import (
    Evaluator,
    Operand,
    Ordering,
    RuleBase,
    SameMixin,
    SelectorFactory,
    Wording,
    check_operand,
    operand_text,
)
from seqjudge.rules.evaluate import BARE_PASS, Finding, Flaw, never_called
from seqjudge.rules.evaluate import at as _at
from seqjudge.rules.evaluate import name as _name

if TYPE_CHECKING:
    from seqjudge.rules.index import View
    from seqjudge.rules.select import Selector


class NeverAfterRule(SameMixin, RuleBase):
    type: Literal["never_after"]
    trigger: Operand
    forbidden: Operand

    rank = 5
    # A forbidden call after the trigger is known when it is proposed: the guard denies it.
    guard_kinds = frozenset({"forbidden_call"})
    guard_at_end = None
    guard_operand = "forbidden"
    operand_fields = ("trigger", "forbidden")

    _v = field_validator("trigger", "forbidden")(lambda cls, v: check_operand(v))

    def default_id(self) -> str:
        return f"never_after:{operand_text(self.trigger)}!>{operand_text(self.forbidden)}"

    def describe(self) -> str:
        return f"{operand_text(self.forbidden)} must never be called after {operand_text(self.trigger)}"

    def requirement(self, say: Wording) -> str:
        w = say.words
        return (
            f"Once {w(self.trigger)} has been called (its first call, any status), no call to "
            f"{w(self.forbidden)} (any status) may come in a later step. Not checked if "
            f"{w(self.trigger)} is never called. Violation: `forbidden_call` at the first such call."
        )

    def ordering(self) -> Ordering | None:
        return None  # orders no tools against each other

    def compile(self, c: SelectorFactory) -> Evaluator:
        return partial(never_after, self, c(self.trigger), c(self.forbidden))


def never_after(rule: NeverAfterRule, trigger: Selector, forbidden: Selector, v: View) -> Finding:
    trig_all, _ = v.positions(trigger)
    if not trig_all:
        return never_called(trigger.text)
    a = trig_all[0]
    steps = v.index.steps
    forb_all, _ = v.positions(forbidden)
    # The first forbidden call after the trigger's step (steps never decrease along positions).
    k = bisect_right(forb_all, a)
    while k < len(forb_all) and steps[forb_all[k]] <= steps[a]:
        k += 1
    if k == len(forb_all):
        if not v.explain:
            return BARE_PASS
        return Finding("passed", f"Nothing forbidden follows {_at(v, a)}.", [a])
    f = forb_all[k]
    at_a, at_f = _at(v, a), _at(v, f)  # each named in three texts: formatted once
    return Finding(
        "failed",
        f"{at_f} came after {at_a}.",
        [a, f],
        [
            Flaw(
                "forbidden_call",
                f,
                f"no {forbidden.text} after {trigger.text}",
                f"{at_a}, then {at_f}",
                f"{at_f} is forbidden once {trigger.text} has been called ({at_a}).",
                f"Do not call {_name(v, f)} after {_name(v, a)}; move it before call {a + 1} or drop it.",
            )
        ],
    )
