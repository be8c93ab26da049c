"""One function per rule type: the rule's outcome on one view of an indexed trace.

The semantics are the README's contract. Two principles run through all of them:
- obligations are met only by successful calls, while prohibitions and triggers count every attempt;
- "A precedes B" means A's step is earlier than B's, so calls in one step never precede each other.
Positions are 0-based here and in JSON; messages say "call N" 1-based, as a person counts.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any

from seqjudge.rules.index import View
from seqjudge.rules.model import (
    AfterRule,
    BeforeRule,
    BlocklistRule,
    EventuallyRule,
    JudgeRule,
    MaxCallsRule,
    NeverAfterRule,
    RequireRule,
    SequenceRule,
    TrajectoryRule,
)
from seqjudge.rules.select import Selector


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


def _at(v: View, i: int) -> str:
    return f"{v.index.names[i]} (call {i + 1})"


def _name(v: View, i: int) -> str:
    return v.index.names[i]


def _first_ok_before(ok_positions: list[int], steps: list[int], step: int) -> int | None:
    """The first successful position whose step is earlier than ``step`` (steps never decrease)."""
    if ok_positions and steps[ok_positions[0]] < step:
        return ok_positions[0]
    return None


def _failed_note(v: View, every: list[int], limit: int | None = None) -> str:
    failed = [i for i in every if not v.index.ok[i] and (limit is None or i < limit)]
    if not failed:
        return ""
    where = ", ".join(str(i + 1) for i in failed[:5]) + (" ..." if len(failed) > 5 else "")
    return f" It was attempted but failed (call {where}), and a failed call does not count."


def require(rule: RequireRule, sel: Selector, v: View) -> Finding:
    every, ok = v.positions(sel)
    if ok:
        return Finding("passed", f"{_at(v, ok[0])} succeeded.", [ok[0]])
    note = _failed_note(v, every)
    return Finding(
        "failed",
        f"No successful call to {sel.text}.{note}",
        list(every),
        [
            Flaw(
                "missing_call",
                None,
                f"at least one successful call to {sel.text}",
                f"{sel.text} never succeeded" if every else f"{sel.text} never called",
                f"The trace never calls {sel.text} successfully.{note}",
                f"Add a successful {sel.text} call.",
            )
        ],
    )


def before(rule: BeforeRule, first: Selector, then: Selector, v: View) -> Finding:
    then_all, _ = v.positions(then)
    if not then_all:
        return Finding("not_exercised", f"{then.text} is never called.")
    t = then_all[0]
    steps = v.index.steps
    first_all, first_ok = v.positions(first)
    p = _first_ok_before(first_ok, steps, steps[t])
    expected = f"{first.text} before {then.text}"
    if p is not None:
        return Finding("passed", f"{_at(v, p)} precedes {_at(v, t)}.", [p, t])
    if first_ok:
        q = first_ok[0]
        how = "in the same step as" if steps[q] == steps[t] else "only after"
        return Finding(
            "failed",
            f"{first.text} succeeded {how} {_at(v, t)}.",
            [t, q],
            [
                Flaw(
                    "out_of_order",
                    t,
                    expected,
                    f"{_name(v, t)} called at position {t + 1}, {_name(v, q)} {how.replace(' as', '')} it "
                    f"(position {q + 1})",
                    f"{_at(v, t)} ran before any successful {first.text}; {_at(v, q)} came {how} it.",
                    f"Move the {first.text} call before {then.text} (call {t + 1}).",
                )
            ],
        )
    note = _failed_note(v, first_all, t)
    actual = f"{_name(v, t)} called at position {t + 1}, but {first.text} " + (
        "only failed before it" if note else "never called"
    )
    return Finding(
        "failed",
        f"{_at(v, t)} has no successful {first.text} before it.{note}",
        [t, *first_all],
        [
            Flaw(
                "missing_prerequisite",
                t,
                expected,
                actual,
                f"{_at(v, t)} ran without a successful {first.text} before it.{note}",
                f"Add a successful {first.text} call before {then.text} (call {t + 1}).",
                (first.text, then.text, t, f"{then.text} ran on an unmet prerequisite"),
            )
        ],
    )


def blocklist(rule: BlocklistRule, v: View) -> Finding:
    pattern = rule.pattern
    index = v.index
    if v.members is None:
        hits: list[int] = []
        for name, positions in index.by_name.items():
            if pattern in name:
                hits.extend(positions)
        hits.sort()
    else:
        names = index.names
        hits = [i for i in v.members if pattern in names[i]]
    if not hits:
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
                f"{index.names[f]} called at position {f + 1}{more}",
                f"{_at(v, f)} is forbidden: its name contains {pattern!r}{more}.",
                f"Remove the call to {index.names[f]}; it must never be called.",
            )
        ],
    )


def max_calls(rule: MaxCallsRule, sel: Selector, v: View) -> Finding:
    every, _ = v.positions(sel)
    limit = rule.max
    if len(every) <= limit:
        return Finding(
            "passed", f"{sel.text} called {len(every)} time(s), at most {limit} allowed.", list(every)
        )
    over = every[limit]
    return Finding(
        "failed",
        f"{sel.text} called {len(every)} times; at most {limit} allowed.",
        list(every),
        [
            Flaw(
                "too_many_calls",
                over,
                f"{sel.text} at most {limit} time(s)",
                f"{sel.text} called {len(every)} times; call {over + 1} is number {limit + 1}",
                f"{_at(v, over)} exceeds the limit of {limit} call(s) to {sel.text}.",
                (
                    "Do not call " + sel.text + " at all."
                    if limit == 0
                    else f"Call {sel.text} at most {limit} time(s); combine the calls or drop the repeats."
                ),
            )
        ],
    )


def eventually(rule: EventuallyRule, sel: Selector, v: View) -> Finding:
    every, ok = v.positions(sel)
    steps = v.index.steps
    within = rule.within
    expected = f"a successful {sel.text} within the first {within} step(s)"
    if ok and steps[ok[0]] < within:
        return Finding("passed", f"{_at(v, ok[0])} succeeded in step {steps[ok[0]] + 1}.", [ok[0]])
    if ok:
        p = ok[0]
        return Finding(
            "failed",
            f"{sel.text} first succeeded in step {steps[p] + 1}, after the deadline of {within}.",
            [p],
            [
                Flaw(
                    "deadline_missed",
                    p,
                    expected,
                    f"{sel.text} first succeeded at step {steps[p] + 1}",
                    f"{_at(v, p)} came too late: it had to succeed within {within} step(s).",
                    f"Call {sel.text} earlier, within the first {within} step(s).",
                )
            ],
        )
    note = _failed_note(v, every)
    return Finding(
        "failed",
        f"{sel.text} never succeeded.{note}",
        list(every),
        [
            Flaw(
                "missing_call",
                None,
                expected,
                f"{sel.text} never succeeded" if every else f"{sel.text} never called",
                f"The trace never calls {sel.text} successfully.{note}",
                f"Call {sel.text} within the first {within} step(s).",
            )
        ],
    )


DEFERRED = "Written in words: only the LLM judge can decide it."


def judged(rule: JudgeRule, about: Selector, v: View) -> Finding:
    """A `judge` rule with ``applies_to``: only the judge decides it, but whether it is exercised is a fact
    of the trace, the same for the engine, the prompt ("not checked if ...") and the labels."""
    calls, _ = v.positions(about)
    if not calls:
        return Finding("not_exercised", f"{about.text} is never called.")
    return Finding("deferred", DEFERRED, list(calls))


def never_after(rule: NeverAfterRule, trigger: Selector, forbidden: Selector, v: View) -> Finding:
    trig_all, _ = v.positions(trigger)
    if not trig_all:
        return Finding("not_exercised", f"{trigger.text} is never called.")
    a = trig_all[0]
    steps = v.index.steps
    forb_all, _ = v.positions(forbidden)
    # The first forbidden call after the trigger's step (steps never decrease along positions).
    k = bisect_right(forb_all, a)
    while k < len(forb_all) and steps[forb_all[k]] <= steps[a]:
        k += 1
    if k == len(forb_all):
        return Finding("passed", f"Nothing forbidden follows {_at(v, a)}.", [a])
    f = forb_all[k]
    return Finding(
        "failed",
        f"{_at(v, f)} came after {_at(v, a)}.",
        [a, f],
        [
            Flaw(
                "forbidden_call",
                f,
                f"no {forbidden.text} after {trigger.text}",
                f"{_name(v, a)} at position {a + 1}, then {_name(v, f)} at position {f + 1}",
                f"{_at(v, f)} is forbidden once {trigger.text} has been called ({_at(v, a)}).",
                f"Do not call {_name(v, f)} after {_name(v, a)}; move it before call {a + 1} or drop it.",
            )
        ],
    )


def after(rule: AfterRule, trigger: Selector, then: Selector, v: View) -> Finding:
    trig_all, _ = v.positions(trigger)
    if not trig_all:
        return Finding("not_exercised", f"{trigger.text} is never called.")
    steps = v.index.steps
    _, then_ok = v.positions(then)
    # Every call its own step (the common case): a step is the position, and a million-entry copy is saved.
    sequential = v.index.sequential
    then_steps = then_ok if sequential else [steps[p] for p in then_ok]
    within = rule.within
    missed: list[int] = []
    met: list[int] = []
    # Triggers come in order, so the first successful `then` in a later step only moves forward: one pass
    # over both lists, not a search per trigger (a million-call trace stays linear).
    k, n_then = 0, len(then_steps)
    for t in trig_all:
        st = t if sequential else steps[t]
        while k < n_then and then_steps[k] <= st:
            k += 1
        if k < n_then and then_steps[k] <= st + within:
            met.append(then_ok[k])
        else:
            missed.append(t)
    if not missed:
        return Finding(
            "passed",
            f"Every {trigger.text} was followed by {then.text} within {within} step(s).",
            # Two sorted runs: sorting merges them in one pass; dict.fromkeys drops repeats, keeping order.
            list(dict.fromkeys(sorted(trig_all + met))),
        )
    t = missed[0]
    more = f" ({len(missed)} of {len(trig_all)} triggers missed)" if len(missed) > 1 else ""
    return Finding(
        "failed",
        f"{_at(v, t)} was not followed by a successful {then.text} within {within} step(s){more}.",
        missed,
        [
            Flaw(
                "deadline_missed",
                t,
                f"{then.text} within {within} step(s) after {trigger.text}",
                f"{_name(v, t)} at position {t + 1}, "
                f"no successful {then.text} by step {steps[t] + within + 1}",
                f"{_at(v, t)} opened a deadline of {within} step(s) for {then.text} that passed{more}.",
                f"Call {then.text} within {within} step(s) after {trigger.text} (call {t + 1}).",
            )
        ],
    )


def sequence(rule: SequenceRule, sels: list[Selector], v: View) -> Finding:
    index = v.index
    tools, ok, args, steps = index.names, index.ok, index.args, index.steps
    k = len(sels)
    names = " -> ".join(s.text for s in sels)
    expected = f"{names}" + (" consecutively" if rule.strict else " in this order")
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
            if sels[r].hit(tools[i], ok[i], args[i]):
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
        ms = [m for m, s in enumerate(sels) if s.hit(tools[i], ok[i], args[i])]
        if r in ms:
            if not ok[i]:
                continue
            if not done or steps[i] > steps[done[-1]]:
                done.append(i)
                r += 1
                continue
            return _sequence_break(v, sels, r, i, done, expected, strict=False)
        if any(m < r for m in ms):
            continue  # a repeat of a step already reached
        return _sequence_break(v, sels, r, i, done, expected, strict=False)
    return _sequence_end(v, sels, r, done, expected)


def _sequence_break(
    v: View, sels: list[Selector], r: int, i: int, done: list[int], expected: str, *, strict: bool
) -> Finding:
    awaited = sels[r].text
    got = _at(v, i)
    if done and v.index.steps[i] == v.index.steps[done[-1]] and v.index.matching(sels[r], i):
        why = f"{got} ran in the same step as {_at(v, done[-1])}, so it does not follow it"
    elif strict:
        why = f"{got} came while {awaited} was awaited next"
    else:
        why = f"{got} was called before {awaited} succeeded"
    return Finding(
        "failed",
        why + ".",
        [*done, i],
        [
            Flaw(
                "out_of_order",
                i,
                expected,
                f"{' -> '.join(_at(v, d) for d in done) or 'nothing'}, then {got}",
                why + ".",
                f"Call {awaited} (successfully) before {v.index.names[i]}"
                + (", with nothing in between." if strict else "."),
            )
        ],
    )


def _sequence_end(v: View, sels: list[Selector], r: int, done: list[int], expected: str) -> Finding:
    if r == len(sels):
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
                    f"Make {awaited} succeed, then continue the sequence.",
                )
            ],
        )
    last = done[-1]
    return Finding(
        "failed",
        f"The sequence stopped after {_at(v, last)}; {awaited} never followed.",
        done,
        [
            Flaw(
                "incomplete_sequence",
                last,
                expected,
                " -> ".join(_at(v, d) for d in done) + f", then no successful {awaited}",
                f"The sequence started but was not completed: {awaited} never followed {_at(v, last)}.",
                f"Complete the sequence: call {awaited} after {v.index.names[last]}.",
            )
        ],
    )


def trajectory(rule: TrajectoryRule, v: View) -> Finding:
    index = v.index
    steps = index.steps
    expected = rule.expected
    want: dict[str, int] = {}  # a plain count, not a Counter: this runs once per trace and rule
    for name in expected:
        want[name] = want.get(name, 0) + 1
    # Everything below reads the per-name position lists; only `exact` may need the whole ok-call list.
    have = {n: len(index.ok_by_name.get(n, ())) for n in want}
    if rule.mode == "precedence":
        # Precedence asks for each tool once; a repeat in `expected` adds no requirement.
        missing = sorted(n for n in want if not have[n])
    else:
        # Each tool as many times as `expected` asks for it more often than it succeeded.
        missing = sorted(n for n, k in want.items() for _ in range(k - have[n]))
    extra = sorted(n for n in index.by_name if n not in want)
    first_any = {n: index.by_name[n][0] for n in want if n in index.by_name}
    first_ok = {n: index.ok_by_name[n][0] for n in want if index.ok_by_name.get(n)}
    distinct = list(dict.fromkeys(expected))
    pairs = _inverted_pairs(distinct, first_any, first_ok, steps)
    n_ok = sum(len(p) for p in index.ok_by_name.values())
    same_order = n_ok == len(expected) and _ok_names(index) == expected
    details: dict[str, Any] = {
        "mode": rule.mode,
        "missing": missing,
        "extra": extra,
        "out_of_order_pairs": [list(p) for p in pairs],
        "same_set": not missing and not extra and all(have[n] for n in want),
        "same_order": same_order,
    }
    flaws: list[Flaw] = []
    exp_text = " -> ".join(expected)
    if missing:
        flaws.append(
            Flaw(
                "missing_call",
                None,
                exp_text,
                "missing: " + ", ".join(missing),
                f"Expected tool(s) never succeeded: {', '.join(missing)}.",
                f"Add successful call(s) to {', '.join(missing)}.",
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
                f"The successful calls differ from the expected trajectory at position {diverge + 1}.",
                "Make the successful calls exactly: " + exp_text + ".",
            )
        )
    if not flaws:
        return Finding("passed", f"Trajectory matches ({mode}).", sorted(first_ok.values()), details=details)
    involved = set(first_any.values()) | {f.offending for f in flaws if f.offending is not None}
    return Finding("failed", " ".join(f.explanation for f in flaws), sorted(involved), flaws, details)


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
    order: list[str], first_any: dict[str, int], first_ok: dict[str, int], steps: list[int]
) -> list[tuple[str, str]]:
    """Pairs (x, y), x before y in ``order``, where y was attempted before x succeeded in an earlier step.

    One sweep over the tools sorted by step, with the ranks of the tools not yet available kept sorted:
    O(k log k) plus the pairs found, instead of testing all k^2 pairs. Tools that never succeed (as x) or
    are never attempted (as y) are reported as missing, not as pairs.
    """
    rank = {name: r for r, name in enumerate(order)}
    events: list[tuple[int, int, str]] = []
    for name in order:
        if name in first_any:
            events.append((steps[first_any[name]], 0, name))  # y attempted in this step
        if name in first_ok:
            events.append((steps[first_ok[name]], 1, name))  # x available after this step
    # Within one step attempts come first: a success in the same step does not precede.
    events.sort()
    pending = sorted(rank[n] for n in order if n in first_ok)
    pairs: list[tuple[str, str]] = []
    for _, kind, name in events:
        r = rank[name]
        if kind == 0:
            for x in pending[: bisect_left(pending, r)]:
                pairs.append((order[x], name))
        else:
            del pending[bisect_left(pending, r)]
    return pairs
