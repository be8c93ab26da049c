"""``trajectory``: the successful calls against an expected list of tools, in one of four modes."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from seqjudge.rules.base import Evaluator, Ordering, RuleBase, SelectorFactory, Wording
from seqjudge.rules.evaluate import BARE_PASS, Finding, Flaw
from seqjudge.rules.evaluate import at as _at

if TYPE_CHECKING:
    from seqjudge.rules.index import View


class TrajectoryRule(RuleBase):
    type: Literal["trajectory"]
    expected: list[str] = Field(min_length=1)
    mode: Literal["precedence", "in_order", "any_order", "exact"] = "precedence"

    rank = 8
    guard_kinds = frozenset()
    guard_at_end = "it compares the whole list of successful calls with the expected one"
    operand_fields = ()
    operand_list_fields = ("expected",)

    @field_validator("expected")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        if any(not v for v in value):
            raise ValueError("expected tool names must be non-empty")
        return value

    def default_id(self) -> str:
        return "trajectory:" + ">".join(self.expected)

    def describe(self) -> str:
        return f"trajectory {' -> '.join(self.expected)} ({self.mode})"

    def requirement(self, say: Wording) -> str:
        names = ", ".join(f"`{t}`" for t in self.expected)
        text = {
            "precedence": f"Each of {names} must have a successful call, and none may be out of order: "
            "for a tool X listed before a tool Y, the first call to Y (any status) must come "
            "in a later step than the first successful X. Extra calls and repeats are "
            "allowed.",
            "in_order": f"The successful calls must contain {names} in this order (other calls may come "
            "in between).",
            "any_order": f"The successful calls must include {names} (each as often as listed), in any "
            "order.",
            "exact": f"The tool names of the successful calls, in order, must be exactly {names}.",
        }[self.mode]
        return text + " Violation: `missing_call` for tools that never succeed, `out_of_order` otherwise."

    def ordering(self) -> Ordering | None:
        return None if self.mode == "any_order" else ("chain", list(self.expected), self.mode == "in_order")

    def compile(self, c: SelectorFactory) -> Evaluator:
        want: dict[str, int] = {}  # each expected tool, and how often it is expected
        for name in self.expected:
            want[name] = want.get(name, 0) + 1
        order = list(want)
        rank = {name: r for r, name in enumerate(order)}  # (for _inverted_pairs: the same every trace)
        return partial(trajectory, self, want, " -> ".join(self.expected), (order, rank))


def trajectory(
    rule: TrajectoryRule,
    want: dict[str, int],
    exp_text: str,
    ranked: tuple[list[str], dict[str, int]],
    v: View,
) -> Finding:
    index = v.index
    steps = index.steps
    expected = rule.expected
    by_name, ok_by_name = index.by_name, index.ok_by_name
    # Everything below reads the per-name position lists; only `exact` may need the whole ok-call list.
    # One loop over the expected tools (a few), not a comprehension (a call) per figure.
    have: dict[str, int] = {}
    first_any: dict[str, int] = {}
    first_ok: dict[str, int] = {}
    missing: list[str] = []
    precedence = rule.mode == "precedence"
    for n, k in want.items():
        oks = ok_by_name.get(n)
        if oks:
            first_ok[n] = oks[0]
            h = have[n] = len(oks)
        else:
            h = have[n] = 0
        if n in by_name:
            first_any[n] = by_name[n][0]
        if precedence:
            if not h:
                missing.append(n)  # precedence asks for each tool once; a repeat adds no requirement
        elif k > h:
            missing += [n] * (k - h)  # each tool as often as `expected` asks for it beyond its successes
    missing.sort()
    extra = sorted(by_name.keys() - want.keys())
    pairs = _inverted_pairs(*ranked, first_any, first_ok, steps)
    n_ok = sum(map(len, ok_by_name.values()))
    same_order = n_ok == len(expected) and _ok_names(index) == expected
    details: dict[str, Any] = {
        "mode": rule.mode,
        "missing": missing,
        "extra": extra,
        "out_of_order_pairs": [list(p) for p in pairs] if pairs else [],
        "same_set": not missing and not extra and all(have.values()),
        "same_order": same_order,
    }
    flaws: list[Flaw] = []
    if missing:
        named = ", ".join(missing)
        flaws.append(
            Flaw(
                "missing_call",
                None,
                exp_text,
                "missing: " + named,
                f"Expected tool(s) never succeeded: {named}.",
                f"Add successful call(s) to {named}.",
            )
        )
    mode = rule.mode
    if mode == "precedence":
        if pairs:
            x, y = pairs[0]
            at = first_any[y]
            flaws.append(
                Flaw(
                    "out_of_order",
                    at,
                    exp_text,
                    f"{y} (call {at + 1}) ran before a successful {x}",
                    f"{len(pairs)} pair(s) out of order; first: {x} must precede {y}.",
                    f"Call {x} before {y}.",
                )
            )
    elif mode == "in_order":
        matched, last = _subsequence_prefix(expected, index.ok_by_name, steps)
        if matched < len(expected) and not missing:
            nxt = expected[matched]
            flaws.append(
                Flaw(
                    "out_of_order",
                    first_any.get(nxt, last),
                    exp_text,
                    f"{matched} expected tool(s) in order, then no successful {nxt} after them",
                    f"The expected tools are present but not in order: after {matched} in order, "
                    f"{nxt} never follows.",
                    f"Call {nxt} after {expected[matched - 1]}." if matched else f"Call {nxt} first.",
                )
            )
    elif mode == "exact" and not same_order and not missing:
        ok_pos = [i for i in v.every_position() if index.ok[i]]
        ok_names = [index.names[i] for i in ok_pos]
        diverge = next(
            (j for j, (a, b) in enumerate(zip(ok_names, expected, strict=False)) if a != b),
            min(len(ok_names), len(expected)),
        )
        where: int | None = ok_pos[diverge] if diverge < len(ok_pos) else None
        kind = (
            "forbidden_call" if len(ok_names) > len(expected) and diverge == len(expected) else "out_of_order"
        )
        flaws.append(
            Flaw(
                kind,
                where,
                exp_text,
                " -> ".join(ok_names[:50]) + (" …" if len(ok_names) > 50 else ""),
                "The successful calls first differ from the expected trajectory "
                + (f"at {_at(v, where)}." if where is not None else "where they end, short of it."),
                "Make the successful calls exactly: " + exp_text + ".",
            )
        )
    if not flaws:
        if not v.explain:
            return BARE_PASS
        return Finding("passed", f"Trajectory matches ({mode}).", sorted(first_ok.values()), details=details)
    involved = set(first_any.values())
    for f in flaws:
        if f.offending is not None:
            involved.add(f.offending)
    text = flaws[0].explanation if len(flaws) == 1 else " ".join([f.explanation for f in flaws])
    return Finding("failed", text, sorted(involved), flaws, details)


def _ok_names(index: Any) -> list[str]:
    return [name for name, good in zip(index.names, index.ok, strict=True) if good]


def _subsequence_prefix(
    expected: list[str], ok_by_name: dict[str, list[int]], steps: list[int]
) -> tuple[int, int | None]:
    """How many of ``expected`` succeed in order (each in a later step than the previous), and where the
    last matched one is. Greedy earliest matching is optimal for a subsequence test; bisect keeps it
    O(k log n)."""
    matched = 0
    last: int | None = None
    for name in expected:
        positions = ok_by_name.get(name, [])
        k = 0 if last is None else bisect_right(positions, last)
        while k < len(positions) and last is not None and steps[positions[k]] <= steps[last]:
            k += 1
        if k == len(positions):
            break
        last = positions[k]
        matched += 1
    return matched, last


def _inverted_pairs(
    order: list[str],
    rank: dict[str, int],
    first_any: dict[str, int],
    first_ok: dict[str, int],
    steps: list[int],
) -> list[tuple[str, str]]:
    """Pairs (x, y), x before y in ``order``, where y was attempted before x succeeded in an earlier step.

    One sweep over the tools sorted by step, with the ranks of the tools not yet available kept sorted:
    O(k log k) plus the pairs found, instead of testing all k^2 pairs. Tools that never succeed (as x) or
    are never attempted (as y) are reported as missing, not as pairs.
    """
    events: list[tuple[int, int, str]] = []
    for name in order:
        if name in first_any:
            events.append((steps[first_any[name]], 0, name))  # y attempted in this step
        if name in first_ok:
            events.append((steps[first_ok[name]], 1, name))  # x available after this step
    # Within one step attempts come first: a success in the same step does not precede.
    events.sort()
    pending: list[int] = []  # (ranks ascend along `order`; a loop, not a comprehension's call)
    for r, n in enumerate(order):
        if n in first_ok:
            pending.append(r)
    pairs: list[tuple[str, str]] = []
    for _, kind, name in events:
        r = rank[name]
        if kind == 0:
            for x in pending[: bisect_left(pending, r)]:
                pairs.append((order[x], name))
        else:
            del pending[bisect_left(pending, r)]
    return pairs
