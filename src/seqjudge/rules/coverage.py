"""What a set of traces left unchecked of a rule set, so that a pass always means something was checked.

A rule evaluated on no trace, or one naming a tool that no trace calls (a typo such as
``cancel_pending_ordr``), lets every trace pass with nothing checked. ``Coverage`` is filled as traces are
checked (``seqjudge check`` and ``seqjudge run`` alike, one trace at a time) and says, when they are done:

- the rules exercised on no trace (``passed``, ``failed`` or ``deferred`` to the judge on none);
- each tool name a rule references (aliases expanded) that no trace called and the catalog does not list,
  with the closest name that the traces did call;
- with a catalog, per trace, the calls to tools that neither the catalog nor a rule names (a trace of
  another domain); a call a rule names, such as a blocklist hit, is that rule's business, never "outside";
- with a catalog, the referenced tools it lists that no trace called: reported as coverage, not a finding.

It holds sets of names, and the out-of-catalog calls of the first ``LISTED`` such traces (all are counted), so
memory stays small however many traces pass through. ``--strict`` turns any of these into exit 2.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from seqjudge.rules.problems import suggest
from seqjudge.rules.select import expand_name, operand_names
from seqjudge.rules.types.blocklist import BlocklistRule
from seqjudge.trace import PlainTrace, Trace

if TYPE_CHECKING:
    from seqjudge.rules.catalog import Catalog
    from seqjudge.rules.model import RuleSet

LISTED = 1000  # traces whose out-of-catalog calls are kept by name; the rest are counted

# Outcomes in which a rule looked at something: the engine decided it, or handed it to the judge.
EXERCISED = frozenset({"passed", "failed", "deferred"})


def called(trace: Trace | PlainTrace) -> list[str]:
    """The tool names a trace calls, one per call (``Coverage.add`` keeps their set): a plain trace's own
    column, not a copy."""
    return trace.names if isinstance(trace, PlainTrace) else [c.tool_name for c in trace.calls]


def exercised_ids(rules: Iterable[dict[str, Any]]) -> list[str]:
    """The ids of a report's rule entries (as ``Engine.check_data`` writes them) that were exercised."""
    return [r["rule_id"] for r in rules if r["outcome"] in EXERCISED]


