"""``blocklist``: no call, of any status, to a tool whose name contains the pattern."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from seqjudge.rules.base import Evaluator, Ordering, RuleBase, SelectorFactory, Wording
from seqjudge.rules.evaluate import BARE_PASS, Finding, Flaw
from seqjudge.rules.evaluate import at as _at

if TYPE_CHECKING:
    from seqjudge.rules.index import View


class BlocklistRule(RuleBase):
    type: Literal["blocklist"]
    pattern: str = Field(min_length=1)

    rank = 2
    # A forbidden call is forbidden whatever came before or follows: the guard denies it.
    guard_kinds = frozenset({"forbidden_call"})
    guard_at_end = None
    operand_fields = ()  # a pattern is not a tool name

    def default_id(self) -> str:
        return f"blocklist:{self.pattern}"

    def describe(self) -> str:
        return f"no tool whose name contains {self.pattern!r} may be called"

    def requirement(self, say: Wording) -> str:
        return (
            f"No call, successful or failed, may have a tool name containing the text `{self.pattern}` "
            "(a plain, case-sensitive substring; `*` is a literal character). Violation: "
            "`forbidden_call` at the first such call."
        )

    def ordering(self) -> Ordering | None:
        return None  # orders no tools against each other

    def compile(self, c: SelectorFactory) -> Evaluator:
        return partial(blocklist, self)


def blocklist(rule: BlocklistRule, v: View) -> Finding:
    pattern = rule.pattern
    index = v.index
    if v.grouping is None:  # the whole trace
        hits: list[int] = []
        by_name = index.by_name
        # One find in the names joined (most traces call no forbidden tool): a pattern without NUL cannot
        # match across the NUL between two names, so it is in the joined text only if it is in some name.
        if "\x00" in pattern or pattern in "\x00".join(by_name):
            for name, positions in by_name.items():
                if pattern in name:
                    hits.extend(positions)
            hits.sort()
    else:
        names = index.names
        hits = [i for i in v.every_position() if pattern in names[i]]
    if not hits:
        if not v.explain:
            return BARE_PASS
        return Finding("passed", f"No tool whose name contains {pattern!r} was called.")
    f = hits[0]
    more = f" ({len(hits)} forbidden calls in all)" if len(hits) > 1 else ""
    return Finding(
        "failed",
        f"{_at(v, f)} matches the forbidden pattern {pattern!r}{more}.",
        hits,
        [
            Flaw(
                "forbidden_call",
                f,
                f"no tool whose name contains {pattern!r}",
                f"{_at(v, f)} called{more}",
                f"{_at(v, f)} is forbidden: its name contains {pattern!r}{more}.",
                f"Remove the call to {index.names[f]}; it must never be called.",
            )
        ],
    )
