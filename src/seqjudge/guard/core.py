"""The rules as a guard before each tool call: the engine's own evaluators, run on a session's growing index.

A ``Session`` keeps one ``TraceIndex`` that grows by a call each time a call runs (``record``). To decide a
proposed call it appends the call, evaluates each rule with the engine's evaluator (``Engine.finding``) and
removes the call again. A rule denies the call when it raises, at that call, one of the violations its type
decides on the calls before a call alone (``guard_kinds``, declared by each rule type) - whatever the call's
outcome: the call is evaluated as successful and, when that is a violation, as failed, and it is denied only
if both are. So the guard denies exactly where the offline engine, on the trace cut after the call, reports
such a violation at it (tests/test_guard_parity.py). What only the end of the session decides (a required
call, a deadline, a sequence's completion) is ``pending``, and ``finish`` decides it. The engine reports a
rule's first violation, so a rule the session already broke is decided on the session's calls without those
that broke it (``seqjudge.guard.aside``): a repeat is denied too.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from seqjudge.errors import GuardError, SeqjudgeError
from seqjudge.guard.aside import SetAside
from seqjudge.guard.calls import Calls
from seqjudge.guard.decision import (
    FAIL_MODES,
    JUDGE_MODES,
    Decision,
    FailMode,
    JudgeMode,
    RuleDecision,
)
from seqjudge.rules.engine import Engine, context_matches
from seqjudge.rules.index import Grouping, View
from seqjudge.trace import Call, Message, Trace, assign_steps

if TYPE_CHECKING:
    from seqjudge.config import RunConfig
    from seqjudge.guard.judged import ModelJudge
    from seqjudge.rules.engine import _Compiled
    from seqjudge.rules.evaluate import Finding
    from seqjudge.rules.model import RuleSet

log = logging.getLogger("seqjudge.guard")

# A rule's decision on the proposed call at a position, reading a view of the session (None: it holds).
_Decider = Callable[["_Compiled", Calls, int, View], "RuleDecision | None"]

_NOT_APPLICABLE = "not applicable: the session's context does not match the rule's `when`"


def fail_mode_of(fail_mode: str | None, config: RunConfig | None) -> FailMode:
    """What a guard that cannot decide answers: ``fail_mode`` if given, else the config's ``guard.fail_mode``,
    else deny at ``risk_level: high`` and allow otherwise."""
    if fail_mode is None and config is not None:
        fail_mode = config.guard.fail_mode
    if fail_mode is None:
        return "deny" if config is not None and config.risk_level == "high" else "allow"
    if fail_mode not in FAIL_MODES:
        raise GuardError(f"fail mode {fail_mode!r} is not one of: {', '.join(FAIL_MODES)}")
    return fail_mode  # type: ignore[return-value]


def degraded(fail_mode: FailMode, why: str) -> Decision:
    """The decision of a guard that could not decide (``why``), as its fail mode makes it; a fail-open
    allow is logged as a warning, so that no call passes unchecked unsaid."""
    done = "denied" if fail_mode == "deny" else "allowed"
    note = f"the guard could not decide ({why}); fail mode {fail_mode}: the call is {done} unchecked"
    if fail_mode == "allow":
        log.warning("seqjudge guard: %s", note)
    return Decision(fail_mode, [], f"seqjudge guard: {note}.", note)


class Guard:
    """A rule set compiled once for deciding calls before they run; ``session`` keeps one agent's state."""

    def __init__(
        self,
        ruleset: RuleSet,
        config: RunConfig | None = None,
        *,
        judge: JudgeMode = "skip",
        fail_mode: FailMode | None = None,
        provider: Any = None,
    ) -> None:
        """``judge``: what becomes of a rule only the judge decides, about a proposed call: ``skip``
        (reported skipped), ``ask`` (the host asks a person), or ``model`` (the configured judge decides,
        a model call per such decision; ``provider`` instead of the config's ``model``)."""
        if judge not in JUDGE_MODES:
            raise GuardError(f"judge mode {judge!r} is not one of: {', '.join(JUDGE_MODES)}")
        self.model_judge: ModelJudge | None = None
        if judge == "model":
            from seqjudge.guard.judged import ModelJudge

            self.model_judge = ModelJudge(ruleset, config, provider)
        self.ruleset = ruleset
        self.config = config
        self.judge: JudgeMode = judge
        self.fail_mode: FailMode = fail_mode_of(fail_mode, config)
        self.engine = Engine(ruleset)

    @classmethod
    def from_files(
        cls,
        rules_path: str | Path,
        config_path: str | Path | None = None,
        *,
        judge: JudgeMode = "skip",
        fail_mode: FailMode | None = None,
        provider: Any = None,
    ) -> Guard:
        """A guard of a rule file (and a config file's ``risk_level`` and ``guard:``); any problem with
        them is a ``GuardError`` carrying the file's own one-paragraph message."""
        from seqjudge.rules.load import load_rules

        try:
            config = None
            if config_path is not None:
                from seqjudge.config import load_config  # (only then: a hook's start-up counts)

                config = load_config(config_path)
            return cls(load_rules(rules_path), config, judge=judge, fail_mode=fail_mode, provider=provider)
        except GuardError:
            raise
        except SeqjudgeError as exc:
            raise GuardError(str(exc), cause=exc) from None

    def session(
        self,
        session_id: str,
        *,
        context: dict[str, Any] | None = None,
        history: Iterable[Call] = (),
        messages: Iterable[Message] = (),
        metadata: dict[str, Any] | None = None,
    ) -> Session:
        """A session that has already made the calls ``history`` (completed, in order) and seen the
        ``messages`` (lineage rules read user messages); ``when:`` reads ``context`` (and ``metadata.*``
        paths ``metadata``, as the engine reads a trace's)."""
        trace = Trace(
            trace_id=session_id or None,
            calls=[],
            messages=list(messages),
            context=context or {},
            metadata=metadata or {},
        )
        return Session(self, trace, list(history))

    def decide(self, history: Sequence[Call], tool: str, args: dict[str, Any]) -> Decision:
        """Decide one call after ``history``, without keeping a session (each call re-reads the history)."""
        return self.session("", history=history).decide(tool, args)

    def degraded(self, why: str) -> Decision:
        """This guard's fail-mode decision when it could not decide (``why``)."""
        return degraded(self.fail_mode, why)


