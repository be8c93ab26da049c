"""The deterministic engine: compile a rule set once, index each trace once, evaluate every rule.

This is the only implementation of the rules. The judge, the cross-check, calibration and every report
read its output; none re-implements a rule (a peer tool's copies drifted apart and the weaker one passed
what it should have failed).
"""

from __future__ import annotations

from typing import Any

from seqjudge.report import (
    DEFAULT_THRESHOLD,
    Explain,
    Report,
    RiskLevel,
    verdict,
)
from seqjudge.rules import evaluate as ev
from seqjudge.rules.base import Evaluator
from seqjudge.rules.index import NO_POSITIONS, Grouping, TraceIndex, View
from seqjudge.rules.model import RuleSet
from seqjudge.rules.select import Selector, compile_operand
from seqjudge.trace import PlainTrace, Trace, gc_paused

_MISSING = object()
# Violations raised by an attempt: a failed call still counts (prohibitions and triggers count every attempt).
_ATTEMPT_COUNTS = {"forbidden_call", "too_many_calls", "out_of_order", "missing_prerequisite"}


_OUTCOMES = ("passed", "failed", "not_exercised", "not_applicable", "deferred")
_NOT_APPLICABLE = "The trace's context does not match the rule's `when`."
_METADATA = "metadata."
_DEFERRED = ev.DEFERRED
# Every number in ``Engine.check_data``'s report is finite: the score is 0.0, 1.0 or a ratio of counts, and
# the one rule type whose findings carry details (trajectory) puts only names, lists and flags in them. So
# `check` writes its lines without screening them for NaN (``report.report_line``'s ``finite``); a rule type
# whose details held a float would have to screen them here (tests/test_engine_property.py holds to this).
FINITE = True
# Calls from which a check pauses the garbage collector (trace.gc_paused). A shorter trace's containers,
# freed as its check ends, rarely reach a young collection's threshold: pausing would cost more than it saves.
_PAUSE_FROM = 1000


def _cycle_flaw(tools_text: str) -> ev.Flaw:
    return ev.Flaw(
        "circular_dependency",
        None,
        tools_text,
        "every tool on the cycle was called",
        f"The rules require {tools_text}, which no order can satisfy.",
        "Break the cycle in the rule file (`seqjudge lint` prints it).",
    )