@dataclass
class Coverage:
    rule_ids: list[str]
    referenced: dict[str, list[str]]  # tool name (aliases expanded) -> ids of the rules naming it
    catalog: frozenset[str] | None = None
    catalog_name: str | None = None
    traces: int = 0
    exercised: set[str] = field(default_factory=set)
    seen: set[str] = field(default_factory=set)  # tool names called in some trace
    out_of_catalog: dict[str, list[str]] = field(default_factory=dict)  # trace id -> tools, sorted
    outside: int = 0  # traces with calls outside the catalog, listed in out_of_catalog or not
    strict: bool = False  # the command fails on any finding (said once, where the findings are shown)
    # Blocklist patterns: a call matching one is a rule's business (a violation), not "outside the catalog".
    patterns: tuple[str, ...] = ()

    @classmethod
    def of(cls, ruleset: RuleSet, catalog: Catalog | None = None, *, strict: bool = False) -> Coverage:
        referenced: dict[str, list[str]] = {}
        for rule in ruleset.rules:
            for op in rule.operands():
                for name in operand_names(op):
                    for tool in expand_name(name, ruleset.aliases):
                        ids = referenced.setdefault(tool, [])
                        if rule.rule_id not in ids:
                            ids.append(rule.rule_id)
        return cls(
            rule_ids=[r.rule_id for r in ruleset.rules],
            referenced=referenced,
            patterns=tuple(r.pattern for r in ruleset.rules if isinstance(r, BlocklistRule)),
            catalog=frozenset(catalog.names()) if catalog is not None else None,
            catalog_name=(catalog.source or "the catalog") if catalog is not None else None,
            strict=strict,
        )

    def add_trace(
        self, trace: Trace | PlainTrace, rules: Iterable[dict[str, Any]], trace_id: Any = None
    ) -> None:
        """One checked trace and its report's rule entries (``Engine.check_data``'s ``rules``); ``trace_id``:
        the name to list it by, if not the trace's own id."""
        # Once every rule was exercised (after a few traces, usually) no report adds one: no scan.
        exercised = exercised_ids(rules) if len(self.exercised) < len(self.rule_ids) else ()
        if self.catalog is None and not exercised and isinstance(trace, PlainTrace):
            # ``add``'s whole work here, without its two calls (a check's every trace comes this way)
            self.traces += 1
            self.seen.update(trace.names)
            return
        self.add(trace.trace_id if trace_id is None else trace_id, exercised, called(trace))

    def add(self, trace_id: Any, exercised: Iterable[str], tools: Iterable[str]) -> None:
        """One checked trace: the ids of its exercised rules and the names of the tools it called."""
        self.traces += 1
        self.exercised.update(exercised)
        called = set(tools)
        self.seen |= called
        if self.catalog is not None and not called <= self.catalog:
            # A call a rule names (a blocklisted admin_unlock) is that rule's violation, exit 1; calling it
            # "outside the catalog" made --strict exit 2 on exactly what the blocklist exists to catch.
            outside = sorted(t for t in called - self.catalog if not self.names(t))
            if outside:
                self.outside += 1
                if len(self.out_of_catalog) < LISTED:
                    self.out_of_catalog[str(trace_id)] = outside

    def names(self, tool: str) -> bool:
        """Whether a rule names ``tool``: as an operand (aliases expanded) or by a blocklist pattern."""
        return tool in self.referenced or any(p in tool for p in self.patterns)

    def fresh(self) -> Coverage:
        """An empty coverage of the same rules and catalog, filled elsewhere (a worker process) and then
        ``merge``d into this one."""
        return replace(self, traces=0, exercised=set(), seen=set(), out_of_catalog={}, outside=0)

    def merge(self, part: Coverage) -> None:
        """Add ``part``'s traces (a ``fresh`` copy filled with the traces that follow these), as ``add``
        would have one by one."""
        self.traces += part.traces
        self.exercised |= part.exercised
        self.seen |= part.seen
        self.outside += part.outside
        for trace_id, tools in part.out_of_catalog.items():
            if len(self.out_of_catalog) >= LISTED:
                break
            self.out_of_catalog[trace_id] = tools

    # -- findings ----------------------------------------------------------------------------------------
    def unexercised(self) -> list[str]:
        """Rules exercised on no trace, in file order (none when no trace was read: nothing to say)."""
        if not self.traces:
            return []
        return [r for r in self.rule_ids if r not in self.exercised]

    def unknown_tools(self) -> list[dict[str, Any]]:
        """Referenced tools that no trace called and the catalog does not list, each with the rules naming
        it and the closest tool name the traces did call (None when none is close)."""
        if not self.traces:
            return []
        seen = sorted(self.seen)
        return [
            {"tool": tool, "rules": ids, "did_you_mean": suggest(tool, seen)}
            for tool, ids in self.referenced.items()
            if tool not in self.seen and (self.catalog is None or tool not in self.catalog)
        ]

    def catalog_not_called(self) -> list[dict[str, Any]]:
        """Referenced tools the catalog lists but no trace called: the name is right (no typo to suggest),
        the input just never tried those rules on that tool. Coverage to report, not a finding ``--strict``
        fails on: a suite need not exercise every tool its catalog offers."""
        if not self.traces or self.catalog is None:
            return []
        return [
            {"tool": tool, "rules": ids}
            for tool, ids in self.referenced.items()
            if tool not in self.seen and tool in self.catalog
        ]

    def strict_error(self) -> str | None:
        """Under ``strict``, the one-line reason the command fails; else None."""
        if not self.strict or not self.warnings():
            return None
        counts = [
            (len(self.unexercised()), "rule(s) exercised on no trace"),
            (len(self.unknown_tools()), "referenced tool(s) called in no trace"),
            (self.outside, "trace(s) calling tools outside the catalog"),
        ]
        return "--strict: " + ", ".join(f"{n} {what}" for n, what in counts if n)

    def warnings(self) -> int:
        """How many findings there are (``--strict`` fails on any)."""
        return len(self.unexercised()) + len(self.unknown_tools()) + self.outside

    def as_dict(self) -> dict[str, Any]:
        """The findings for machine outputs (the JSON summaries of check and run)."""
        return {
            "rules_not_exercised": self.unexercised(),
            "unknown_tools": self.unknown_tools(),
            "catalog": self.catalog_name,
            "calls_outside_catalog": dict(self.out_of_catalog),
            "traces_outside_catalog": self.outside,
            "catalog_tools_not_called": self.catalog_not_called(),
        }