class Session:
    """One agent session's calls so far, as an index the engine's evaluators read, growing a call a time."""

    def __init__(self, guard: Guard, trace: Trace, history: list[Call]) -> None:
        """``trace``: the session so far without its calls (its id, messages, context and metadata)."""
        self.guard = guard
        self.session_id = trace.trace_id or ""
        self.context = trace.context
        self.metadata = trace.metadata
        # The session as a trace (lineage rules read its calls' outputs and its user messages), indexed.
        self.calls = Calls(trace, guard.engine.singles)
        self.trace = trace
        self.index = self.calls.index
        # Each rule the session broke, with the calls that broke it set aside (key: the rule's position).
        self.asides: dict[int, SetAside] = {}
        self._broken: dict[int, int] = {}  # a rule found broken in this decision: its first violation
        self._position = {id(comp): k for k, comp in enumerate(guard.engine.compiled)}
        # One call at a time: a decision tries its call on the shared index and takes it back, so a host
        # deciding parallel tool calls from several threads must not interleave them.
        self._lock = threading.Lock()
        steps = assign_steps(history)
        for call, step in zip(history, steps, strict=True):
            self.calls.append(call, step)

    def record(
        self,
        tool: str,
        args: dict[str, Any],
        *,
        output: Any = None,
        status: Literal["ok", "error"] = "ok",
        call_id: str | None = None,
        same_step: bool = False,
    ) -> None:
        """The call ran (``status`` ok or error, with its ``output``): the session's state advances.
        ``same_step``: it ran in parallel with the last recorded call (neither precedes the other)."""
        if status not in ("ok", "error"):
            raise GuardError(f"a call's status is 'ok' or 'error', not {status!r}")
        call = Call(tool_name=tool, arguments=args, status=status, output=output, id=call_id)
        with self._lock:
            self.calls.append(call, self.calls.next_step(same_step))

    def decide(
        self, tool: str, args: dict[str, Any], *, call_id: str | None = None, same_step: bool = False
    ) -> Decision:
        """Decide the proposed call ``tool(args)`` after the session's calls; the state does not advance.
        ``same_step``: the call runs in parallel with the last recorded one (else it is a step of its own).
        An error inside the guard is a decision of its fail mode, said in ``degraded``."""
        try:
            with self._lock:
                return self._decide(Call(tool_name=tool, arguments=args, id=call_id), same_step)
        except GuardError as exc:  # (its message is ours: rules, paths, the judge's trouble)
            return self.guard.degraded(str(exc))
        except Exception as exc:  # the host must get a decision, never the guard's exception
            return self.guard.degraded(f"internal error: {type(exc).__name__}")

    def _decide(self, call: Call, same_step: bool) -> Decision:
        compiled = self.guard.engine.compiled
        self._broken.clear()  # (left by a decision an error ended)
        step = self.calls.next_step(same_step)
        out = self._try(self.calls, call, step, compiled, self._rule)
        self._certain(self.calls, call, step, compiled, out)
        for k, first in self._broken.items():
            self.asides[k] = SetAside(
                self.calls, self.guard.engine.singles, partial(self._flagged, compiled[k]), first
            )
        self._broken.clear()
        for k, aside in self.asides.items():
            # A rule the session broke: the call decided as if the calls that broke it had not run.
            aside.catch_up()
            comps = [compiled[k]]
            own = self._try(aside.calls, call, aside.step_for(step), comps, self._violation)
            self._certain(aside.calls, call, aside.step_for(step), comps, own)
            out[k] = aside.told(own[0])
        return Decision.of(out)

    def _certain(
        self, calls: Calls, call: Call, step: int, comps: list[_Compiled], out: list[RuleDecision]
    ) -> None:
        """A rule's deny in ``out`` stands only if the call would be a violation when it fails too."""
        # (a rule the model judged denies as judged: a judge rule counts every attempt)
        denied = [k for k, d in enumerate(out) if d.outcome == "deny" and comps[k].type != "judge"]
        if not denied:
            return
        failed = call.model_copy(update={"status": "error"})
        again = self._try(calls, failed, step, [comps[k] for k in denied], self._violation)
        for k, d in zip(denied, again, strict=True):
            if d.outcome != "deny":
                out[k] = RuleDecision(
                    out[k].rule_id,
                    "allow",
                    f"{out[k].message} (a violation only if the call succeeds: decided once it has run)",
                )

    def _try(
        self, calls: Calls, call: Call, step: int, comps: list[_Compiled], decide: _Decider
    ) -> list[RuleDecision]:
        """Each rule's decision (``decide``) on ``call`` added to ``calls`` in ``step``, then taken back."""
        i = calls.append(call, step)
        try:
            view = View(calls.index, explain=False)
            return [
                decide(comp, calls, i, view) or RuleDecision(comp.rule_id, "allow", "holds") for comp in comps
            ]
        finally:
            calls.pop()

    def _finding(self, comp: _Compiled, calls: Calls, i: int, view: View) -> Finding | None:
        """The rule's finding where a violation at call ``i`` would be: the whole index, or for a ``same:``
        rule the call's group alone (None: the call carries none of the arguments)."""
        if comp.same is None:
            return self.guard.engine.finding(comp, view, {})
        return self.guard.engine.group_finding(comp, calls.grouping(comp.same_key), i)

    def _flagged(self, comp: _Compiled, calls: Calls, i: int) -> bool:
        """Does the rule have a look-back violation at call ``i`` (the last of ``calls``)?"""
        finding = self._finding(comp, calls, i, View(calls.index, explain=False))
        kinds = comp.rule.guard_kinds
        return finding is not None and any(f.offending == i and f.type in kinds for f in finding.flaws)

    def _violation(self, comp: _Compiled, calls: Calls, i: int, view: View) -> RuleDecision | None:
        """The rule's deny of call ``i`` (the last), when its finding has a look-back violation at it."""
        finding = self._finding(comp, calls, i, view)
        if finding is None:
            return None
        kinds = comp.rule.guard_kinds
        earlier = None
        for flaw in finding.flaws:
            if flaw.offending == i and flaw.type in kinds:
                return RuleDecision(comp.rule_id, "deny", flaw.explanation, flaw.suggestion)
            if flaw.offending is not None and flaw.offending < i and flaw.type in kinds:
                earlier = flaw.offending if earlier is None else min(earlier, flaw.offending)
        if earlier is not None and calls is self.calls:
            # The engine reports a rule's first violation, which the session made: the rule is decided from
            # now on without the calls that broke it (``SetAside``), once this call is taken back. The calls
            # before the first violation hold; a `same:` rule's finding here is the call's group's alone, and
            # another group may have broken it earlier: its calls are all read again.
            self._broken[self._position[id(comp)]] = earlier if comp.same is None else 0
            return None
        if finding.outcome == "deferred" and i in finding.call_indices:
            # A value of a call the rule checks (this one among them) that the engine cannot settle.
            return self._undecided(comp, finding.explanation, i, calls)
        return None

    def _rule(self, comp: _Compiled, calls: Calls, i: int, view: View) -> RuleDecision | None:
        """One rule on the proposed call ``i`` of the session; None: it holds (or it is broken: decided
        on its ``SetAside``)."""
        if comp.when and not context_matches(self.context, comp.when, self.metadata):
            return RuleDecision(comp.rule_id, "allow", _NOT_APPLICABLE)
        rule = comp.rule
        if comp.type == "judge":
            about = comp.operands[0] if comp.operands else None
            index = self.index
            if about is not None and about.hit(index.names[i], True, index.args[i]):
                return self._undecided(comp, "a rule written in words is about this call", i)
            return RuleDecision(comp.rule_id, "pending", str(rule.guard_at_end))
        if not rule.guard_kinds:
            why = f"decided when the session ends: {rule.guard_at_end}"
            return RuleDecision(comp.rule_id, "pending", why)
        if self.asides and self._position[id(comp)] in self.asides:
            return None
        return self._violation(comp, calls, i, view)

    def _undecided(
        self, comp: _Compiled, why: str, i: int | None = None, calls: Calls | None = None
    ) -> RuleDecision:
        """A rule only the judge (or a person) can decide on the proposed call ``i`` (None: on the whole
        session), as the guard's judge mode says."""
        model = self.guard.model_judge
        if model is not None:
            return self._judged(model, comp, i, calls or self.calls)
        if self.guard.judge == "ask":
            return RuleDecision(comp.rule_id, "ask", f"{why}: {comp.description}")
        return RuleDecision(comp.rule_id, "skipped", f"{why}; not judged (judge mode skip)")

    def _judged(self, model: ModelJudge, comp: _Compiled, i: int | None, calls: Calls) -> RuleDecision:
        """The model's decision of one rule: deny when it finds the rule broken at call ``i`` (anywhere,
        for the whole session), else allow; how long it took is said."""
        trace = calls.trace  # (the session's, or a broken rule's without the calls set aside)
        # A trace of its own: the session's caches the steps of the calls it had when it was made.
        asked = Trace(
            trace_id=trace.trace_id,
            calls=list(trace.calls),
            messages=trace.messages,
            context=trace.context,
            metadata=trace.metadata,
        )
        result, seconds = model.judge(asked, [comp.rule_id])
        said = f"judged by {model.name} in {seconds:.1f} s"
        assert result.report is not None
        for v in result.report.violations:
            if v.rule_id == comp.rule_id and (i is None or v.offending_call_index == i):
                return RuleDecision(comp.rule_id, "deny", f"{v.explanation} ({said})", None)
        return RuleDecision(comp.rule_id, "allow", f"holds ({said})")

    def finish(self) -> list[RuleDecision]:
        """Every rule on the whole session, as the offline engine finds it: ``deny`` for a violated rule
        (what was pending is decided now), ``allow`` for one that holds or was not exercised, ``skipped``
        or ``ask`` for what only the judge decides."""
        with self._lock:
            return self._finish()

    def _finish(self) -> list[RuleDecision]:
        out: list[RuleDecision] = []
        groupings: dict[tuple[str, ...], Grouping] = {}
        view = View(self.index, explain=True)
        for comp in self.guard.engine.compiled:
            if comp.when and not context_matches(self.context, comp.when, self.metadata):
                out.append(RuleDecision(comp.rule_id, "allow", _NOT_APPLICABLE))
                continue
            if comp.evaluate is None:
                out.append(self._undecided(comp, "a rule written in words"))
                continue
            finding = self.guard.engine.finding(comp, view, groupings)
            if finding.flaws:
                first = finding.flaws[0]
                out.append(RuleDecision(comp.rule_id, "deny", first.explanation, first.suggestion))
            elif finding.outcome == "deferred":
                out.append(self._undecided(comp, finding.explanation))
            else:
                out.append(RuleDecision(comp.rule_id, "allow", finding.explanation or finding.outcome))
        return out