class _Compiled:
    __slots__ = (
        "rule",
        "evaluate",
        "same",
        "operands",
        "untouched",
        "description",
        "rule_id",
        "type",
        "severity",
        "group",
        "when",
        "lean",
        "no_group",
        "no_value",
        "walks_group",
        "same_key",
        "sels",
        "critical",
        "every_attempt",
        "cap",
        "awaits",
    )

    def __init__(
        self, rule: Any, evaluate: Evaluator | None, same: list[str] | None, operands: list[Selector]
    ) -> None:
        self.rule = rule
        self.evaluate = evaluate
        self.same = same
        self.operands = operands
        # A `same:` group in which none of the rule's operands matches a call is, to an evaluator (which
        # reads a view through its operands' positions), an empty trace: its finding, found once here, stands
        # for every such group of every trace, and only the other groups are evaluated.
        self.untouched: ev.Finding | None = (
            evaluate(View(TraceIndex([], [], [], []))) if same and evaluate is not None else None
        )
        self.rule_id: str = rule.rule_id
        self.type: str = rule.type
        self.severity: str = rule.severity
        self.group: str | None = rule.group
        self.when: dict[str, Any] | None = rule.when
        self.description: str = rule.description or rule.describe()
        # A lean report's entry of this rule when it passed: copied per trace, not rebuilt.
        self.lean: dict[str, Any] = {
            "rule_id": self.rule_id,
            "type": self.type,
            "severity": self.severity,
            "outcome": "passed",
            "group": self.group,
        }
        # What a `same:` rule says when no group fails, but for the count of values (read-only, shared).
        if same:
            named = ", ".join(same)
            nothing = (
                ev.Finding("passed", f"No call carries {named}, so nothing to count.")
                if self.type == "max_calls"
                else ev.Finding("not_exercised", f"No call carries {named}.")
            )
            self.no_group: ev.Finding = nothing
            self.no_value = ev.Finding("not_exercised", f"Not exercised for any value of {named}.")
        self.walks_group: bool = bool(same) and rule.walks_group()
        self.same_key: tuple[str, ...] = tuple(same or ())
        self.sels: tuple[Selector, ...] = tuple(dict.fromkeys(operands))  # each operand once
        # Two `same:` rules a lean report can often settle from the whole trace, without grouping (see
        # ``Engine._evaluate_same``): a `max_calls` rule's limit, and the `then` of a `before` rule (which
        # its compile selects second, after `first`).
        self.cap: int | None = rule.max if same and self.type == "max_calls" else None
        self.awaits: Selector | None = operands[1] if same and self.type == "before" else None
        self.critical: bool = self.severity == "critical"
        # Whether a failed call that raised a violation is said to count ("every attempt counts"): not when
        # an operand picks calls by `status:`, which already says what counts.
        self.every_attempt: bool = not any(s.by_status for s in operands)

    def entry(
        self,
        outcome: str,
        explanation: str,
        call_indices: list[int] | None = None,
        details: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """This rule's entry in a report's ``rules`` list, its keys in ``RuleResult``'s field order."""
        return {
            "rule_id": self.rule_id,
            "type": self.type,
            "severity": self.severity,
            "outcome": outcome,
            "call_indices": call_indices or [],
            "explanation": explanation,
            "group": self.group,
            "details": details,
        }


def _compile(rule: Any, aliases: dict[str, list[str]], shared: dict[Any, Selector]) -> _Compiled:
    operands: list[Selector] = []

    def c(op: Any) -> Selector:
        # Rules that name the same operand share one selector, and so the index's cached positions for it
        # (the cache is keyed by identity). The text is part of the key: it appears in messages.
        sel = compile_operand(op, aliases, rule.rule_id)
        sel = shared.setdefault((sel.text, sel.names, sel.conditions), sel)
        operands.append(sel)
        return sel

    # Each rule type compiles its own evaluator (a partial, not a lambda: the call into the evaluator then
    # costs no Python frame of its own - twenty rules, a hundred thousand traces).
    fn: Evaluator | None = rule.compile(c)
    return _Compiled(rule, fn, getattr(rule, "same", None), operands)


def _lookup(context: dict[str, Any], path: str) -> Any:
    node: Any = context
    for part in path.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return _MISSING
    return node


def context_matches(
    context: dict[str, Any], when: dict[str, Any], metadata: dict[str, Any] | None = None
) -> bool:
    """Every dotted path must exist in the context and equal the value (or be one of a list of values).

    Paths are read inside the trace's ``context``; seed 002 writes them from the trace's root
    (``context.user_role``), so a leading ``context.`` is accepted when the context has no such key. In the
    same way ``metadata.domain`` reads the trace's ``metadata`` (where tau traces and most exporters keep
    the domain, agent and task) when the context has no such path.
    """
    for path, want in when.items():
        node = _lookup(context, path)
        if node is _MISSING and path.startswith("context."):
            node = _lookup(context, path[len("context.") :])
        elif node is _MISSING and path.startswith(_METADATA) and metadata:
            node = _lookup(metadata, path[len(_METADATA) :])
        if node is _MISSING:
            return False
        if isinstance(want, list):
            if node not in want:
                return False
        elif node != want:
            return False
    return True


class Engine:
    """A rule set compiled once; ``check`` evaluates one trace."""

    def __init__(self, ruleset: RuleSet) -> None:
        self.ruleset = ruleset
        shared: dict[Any, Selector] = {}
        self.compiled = [_compile(r, ruleset.aliases, shared) for r in ruleset.rules]
        # The selectors of one tool name: the index sets their positions as it is built (see TraceIndex).
        self.singles = [(sel, sel.single) for sel in shared.values() if sel.single is not None]
        from seqjudge.rules.lint import find_cycles

        # Each cycle: the tool names on it and the rules whose edges form it.
        self.cycles = [(set(cy.tools), cy.tools, set(cy.rule_ids)) for cy in find_cycles(ruleset)]

    def check(
        self,
        trace: Trace | PlainTrace,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        risk_level: RiskLevel = "medium",
        explain: Explain = "all",
    ) -> Report:
        data = self.check_data(trace, threshold=threshold, risk_level=risk_level, explain=explain)
        return Report.model_validate(data)

    def check_data(
        self,
        trace: Trace | PlainTrace,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        risk_level: RiskLevel = "medium",
        explain: Explain = "all",
    ) -> dict[str, Any]:
        """The report as plain data: ``Report.model_validate`` of it is ``check``'s report, and its keys are
        in the models' field order, so ``report_line`` of it is byte for byte ``model_dump_json`` of that
        (``exclude_unset=True`` for a lean report, ``explain="not-passed"``)."""
        if len(trace.names if isinstance(trace, PlainTrace) else trace.calls) < _PAUSE_FROM:
            return self._check(trace, threshold, risk_level, explain == "all")
        with gc_paused():  # indexing a long trace allocates per-call containers; see trace.gc_paused
            return self._check(trace, threshold, risk_level, explain == "all")

    def _check(
        self, trace: Trace | PlainTrace, threshold: float, risk_level: RiskLevel, explain_all: bool
    ) -> dict[str, Any]:
        if type(trace) is PlainTrace:  # (TraceIndex.of's case, without its call: every call is its own step)
            names = trace.names
            index = TraceIndex(names, trace.ok, trace.args, list(range(len(names))), self.singles)
            index.source = trace
        else:
            index = TraceIndex.of(trace, self.singles)
        whole = View(index, explain=explain_all)
        # Plain dicts: a caller that wants models validates the whole report once (one pass through
        # pydantic-core instead of one model construction per rule), and `check` JSONL skips models.
        results: list[dict[str, Any]] = []
        violations: list[dict[str, Any]] = []
        missing: list[dict[str, Any]] = []
        cycle_hits = self._cycle_hits(index) if self.cycles else None
        groupings: dict[tuple[str, ...], Grouping] = {}
        context = trace.context
        metadata = trace.metadata
        ok = index.ok
        passed = failed = 0
        critical_failed = critical = False
        counts = dict.fromkeys(_OUTCOMES, 0)  # for the summary, but for passed (counted in `passed`)
        n_critical = 0  # critical violations, and where the first one is in `violations` (for the summary)
        first_critical: int | None = None
        for comp in self.compiled:
            when = comp.when
            if when and not context_matches(context, when, metadata):
                results.append(comp.entry("not_applicable", _NOT_APPLICABLE))
                counts["not_applicable"] += 1
                continue
            evaluate = comp.evaluate
            if evaluate is None:
                results.append(comp.entry("deferred", _DEFERRED))
                counts["deferred"] += 1
                continue
            finding = (
                evaluate(whole)
                if comp.same is None
                else self._evaluate_same(comp, index, groupings, explain_all)
            )
            flaws = finding.flaws
            if cycle_hits:
                hits = cycle_hits.get(comp.rule_id)
                if hits:
                    flaws = [*flaws, *(_cycle_flaw(text) for text in hits)]
            outcome = finding.outcome
            if not flaws and outcome == "passed":
                passed += 1
                results.append(
                    comp.entry("passed", finding.explanation, finding.call_indices, finding.details)
                    if explain_all
                    else comp.lean.copy()  # all a lean report says of a pass (evaluate.BARE_PASS's case)
                )
                continue
            explanation = finding.explanation
            if flaws:  # a rule with any flaw failed, and says so
                if outcome != "failed":
                    explanation = flaws[-1].explanation
                outcome = "failed"
            # The entry inline, as ``_Compiled.entry`` writes it: a call per rule and trace costs.
            results.append(
                {
                    "rule_id": comp.rule_id,
                    "type": comp.type,
                    "severity": comp.severity,
                    "outcome": outcome,
                    "call_indices": finding.call_indices or [],
                    "explanation": explanation,
                    "group": comp.group,
                    "details": finding.details,
                }
            )
            if outcome != "failed":
                counts[outcome] += 1
                continue
            failed += 1
            if comp.critical:
                critical_failed = True
                if flaws:
                    critical = True
                    if first_critical is None:
                        first_critical = len(violations)
                    n_critical += len(flaws)
            for f in flaws:
                at = f.offending
                if at is not None and not ok[at] and f.type in _ATTEMPT_COUNTS and comp.every_attempt:
                    f.explanation += f" Call {at + 1} failed, but for this rule every attempt counts."
                violations.append(
                    {
                        "rule_id": comp.rule_id,
                        "rule_description": comp.description,
                        "violation_type": f.type,
                        "expected_order": f.expected,
                        "actual_order": f.actual,
                        "offending_call_index": at,
                        "severity": comp.severity,
                        "explanation": f.explanation,
                        "suggestion": f.suggestion,
                    }
                )
                if f.missing:
                    req, dep, dep_at, impact = f.missing
                    missing.append(
                        {
                            "required_call": req,
                            "dependent_call": dep,
                            "dependent_call_index": dep_at,
                            "impact": impact,
                        }
                    )
        counts["failed"] = failed
        checked = passed + failed
        value = 0.0 if critical_failed else (passed / checked if checked else 1.0)
        counts["passed"] = passed
        return {
            "trace_id": trace.trace_id or "<unnamed>",
            "verdict": verdict(value, critical, threshold=threshold, risk_level=risk_level),
            "sequence_correctness_score": value,
            "total_rules_checked": checked,
            "rules_passed": passed,
            "rules_failed": failed,
            "violations": violations,
            "missing_prerequisites": missing,
            "summary": _summary(
                index.n,
                counts,
                len(violations) - n_critical,
                n_critical,
                None if first_critical is None else violations[first_critical],
            ),
            "rules": results,
        }

    def finding(self, comp: _Compiled, view: View, groupings: dict[tuple[str, ...], Grouping]) -> ev.Finding:
        """One compiled rule (with an evaluator) on the index ``view`` shows, as ``check`` finds it: the
        guard's way in (``seqjudge.guard``), which evaluates the rules on a session's growing index.
        ``groupings``: the index's ``same:`` groupings as they stand (found again once the index grows)."""
        assert comp.evaluate is not None
        if comp.same is None:
            return comp.evaluate(view)
        return self._evaluate_same(comp, view.index, groupings, view.explain)

    def group_finding(self, comp: _Compiled, grouping: Grouping, i: int) -> ev.Finding | None:
        """A ``same:`` rule on the group of call ``i`` alone, as ``check`` finds that group (the guard: a
        violation at a call is in its group); None when the call is in no group. ``grouping`` is the
        index's, for the rule's arguments."""
        assert comp.evaluate is not None
        g = grouping.group_of(i)
        if g is None:
            return None
        view = View(grouping.index, grouping, explain=False)
        view.show({sel: grouping.split(sel).get(g, NO_POSITIONS) for sel in comp.sels}, g)
        finding = comp.evaluate(view)
        return _failed_for([(grouping.label(i), finding)]) if finding.outcome == "failed" else finding

    def _evaluate_same(
        self, comp: _Compiled, index: TraceIndex, groupings: dict[tuple[str, ...], Grouping], explain: bool
    ) -> ev.Finding:
        """A ``same:`` rule: evaluated on each group of calls that share the arguments' values.

        Only the groups an operand touches are evaluated, each on its share of the operands' positions; the
        others have the rule's finding on an empty trace (``comp.untouched``) and are only counted, and only
        when the count is shown (``explain``) or decides the outcome. ``groupings``: this trace's, by
        arguments, shared by every rule with those arguments (kept here, not in the index, which a grouping
        refers to: a cycle would leave each trace's index to the garbage collector)."""
        assert comp.same is not None and comp.evaluate is not None and comp.untouched is not None
        untouched = comp.untouched
        lean = not explain and not comp.walks_group and untouched.outcome != "failed"
        # A group's calls are some of the trace's: no group holds more calls than the whole trace, so within
        # the limit there every group passes; and no group has a `then` call the trace lacks, so without one
        # every group is not exercised (as `_same_lean` would find, group by group).
        if lean and comp.cap is not None and len(index._sel[comp.sels[0]][0]) <= comp.cap:
            return ev.BARE_PASS
        grouping = groupings.get(comp.same_key)
        if grouping is None:
            grouping = groupings[comp.same_key] = Grouping(index, comp.same_key)
        if lean:
            if comp.awaits is not None and not index._sel[comp.awaits][0]:  # (positions, without the call)
                return comp.no_value if grouping.any() else comp.no_group
            return _same_lean(comp, grouping, untouched)
        # Each group to evaluate, with one of its calls (which names its values in messages).
        groups: dict[Any, int] = {}
        if untouched.outcome == "failed":
            # No rule type fails on an empty trace today; one that did would need each group's own flaws.
            groups = {g: calls[0] for g, calls in grouping.all_members().items()}
        else:
            for sel in comp.operands:
                for g, (calls, _) in grouping.split(sel).items():
                    if g not in groups:
                        groups[g] = calls[0]
        if not groups and not grouping.any():
            return comp.no_group
        evaluate = comp.evaluate
        view = View(index, grouping, explain=explain)
        n_passed = 0
        held: set[int] = set()
        failed: list[tuple[Any, ev.Finding]] = []
        splits = [(sel, grouping.split(sel)) for sel in comp.sels]
        for g in groups:
            view.show({sel: split.get(g, NO_POSITIONS) for sel, split in splits}, g)
            f = evaluate(view)
            if f.outcome == "failed":
                failed.append((g, f))
            elif f.outcome == "passed":
                n_passed += 1
                if explain:
                    held.update(f.call_indices)
        if failed:
            _in_trace_order(failed, grouping)
            return _failed_for([(grouping.label(groups[g]), f) for g, f in failed])
        if untouched.outcome == "passed":
            if explain:
                n_untouched = len(grouping) - len(groups)
                if n_untouched:
                    n_passed += n_untouched
                    held.update(untouched.call_indices)
            elif not n_passed and (not groups or len(grouping) > len(groups)):
                n_passed = 1  # a group no operand touches passes (with no group touched, `any` said one is)
        if not n_passed:
            return comp.no_value
        if not explain:
            return ev.BARE_PASS
        return ev.Finding(
            "passed", f"Held for each of {n_passed} value(s) of {', '.join(comp.same)}.", sorted(held)
        )

    def _cycle_hits(self, index: TraceIndex) -> dict[str, list[str]]:
        hits: dict[str, list[str]] = {}
        for names, closed, rule_ids in self.cycles:
            if all(n in index.by_name for n in names):
                text = " -> ".join(closed)
                for rid in rule_ids:
                    hits.setdefault(rid, []).append(text)
        return hits


def _same_lean(comp: _Compiled, grouping: Grouping, untouched: ev.Finding) -> ev.Finding:
    """``Engine._evaluate_same`` for a lean report (passes unexplained, values not counted), of a rule whose
    evaluator reads only its operands' positions and passes or is not exercised on an empty trace: each
    group an operand touches is evaluated once on its share of their positions."""
    assert comp.evaluate is not None
    shares = grouping.shares(comp.sels)
    if not shares:
        if untouched.outcome == "passed":
            return ev.BARE_PASS  # as `no_group` would be: a lean report shows neither's explanation
        return comp.no_value if grouping.any() else comp.no_group
    evaluate = comp.evaluate
    view = View(grouping.index, explain=False)
    n_passed = 0
    failed: list[tuple[Any, ev.Finding]] = []
    for g, share in shares.items():
        view.show(share)
        f = evaluate(view)
        if f.outcome == "failed":
            failed.append((g, f))
        elif f.outcome == "passed":
            n_passed += 1
    if failed:
        _in_trace_order(failed, grouping)
        label = grouping.label
        return _failed_for([(label(_a_call(shares[g])), f) for g, f in failed])
    if n_passed or (untouched.outcome == "passed" and len(grouping) > len(shares)):
        return ev.BARE_PASS  # (a group no operand touches passes)
    return comp.no_value


def _in_trace_order(failed: list[tuple[Any, ev.Finding]], grouping: Grouping) -> None:
    """Put failed groups in the order their values first appear in the trace (messages name them so)."""
    if len(failed) > 1:
        seen = grouping.first_seen(g for g, _ in failed)
        failed.sort(key=lambda gf: seen[gf[0]])


def _a_call(share: dict[Any, tuple[list[int], list[int]]]) -> int:
    """One of the calls of a group's share (which names the group's values in messages)."""
    for every, _ in share.values():
        if every:
            return every[0]
    raise ValueError("a group's share holds a call")  # (shares hold only groups an operand touches)


def _failed_for(failed: list[tuple[str, ev.Finding]]) -> ev.Finding:
    """A ``same:`` rule's finding from its failed groups' (each named by its values, in the order they first
    appear in the trace): their flaws and explanations, each said to be for its values."""
    flaws: list[ev.Flaw] = []
    indices: set[int] = set()
    labels: list[str] = []
    texts: list[str] = []
    for label, f in failed:  # (one loop, no generator per join)
        labels.append(label)
        texts.append(f.explanation)
        indices.update(f.call_indices)
        for fl in f.flaws:
            fl.explanation = f"For {label}: {fl.explanation}"
            fl.actual = f"{fl.actual} (for {label})"
            flaws.append(fl)
    text = f"Failed for {'; '.join(labels)}: " + " ".join(texts)
    return ev.Finding("failed", text, sorted(indices), flaws)


def _summary(
    n_calls: int, counts: dict[str, int], warnings: int, n_critical: int, first: dict[str, Any] | None
) -> str:
    """The report's one-paragraph summary; ``counts`` holds the number of rules of each outcome; the
    violations: ``warnings`` not critical, ``n_critical`` critical, the first of which is ``first``."""
    checked = counts["passed"] + counts["failed"]
    parts: list[str] = []
    if n_calls == 0:
        parts.append("The trace has no calls.")
    if checked == 0:
        parts.append("No rule was exercised, so the score is 1.0 by definition.")
    else:
        parts.append(f"{counts['passed']} of {checked} checked rule(s) passed.")
    if first is not None:
        at = first["offending_call_index"]
        where = "" if at is None else f" at call {at + 1}"
        kind = first["violation_type"]
        parts.append(f"{n_critical} critical violation(s); first: {first['rule_id']} ({kind}{where}).")
    if warnings:
        parts.append(f"{warnings} warning(s).")
    for key, words in (
        ("not_exercised", "not exercised"),
        ("not_applicable", "not applicable"),
        ("deferred", "deferred to the LLM judge"),
    ):
        if counts[key]:
            parts.append(f"{counts[key]} rule(s) {words}.")
    return " ".join(parts)


def check(
    trace: Trace, ruleset: RuleSet, *, threshold: float = DEFAULT_THRESHOLD, risk_level: RiskLevel = "medium"
) -> Report:
    """Evaluate one trace. Compile an ``Engine`` once instead when checking many traces."""
    return Engine(ruleset).check(trace, threshold=threshold, risk_level=risk_level)
