"""Check the traces your own tests produce: ``assert_sequence`` and a pytest plugin.

    from seqjudge.testing import assert_sequence

    def test_agent_reads_before_it_writes():
        trace = run_my_agent("cancel order 42")          # a Trace, a dict, a list of tool names, or a path
        assert_sequence(trace, "rules.yaml")             # AssertionError with the actionable message

With the plugin (registered as the ``pytest11`` entry point ``seqjudge``, or ``-p seqjudge.testing``):

    @pytest.mark.seqjudge(rules="rules.yaml")            # default rules for the fixture in this test
    def test_support_flow(seqjudge):
        report = seqjudge.check(trace)                   # the engine's Report, no assertion
        seqjudge.assert_sequence(trace)                  # or assert

Only the deterministic engine runs here (no model, no network): rules of type ``judge`` are reported
``deferred`` and never fail an assertion. The assertion fails

- when the verdict is not ``pass`` (a failed critical rule, or a score under ``threshold``, or under 1.0 with
  ``risk_level="high"``); its message is the ``← violation`` block of every violation;
- when a trace has no call, or had no rule checked (every rule ``not_exercised``, ``not_applicable`` or
  ``deferred``): an empty trace from a broken tracer is not a green test. ``allow_unexercised=True`` lets
  such a trace pass;
- with ``strict=True``, on what ``--strict`` fails on the command line (``seqjudge.rules.coverage``): a rule
  exercised on none of the traces, a tool a rule names that no trace calls (and the rule file's catalog does
  not list), a call to a tool outside that catalog. ``strict`` also fails on any violation, a warning that
  leaves the verdict ``pass`` included, as it always did; ``fail_on_warnings=False`` turns that part off
  (``fail_on_warnings=True`` without ``strict`` keeps only that part).

A relative rules path in the marker is taken from the test file's folder first, then the working folder.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seqjudge.outputs.textview import trace_line, violation_block
from seqjudge.report import DEFAULT_THRESHOLD, Report, RiskLevel
from seqjudge.rules.coverage import EXERCISED
from seqjudge.rules.model import RuleSet
from seqjudge.trace import Trace

if TYPE_CHECKING:
    import pytest

__all__ = ["SeqjudgeHelper", "assert_sequence", "assert_sequences", "check", "load_ruleset", "to_trace"]

TraceLike = Trace | Mapping[str, Any] | Sequence[Any] | str | Path
RulesLike = RuleSet | Mapping[str, Any] | str | Path
MARKER = "seqjudge"


def load_ruleset(rules: RulesLike) -> RuleSet:
    """A RuleSet as it is, a dict in any rule-file shape, or the path of a rule file."""
    if isinstance(rules, RuleSet):
        return rules
    if isinstance(rules, Mapping):
        from seqjudge.rules.load import parse_rules

        return parse_rules(dict(rules), source="<assert_sequence rules>")
    if isinstance(rules, str | Path):
        from seqjudge.rules.load import load_rules

        return load_rules(rules)
    raise TypeError(f"rules must be a RuleSet, a dict or a path, not {type(rules).__name__}")


def _traces(trace: TraceLike) -> list[Trace]:
    if isinstance(trace, Trace):
        return [trace]
    if isinstance(trace, str | Path):
        from seqjudge.ingest import load_traces

        return list(load_traces(trace))
    if isinstance(trace, Mapping):
        return [Trace.model_validate(dict(trace))]
    if isinstance(trace, Sequence):
        # The shorthands of the trace format: a list of tool names, or a list of calls.
        calls = [{"tool_name": c} if isinstance(c, str) else c for c in trace]
        return [Trace.model_validate({"trace_id": "trace", "calls": calls})]
    raise TypeError(f"trace must be a Trace, a dict, a list or a path, not {type(trace).__name__}")


def to_trace(trace: TraceLike) -> Trace:
    """One trace from any accepted form; a path must hold exactly one (see ``assert_sequences``)."""
    traces = _traces(trace)
    if len(traces) != 1:
        raise ValueError(
            f"{trace} holds {len(traces)} traces, not one: use seqjudge.testing.assert_sequences for several"
        )
    return traces[0]


def check(
    trace: TraceLike,
    rules: RulesLike,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    risk_level: RiskLevel = "medium",
) -> Report:
    """The engine's report on one trace; never raises on violations."""
    from seqjudge.rules.engine import check as engine_check

    return engine_check(to_trace(trace), load_ruleset(rules), threshold=threshold, risk_level=risk_level)


