"""A small brute-force reference evaluator for seqjudge's rules, written from the spec text only.

Sources: issue 2 ("Semantics", "Report and score"), the README's rule semantics and the tables of
seed 002. It is deliberately independent of ``seqjudge.rules.engine``: every rule is decided by direct
quantification over the calls (O(n^2) at worst), so that a property test can compare the fast engine
against something obviously
right.
Only ``compile_operand`` (operand -> selector, the shared matching contract) and the pydantic rule classes
are borrowed from the package.

Notation, as in the README's rule semantics: calls are 0-based indices, ``S[i]`` is the step ordinal
of call ``i``, "p precedes t" means ``S[p] < S[t]``, and ``ok[i]`` means the call succeeded.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from seqjudge.rules.model import (
    AfterRule,
    BeforeRule,
    BlocklistRule,
    EventuallyRule,
    JudgeRule,
    MaxCallsRule,
    NeverAfterRule,
    Operand,
    RequireRule,
    SequenceRule,
    TrajectoryRule,
)
from seqjudge.rules.select import compile_operand
from seqjudge.trace import Call


@dataclass(frozen=True)
class RefCall:
    """One call as the reference sees it; ``step`` is its step ordinal (0, 1, 2, ... by first appearance)."""

    tool_name: str
    ok: bool
    step: int
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RefViolation:
    type: str
    index: int | None
    # False where the spec does not pin down which call is "the offending call" (see ``index_certain`` below).
    certain: bool = True
    value: str | None = None  # the ``same:`` value (compact JSON) the violation belongs to


@dataclass
class RefResult:
    outcome: str  # passed | failed | not_exercised | not_applicable | deferred
    violations: list[RefViolation] = field(default_factory=list)
    # False where the spec does not say which violation types a failure produces (trajectory modes other
    # than precedence): only the outcome can then be compared.
    types_certain: bool = True
    details: dict[str, Any] | None = None
    # False where the spec does not say how many violations a failure produces (trajectory: one per missing
    # tool and pair, or one for the rule). Elsewhere: one per failed rule, or one per failing `same` value.
    count_certain: bool = True

    @property
    def types(self) -> set[str]:
        return {v.type for v in self.violations}

    @property
    def first_index(self) -> int | None:
        """The first (lowest) offending call index among the violations that name one."""
        indices = [v.index for v in self.violations if v.index is not None]
        return min(indices) if indices else None


def steps_from_labels(labels: Sequence[int | None]) -> list[int]:
    """Step ordinals from ``step`` labels: a call opens a new step unless it repeats the previous label."""
    out: list[int] = []
    ordinal = -1
    previous: int | None = None
    for label in labels:
        if label is None or label != previous:
            ordinal += 1
        out.append(ordinal)
        previous = label
    return out


def _resolve(context: dict[str, Any], path: str) -> tuple[bool, Any]:
    node: Any = context
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def when_matches(when: dict[str, Any], context: dict[str, Any]) -> bool:
    """Every dotted path exists in ``context`` and equals the value (or is one of the listed values).

    Paths are resolved inside the trace's context (the README's rule semantics). Seed 002's own example writes
    ``context.user_role`` for the context's ``user_role``, so a leading ``context.`` that does not resolve
    inside the context is read as naming the context itself. (The texts leave this open; see the report.)"""
    for path, wanted in when.items():
        found, node = _resolve(context, path)
        if not found and path.startswith("context."):
            found, node = _resolve(context, path.removeprefix("context."))
        allowed = wanted if isinstance(wanted, list) else [wanted]
        if not found or node not in allowed:
            return False
    return True


def value_key(values: list[Any]) -> str:
    """``same:`` values are compared as compact JSON with sorted keys."""
    return json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def split_by_same(calls: Sequence[RefCall], same: list[str]) -> dict[str, list[int]]:
    """One sub-trace (global indices, in order) per distinct value tuple, by first appearance."""
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(calls):
        if all(a in c.arguments for a in same):
            groups.setdefault(value_key([c.arguments[a] for a in same]), []).append(i)
    return groups


Outcome = tuple[str, list[RefViolation]]


class _Evaluator:
    def __init__(self, calls: Sequence[RefCall], aliases: dict[str, list[str]]) -> None:
        self.calls = list(calls)
        self.aliases = aliases
        self.S = [c.step for c in calls]
        self.ok = [c.ok for c in calls]
        self._as_calls = [
            Call(tool_name=c.tool_name, arguments=c.arguments, status="ok" if c.ok else "error")
            for c in calls
        ]

    def matcher(self, op: Operand) -> Callable[[int], bool]:
        selector = compile_operand(op, self.aliases)
        return lambda i: selector.matches(self._as_calls[i])

    # Each check below looks only at the calls in ``P`` (a sub-trace: global indices in order) and returns
    # passed / failed / not_exercised with its violations.

    def require(self, rule: RequireRule, P: list[int]) -> Outcome:
        tool = self.matcher(rule.tool)
        if any(tool(i) and self.ok[i] for i in P):
            return "passed", []
        # The spec names no offending call for a call that never happened.
        return "failed", [RefViolation("missing_call", None, certain=False)]

    def before(self, rule: BeforeRule, P: list[int]) -> Outcome:
        first, then = self.matcher(rule.first), self.matcher(rule.then)
        thens = [i for i in P if then(i)]  # `then` counts on any attempt
        if not thens:
            return "not_exercised", []
        t = thens[0]
        good_firsts = [p for p in P if first(p) and self.ok[p]]  # `first` is met only by a successful call
        if any(self.S[p] < self.S[t] for p in good_firsts):
            return "passed", []
        kind = "out_of_order" if good_firsts else "missing_prerequisite"
        return "failed", [RefViolation(kind, t)]

    def blocklist(self, rule: BlocklistRule, P: list[int]) -> Outcome:
        offenders = [i for i in P if rule.pattern in self.calls[i].tool_name]
        if offenders:
            return "failed", [RefViolation("forbidden_call", offenders[0])]
        return "passed", []

    def max_calls(self, rule: MaxCallsRule, P: list[int]) -> Outcome:
        tool = self.matcher(rule.tool)
        attempts = [i for i in P if tool(i)]
        if len(attempts) > rule.max:
            return "failed", [RefViolation("too_many_calls", attempts[rule.max])]
        return "passed", []

    def eventually(self, rule: EventuallyRule, P: list[int]) -> Outcome:
        tool = self.matcher(rule.tool)
        good = [i for i in P if tool(i) and self.ok[i]]
        if any(self.S[i] < rule.within for i in good):
            return "passed", []
        if good:
            # Late: the spec does not say which call is offending (the late call is the natural choice).
            return "failed", [RefViolation("deadline_missed", good[0], certain=False)]
        return "failed", [RefViolation("missing_call", None)]

    def never_after(self, rule: NeverAfterRule, P: list[int]) -> Outcome:
        trigger, forbidden = self.matcher(rule.trigger), self.matcher(rule.forbidden)
        triggers = [i for i in P if trigger(i)]
        if not triggers:
            return "not_exercised", []
        anchor = triggers[0]
        late = [f for f in P if forbidden(f) and self.S[f] > self.S[anchor]]
        if late:
            return "failed", [RefViolation("forbidden_call", late[0])]
        return "passed", []

    def after(self, rule: AfterRule, P: list[int]) -> Outcome:
        trigger, then = self.matcher(rule.trigger), self.matcher(rule.then)
        triggers = [i for i in P if trigger(i)]
        if not triggers:
            return "not_exercised", []
        missed = [
            t
            for t in triggers
            if not any(then(p) and self.ok[p] and self.S[t] < self.S[p] <= self.S[t] + rule.within for p in P)
        ]
        if missed:
            return "failed", [RefViolation("deadline_missed", missed[0])]
        return "passed", []

    def sequence(self, rule: SequenceRule, P: list[int]) -> Outcome:
        members = [self.matcher(op) for op in rule.tools]
        return (self._strict if rule.strict else self._non_strict)(members, P)

    def _non_strict(self, members: list[Callable[[int], bool]], P: list[int]) -> Outcome:
        k = len(members)
        reached = 0  # members completed so far
        last_step = -1  # step of the call that completed the previous member
        touched = False
        for i in P:
            hit = [j for j in range(k) if members[j](i)]
            if not hit:
                continue
            touched = True
            if reached in hit:  # the awaited member
                if not self.ok[i]:
                    continue  # a failed attempt waits
                if reached > 0 and self.S[i] <= last_step:
                    return "failed", [RefViolation("out_of_order", i)]
                reached, last_step = reached + 1, self.S[i]
                if reached == k:
                    return "passed", []
            elif any(j < reached for j in hit):
                continue  # a repeat of a member already reached
            else:  # a later member, attempted before its predecessors succeeded
                return "failed", [RefViolation("out_of_order", i)]
        if not touched:
            return "not_exercised", []
        return "failed", [RefViolation("incomplete_sequence", None, certain=False)]

    def _strict(self, members: list[Callable[[int], bool]], P: list[int]) -> Outcome:
        k = len(members)
        starts = [n for n, i in enumerate(P) if members[0](i) and self.ok[i]]
        if not starts:
            return "not_exercised", []
        reached, last_step = 1, self.S[P[starts[0]]]
        for i in P[starts[0] + 1 :]:
            if members[reached](i):
                if not self.ok[i]:
                    continue  # a failed attempt of the awaited tool waits
                if self.S[i] <= last_step:
                    return "failed", [RefViolation("out_of_order", i)]
                reached, last_step = reached + 1, self.S[i]
                if reached == k:
                    return "passed", []
            else:
                return "failed", [RefViolation("out_of_order", i)]
        return "failed", [RefViolation("incomplete_sequence", None, certain=False)]


def trajectory(calls: Sequence[RefCall], rule: TrajectoryRule) -> RefResult:
    """The four modes, plus the set and order comparisons every mode reports."""
    S = [c.step for c in calls]
    ok_names = [c.tool_name for c in calls if c.ok]
    first_ok: dict[str, int] = {}
    first_any: dict[str, int] = {}
    for i, c in enumerate(calls):
        first_any.setdefault(c.tool_name, i)
        if c.ok:
            first_ok.setdefault(c.tool_name, i)
    unique = list(dict.fromkeys(rule.expected))
    missing = [x for x in unique if x not in first_ok]
    extra = sorted({n for n in ok_names if n not in set(unique)})
    # x listed before y: out of order when y was attempted and not preceded by a successful x (both present).
    pairs = [
        (x, y)
        for a, x in enumerate(unique)
        for y in unique[a + 1 :]
        if x in first_ok and y in first_any and not S[first_ok[x]] < S[first_any[y]]
    ]
    details = {
        "missing": missing,
        "extra": extra,
        "out_of_order_pairs": pairs,
        "same_set": not missing and not extra,
        "same_order": not pairs,
    }
    if rule.mode == "precedence":
        violations = [RefViolation("missing_call", None, certain=False) for _ in missing]
        violations += [RefViolation("out_of_order", first_any[y], certain=False) for _, y in pairs]
        return RefResult("failed" if violations else "passed", violations, True, details, count_certain=False)
    if rule.mode == "in_order":
        # A subsequence of the successful calls where each match *follows* the previous one: calls in one
        # step never precede each other (issue 2, "Semantics"), so parallel calls do not count as in order.
        # Matching greedily (earliest call first) is optimal because steps never decrease along the trace.
        position, last_step = 0, -1
        for i, c in enumerate(calls):
            awaited = rule.expected[position] if position < len(rule.expected) else None
            if c.ok and c.tool_name == awaited and S[i] > last_step:
                position, last_step = position + 1, S[i]
        holds = position == len(rule.expected)
    elif rule.mode == "any_order":
        holds = Counter(rule.expected) <= Counter(ok_names)
    else:  # exact
        holds = ok_names == list(rule.expected)
    return RefResult("passed" if holds else "failed", [], False, details, count_certain=False)


SAME_TYPES = (BeforeRule, AfterRule, NeverAfterRule, MaxCallsRule, SequenceRule)


def evaluate(
    calls: Sequence[RefCall],
    context: dict[str, Any],
    rule: Any,
    aliases: dict[str, list[str]] | None = None,
) -> RefResult:
    """The outcome of one rule on one trace, with its violations."""
    if rule.when is not None and not when_matches(rule.when, context):
        return RefResult("not_applicable")
    if isinstance(rule, JudgeRule):
        return RefResult("deferred")
    if isinstance(rule, TrajectoryRule):
        return trajectory(calls, rule)
    ev = _Evaluator(calls, aliases or {})
    check: Callable[[Any, list[int]], Outcome] = {
        RequireRule: ev.require,
        BeforeRule: ev.before,
        BlocklistRule: ev.blocklist,
        MaxCallsRule: ev.max_calls,
        EventuallyRule: ev.eventually,
        NeverAfterRule: ev.never_after,
        AfterRule: ev.after,
        SequenceRule: ev.sequence,
    }[type(rule)]
    same = rule.same if isinstance(rule, SAME_TYPES) else None
    if not same:
        outcome, violations = check(rule, list(range(len(calls))))
        return RefResult(outcome, violations)
    groups = split_by_same(calls, same)
    if not groups:
        return RefResult("passed" if isinstance(rule, MaxCallsRule) else "not_exercised")
    outcomes: list[str] = []
    violations: list[RefViolation] = []
    for key, P in groups.items():
        outcome, found = check(rule, P)
        outcomes.append(outcome)
        violations += [RefViolation(v.type, v.index, v.certain, key) for v in found]
    if "failed" in outcomes:
        return RefResult("failed", violations)
    if "passed" in outcomes:
        return RefResult("passed")
    return RefResult("not_exercised")


def score_and_verdict(
    results: Sequence[tuple[str, str]], *, threshold: float = 0.85, risk_level: str = "medium"
) -> tuple[float, int, int, int, str]:
    """(score, checked, passed, failed, verdict) from (outcome, severity) pairs, per "Report and score"."""
    passed = sum(1 for outcome, _ in results if outcome == "passed")
    failed = sum(1 for outcome, _ in results if outcome == "failed")
    checked = passed + failed
    critical = any(outcome == "failed" and severity == "critical" for outcome, severity in results)
    if critical:
        value = 0.0
    elif checked == 0:
        value = 1.0
    else:
        value = passed / checked
    if critical:
        decision = "fail"
    elif value < threshold or (risk_level == "high" and value < 1.0):
        decision = "review"
    else:
        decision = "pass"
    return value, checked, passed, failed, decision
