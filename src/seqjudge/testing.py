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
``deferred`` and never fail an assertion. The assertion fails when the verdict is not ``pass`` (a failed
critical rule, or a score under ``threshold``, or under 1.0 with ``risk_level="high"``), or with
``strict=True`` on any violation; its message is the ``← violation`` block of every violation.
A relative rules path in the marker is taken from the test file's folder first, then the working folder.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seqjudge.outputs.textview import trace_line, violation_block
from seqjudge.report import DEFAULT_THRESHOLD, Report, RiskLevel
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


def failure_message(trace: Trace, report: Report) -> str:
    blocks = [violation_block(trace, report, v) for v in report.violations]
    why = f"verdict {report.verdict}" + (f": {report.summary}" if report.summary else "")
    return "\n\n".join([*blocks, trace_line(report), why])


def _failing(report: Report, strict: bool) -> bool:
    return report.verdict != "pass" or (strict and bool(report.violations))


def assert_sequence(
    trace: TraceLike,
    rules: RulesLike,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    risk_level: RiskLevel = "medium",
    strict: bool = False,
) -> Report:
    """Raise ``AssertionError`` (the actionable block of every violation) unless the trace passes; return
    the report when it does."""
    __tracebackhide__ = True  # pytest shows the user's line, not this one
    one = to_trace(trace)
    report = check(one, rules, threshold=threshold, risk_level=risk_level)
    if _failing(report, strict):
        raise AssertionError(failure_message(one, report))
    return report


def assert_sequences(
    traces: TraceLike | Iterable[Trace],
    rules: RulesLike,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    risk_level: RiskLevel = "medium",
    strict: bool = False,
) -> list[Report]:
    """Every trace of a file, folder or iterable; one ``AssertionError`` listing every failing trace."""
    __tracebackhide__ = True
    from seqjudge.rules.engine import Engine

    if isinstance(traces, Trace | Mapping | str | Path):
        items = _traces(traces)
    else:
        items = [t if isinstance(t, Trace) else to_trace(t) for t in traces]
    engine = Engine(load_ruleset(rules))
    reports = [engine.check(t, threshold=threshold, risk_level=risk_level) for t in items]
    failing = [failure_message(t, r) for t, r in zip(items, reports, strict=True) if _failing(r, strict)]
    if failing:
        head = f"{len(failing)} of {len(items)} trace(s) did not pass"
        raise AssertionError("\n\n".join([head, *failing]))
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
    ) -> None:
        self._rules = rules
        self._loaded: RuleSet | None = None
        self.threshold = threshold
        self.risk_level: RiskLevel = risk_level

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
        opts = {"threshold": self.threshold, "risk_level": self.risk_level, **options}
        return assert_sequence(trace, self._pick(rules), **opts)


def _marker_rules(value: Any, test_path: Path | None) -> Any:
    if not isinstance(value, str | Path) or Path(value).is_absolute() or test_path is None:
        return value
    beside = test_path.parent / value
    return beside if beside.exists() else value


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(rules=PATH, threshold=0.85, risk_level='medium'): default rules and options of the "
        "`seqjudge` fixture in this test",
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
        unknown = set(options) - {"rules", "threshold", "risk_level"}
        if unknown:
            raise TypeError(
                "@pytest.mark.seqjudge takes rules, threshold and risk_level, not "
                + ", ".join(sorted(unknown))
            )
        test_path = Path(str(request.node.path)) if getattr(request.node, "path", None) else None
        rules = _marker_rules(options.pop("rules", None), test_path)
        return SeqjudgeHelper(rules, **options)