# What makes a trace's test mean something: the engine decided at least one rule on it. (A `deferred` judge
# rule counts as exercised for coverage, which routes it to the judge; here no judge runs, so it checks
# nothing.)
CHECKED = frozenset({"passed", "failed"})
UNEXERCISED_HINT = "allow_unexercised=True lets a trace that no rule concerns (or an empty one) pass"


def _failing(trace: Trace, report: Report, fail_on_warnings: bool, allow_unexercised: bool) -> str | None:
    """Why ``report`` fails the assertion, in its message's last line; None when it passes."""
    if report.verdict != "pass":
        return f"verdict {report.verdict}" + (f": {report.summary}" if report.summary else "")
    if fail_on_warnings and report.violations:
        return f"{len(report.violations)} violation(s) with verdict pass, and strict (fail_on_warnings) is on"
    if not allow_unexercised and not trace.calls:
        # A `max_calls` or `blocklist` rule passes an empty trace: checked, but of nothing the agent did.
        return f"the trace has no call (an empty trace from a broken tracer?); {UNEXERCISED_HINT}"
    if not allow_unexercised and not any(r.outcome in CHECKED for r in report.rules):
        outcomes = ", ".join(f"{r.rule_id}: {r.outcome}" for r in report.rules) or "the rule set is empty"
        return f"no rule was checked on this trace ({outcomes}); {UNEXERCISED_HINT}"
    return None


def _coverage_failure(ruleset: RuleSet, traces: list[Trace], reports: list[Report]) -> str | None:
    """What ``--strict`` fails on over ``traces`` (``seqjudge.rules.coverage``, with the rule file's catalog),
    as the command line's lines; None when there is nothing."""
    from seqjudge.inputs import catalog_path, read_catalog
    from seqjudge.outputs.coverage import coverage_lines
    from seqjudge.rules.coverage import Coverage, called

    path = catalog_path(ruleset)
    coverage = Coverage.of(ruleset, read_catalog(path) if path is not None else None, strict=True)
    for trace, report in zip(traces, reports, strict=True):
        coverage.add(
            trace.trace_id, [r.rule_id for r in report.rules if r.outcome in EXERCISED], called(trace)
        )
    failure = coverage.strict_error()
    return None if failure is None else "\n".join([failure, *coverage_lines(coverage)])


def assert_sequence(
    trace: TraceLike,
    rules: RulesLike,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    risk_level: RiskLevel = "medium",
    strict: bool = False,
    allow_unexercised: bool = False,
    fail_on_warnings: bool | None = None,
) -> Report:
    """Raise ``AssertionError`` (the actionable block of every violation) unless the trace passes with at
    least one rule checked; return the report when it does.

    ``strict``: also fail on what ``--strict`` fails on (a rule this trace does not exercise, a tool a rule
    names that it does not call, a call outside the rule file's catalog) and, unless ``fail_on_warnings`` is
    False, on any violation. ``allow_unexercised``: a trace on which no rule was checked passes."""
    __tracebackhide__ = True  # pytest shows the user's line, not this one
    options = (threshold, risk_level, strict, allow_unexercised, fail_on_warnings)
    return _assert_all([to_trace(trace)], load_ruleset(rules), *options, head=False)[0]


def assert_sequences(
    traces: TraceLike | Iterable[Trace],
    rules: RulesLike,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    risk_level: RiskLevel = "medium",
    strict: bool = False,
    allow_unexercised: bool = False,
    fail_on_warnings: bool | None = None,
) -> list[Report]:
    """Every trace of a file, folder or iterable; one ``AssertionError`` listing every failing trace, and
    under ``strict`` what ``--strict`` fails on over them all. No trace at all fails unless
    ``allow_unexercised``. ``strict``, ``allow_unexercised``, ``fail_on_warnings``: as in
    ``assert_sequence``."""
    __tracebackhide__ = True
    if isinstance(traces, Trace | Mapping | str | Path):
        items = _traces(traces)
    else:
        items = [t if isinstance(t, Trace) else to_trace(t) for t in traces]
    options = (threshold, risk_level, strict, allow_unexercised, fail_on_warnings)
    return _assert_all(items, load_ruleset(rules), *options, head=True)


def _assert_all(
    items: list[Trace],
    ruleset: RuleSet,
    threshold: float,
    risk_level: RiskLevel,
    strict: bool,
    allow_unexercised: bool,
    fail_on_warnings: bool | None,
    *,
    head: bool,
) -> list[Report]:
    """The assertion of both helpers; ``head``: begin the message with "N of M trace(s) did not pass"."""
    __tracebackhide__ = True
    from seqjudge.rules.engine import Engine

    engine = Engine(ruleset)
    reports = [engine.check(t, threshold=threshold, risk_level=risk_level) for t in items]
    warnings_fail = strict if fail_on_warnings is None else fail_on_warnings
    failing = []
    for t, r in zip(items, reports, strict=True):
        why = _failing(t, r, warnings_fail, allow_unexercised)
        if why is not None:
            failing.append(
                "\n\n".join([*(violation_block(t, r, v) for v in r.violations), trace_line(r), why])
            )
    if not items and not allow_unexercised:
        failing.append(
            "no trace to check (an empty file, folder or list); allow_unexercised=True lets it pass"
        )
    covered = _coverage_failure(ruleset, items, reports) if strict and items else None
    if failing or covered:
        heading = (
            [f"{len(failing)} of {len(items)} trace(s) did not pass"] if head and items and failing else []
        )
        raise AssertionError("\n\n".join([*heading, *failing, *([covered] if covered else [])]))
    return reports


# -- the pytest plugin ---------------------------------------------------------------------------------------
class SeqjudgeHelper:
    """The ``seqjudge`` fixture: ``check`` and ``assert_sequence`` with the marker's defaults."""

    def __init__(
        self,
        rules: RulesLike | None = None,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        risk_level: RiskLevel = "medium",
        strict: bool = False,
        allow_unexercised: bool = False,
    ) -> None:
        self._rules = rules
        self._loaded: RuleSet | None = None
        self.threshold = threshold
        self.risk_level: RiskLevel = risk_level
        self.strict = strict  # assert_sequence's defaults (check() has no such options)
        self.allow_unexercised = allow_unexercised

    @property
    def rules(self) -> RuleSet:
        if self._loaded is None:
            if self._rules is None:
                raise ValueError(
                    "no rules: pass rules= to seqjudge.check / seqjudge.assert_sequence, or mark the test "
                    '@pytest.mark.seqjudge(rules="rules.yaml")'
                )
            self._loaded = load_ruleset(self._rules)
        return self._loaded

    def _pick(self, rules: RulesLike | None) -> RuleSet:
        return self.rules if rules is None else load_ruleset(rules)

    def check(self, trace: TraceLike, rules: RulesLike | None = None, **options: Any) -> Report:
        opts = {"threshold": self.threshold, "risk_level": self.risk_level, **options}
        return check(trace, self._pick(rules), **opts)

    def assert_sequence(self, trace: TraceLike, rules: RulesLike | None = None, **options: Any) -> Report:
        __tracebackhide__ = True
        opts = {
            "threshold": self.threshold,
            "risk_level": self.risk_level,
            "strict": self.strict,
            "allow_unexercised": self.allow_unexercised,
            **options,
        }
        return assert_sequence(trace, self._pick(rules), **opts)


def _marker_rules(value: Any, test_path: Path | None) -> Any:
    if not isinstance(value, str | Path) or Path(value).is_absolute() or test_path is None:
        return value
    beside = test_path.parent / value
    return beside if beside.exists() else value


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(rules=PATH, threshold=0.85, risk_level='medium', strict=False, allow_unexercised=False): "
        "default rules and options of the `seqjudge` fixture in this test",
    )


try:  # the module is importable without pytest (assert_sequence needs none); the fixture needs it
    import pytest as _pytest
except ImportError:  # pragma: no cover - pytest is a test extra
    _pytest = None  # type: ignore[assignment]

if _pytest is not None:

    @_pytest.fixture(name="seqjudge")
    def seqjudge_fixture(request: pytest.FixtureRequest) -> SeqjudgeHelper:
        """Check traces against rules; ``@pytest.mark.seqjudge(rules=...)`` sets the defaults."""
        marker = request.node.get_closest_marker(MARKER)
        options: dict[str, Any] = dict(marker.kwargs) if marker else {}
        if marker and marker.args and "rules" not in options:
            options["rules"] = marker.args[0]
        unknown = set(options) - {"rules", "threshold", "risk_level", "strict", "allow_unexercised"}
        if unknown:
            raise TypeError(
                "@pytest.mark.seqjudge takes rules, threshold, risk_level, strict and allow_unexercised, not "
                + ", ".join(sorted(unknown))
            )
        test_path = Path(str(request.node.path)) if getattr(request.node, "path", None) else None
        rules = _marker_rules(options.pop("rules", None), test_path)
        return SeqjudgeHelper(rules, **options)
