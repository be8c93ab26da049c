"""Static checks of a rule set: precedence cycles, tool names against a catalog, odd aliases and `when`s.

Precedence edges ("x must come before y"), over tool names after alias expansion:
- ``before`` (and dependency specs, which load as ``before``): each name of ``first`` -> each of ``then``;
- ``sequence``: each member -> the next member (a member repeated later adds no edge back);
- ``trajectory`` in modes ``precedence``, ``in_order``, ``exact``: each expected tool -> the next.

An edge is *definite* when the rule forbids every trace in which ``y`` is called without an earlier ``x``.
Some edges are weaker: the earlier operand offers alternatives (``first: [A, B]`` is met by B alone), the
later one has ``args_match`` (other calls of that tool are not bound), the rule has ``same:`` or ``when:``,
a strict ``sequence`` (which ignores calls before its first tool) or an ``in_order`` trajectory. A cycle of
definite edges can never be satisfied by a trace that calls all its tools: ``find_cycles`` returns those (the
engine turns them into ``circular_dependency`` violations) and ``lint`` reports them as errors. A cycle that
needs a weaker edge may still be satisfiable, so ``lint`` reports it as a warning
(``find_cycles(..., include_conditional=True)``).
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from seqjudge.pattern import SEARCH_TIMEOUT, nested_quantifier
from seqjudge.rules.base import ArgsSelector, by_outcome_only
from seqjudge.rules.model import (
    BlocklistRule,
    RuleBase,
    RuleSet,
)
from seqjudge.rules.problems import suggest
from seqjudge.rules.select import Selector, compile_operand, expand_name, operand_names

if TYPE_CHECKING:  # the engine imports this module for find_cycles; only lint() with a catalog needs one
    from pathlib import Path

    from seqjudge.rules.catalog import Catalog

__all__ = [
    "Cycle",
    "LintProblem",
    "certificate_problems",
    "find_cycles",
    "lint",
    "rule_tool_names",
    "strong_components",
]


@dataclass
class Cycle:
    """A closed list of tools (``["A", "B", "A"]``) and the ids of the rules that contribute its edges."""

    tools: list[str]
    rule_ids: list[str]
    conditional: bool = False

    def text(self) -> str:
        return " -> ".join(self.tools)


@dataclass
class LintProblem:
    level: Literal["error", "warning"]
    rule_id: str | None
    where: str | None
    message: str
    hint: str | None = None
    code: str = ""  # a stable name for the kind of problem ("cycle", "unknown_tool", ...) for programs

    def render(self, source: str | None = None) -> str:
        place = ", ".join(p for p in (source, self.where) if p)
        text = f"{self.level}: " + (f"{place}: " if place else "") + self.message.rstrip(".") + "."
        if self.hint:
            text += " " + self.hint[:1].upper() + self.hint[1:].rstrip(".") + "."
        return text


@dataclass
class _Edge:
    src: str
    dst: str
    rule_id: str
    order: int  # the rule's position in the file, to list rule ids in file order
    definite: bool


@dataclass
class _Graph:
    nodes: list[str] = field(default_factory=list)
    edges: dict[tuple[str, str], list[_Edge]] = field(default_factory=dict)

    def add(self, edge: _Edge) -> None:
        if edge.src == edge.dst:
            return  # a tool before itself (first: [A, B], then: B) is satisfiable, not a cycle
        for n in (edge.src, edge.dst):
            if n not in self._seen:
                self._seen.add(n)
                self.nodes.append(n)
        self.edges.setdefault((edge.src, edge.dst), []).append(edge)

    def __post_init__(self) -> None:
        self._seen: set[str] = set()

    def adjacency(self, definite_only: bool) -> dict[str, list[str]]:
        adj: dict[str, list[str]] = {}
        for (a, b), edges in self.edges.items():
            if not definite_only or any(e.definite for e in edges):
                adj.setdefault(a, []).append(b)
        return adj


def _chain_edges(graph: _Graph, sels: list[Selector], rule_id: str, order: int, weak: bool) -> None:
    """Edges between consecutive members of a sequence or trajectory.

    A member is linked to the names that first appear in the next member that brings new names, so a
    repeat (``[A, B, A, C]``) does not add the impossible-looking edge ``B -> A``.
    """
    seen: set[str] = set()
    prev: Selector | None = None
    for sel in sels:
        new = [n for n in sorted(sel.all_names) if n not in seen]
        if not new:
            continue
        if prev is not None:
            src_names = sorted(prev.all_names)
            for s in src_names:
                for d in new:
                    definite = not weak and len(src_names) == 1 and d in sel.names
                    graph.add(_Edge(s, d, rule_id, order, definite))
        seen.update(new)
        prev = sel


def _graph(ruleset: RuleSet) -> _Graph:
    graph = _Graph()
    aliases = ruleset.aliases
    for order, rule in enumerate(ruleset.rules):
        ordering = rule.ordering()
        if ordering is None:
            continue
        kind, operands, weak = ordering
        weak = weak or bool(getattr(rule, "same", None)) or rule.when is not None
        sels = [compile_operand(op, aliases) for op in operands]
        if kind == "pairs":
            first, then = sels
            src_names = sorted(first.all_names)
            for s in src_names:
                for d in sorted(then.all_names):
                    definite = not weak and len(src_names) == 1 and d in then.names
                    graph.add(_Edge(s, d, rule.rule_id, order, definite))
        else:
            _chain_edges(graph, sels, rule.rule_id, order, weak)
    return graph


def strong_components(nodes: list[str], adj: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively (rule files can chain many tools)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(adj.get(root, ())))]
        while work:
            v, it = work[-1]
            pushed = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(adj.get(w, ()))))
                    pushed = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if pushed:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index[v]:
                comp: list[str] = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return out


def _cycle_in(comp: list[str], adj: dict[str, list[str]], rank: dict[str, int]) -> list[str]:
    """The shortest closed walk through the component's first-written tool (BFS)."""
    members = set(comp)
    start = min(comp, key=rank.__getitem__)
    parent: dict[str, str] = {}
    queue = deque([start])
    while queue:
        u = queue.popleft()
        for w in adj.get(u, ()):
            if w not in members:
                continue
            if w == start:
                path = [u]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return list(reversed(path)) + [start]
            if w not in parent:
                parent[w] = u
                queue.append(w)
    raise AssertionError("a strongly connected component always has a cycle")  # pragma: no cover


def _make_cycle(tools: list[str], graph: _Graph, definite_only: bool, conditional: bool) -> Cycle:
    used: list[_Edge] = []
    for a, b in zip(tools, tools[1:], strict=False):
        used.extend(e for e in graph.edges[(a, b)] if e.definite or not definite_only)
    ids: list[str] = []
    for e in sorted(used, key=lambda e: e.order):
        if e.rule_id not in ids:
            ids.append(e.rule_id)
    return Cycle(tools=tools, rule_ids=ids, conditional=conditional)


def find_cycles(ruleset: RuleSet, *, include_conditional: bool = False) -> list[Cycle]:
    """One cycle per strongly connected component of the precedence graph.

    By default only cycles of definite edges (unsatisfiable by any trace calling all their tools); with
    ``include_conditional`` also one cycle per further component that needs a weaker edge.
    """
    graph = _graph(ruleset)
    rank = {n: i for i, n in enumerate(graph.nodes)}
    strong_adj = graph.adjacency(definite_only=True)
    strong = strong_components(graph.nodes, strong_adj)
    cycles = [_make_cycle(_cycle_in(c, strong_adj, rank), graph, True, False) for c in strong]
    if include_conditional:
        all_adj = graph.adjacency(definite_only=False)
        covered = [set(c) for c in strong]
        for comp in strong_components(graph.nodes, all_adj):
            if any(s <= set(comp) for s in covered):
                continue
            cycles.append(_make_cycle(_cycle_in(comp, all_adj, rank), graph, False, True))
    cycles.sort(key=lambda c: rank[c.tools[0]])
    return cycles


# ------------------------------------------------------------------------------------------------------
# lint


def rule_tool_names(rule: RuleBase) -> list[str]:
    """Every tool or alias name a rule mentions as written (its operands, as its type declares them)."""
    names: list[str] = []
    for op in rule.operands():
        names.extend(operand_names(op))
    return list(dict.fromkeys(names))


def _distance(a: str, b: str, limit: int) -> int:
    """Levenshtein distance, giving up (returning limit + 1) once it exceeds ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        if min(cur) > limit:
            return limit + 1
        prev = cur
    return prev[-1]


def lint(
    ruleset: RuleSet, catalog: Catalog | None = None, *, locations: dict[str, str] | None = None
) -> list[LintProblem]:
    """Every problem of a loaded rule set, errors first in file order, then warnings.

    ``locations`` (from ``load_rules_located``) maps rule ids and ``aliases.NAME`` to where they are written.
    """
    locs = locations or {}
    out: list[LintProblem] = []
    aliases = ruleset.aliases

    for cy in find_cycles(ruleset, include_conditional=True):
        first = cy.rule_ids[0] if cy.rule_ids else None
        ids = ", ".join(cy.rule_ids)
        if not cy.conditional:
            out.append(
                LintProblem(
                    "error",
                    first,
                    locs.get(first or ""),
                    f"circular precedence {cy.text()} (rules: {ids}): each tool must come before "
                    "the next, so no trace that calls all of them can satisfy every rule",
                    "remove or reverse one of these rules",
                    code="cycle",
                )
            )
        else:
            out.append(
                LintProblem(
                    "warning",
                    first,
                    locs.get(first or ""),
                    f"possible circular precedence {cy.text()} (rules: {ids}): it is satisfiable only "
                    "through an alternative tool, args_match, same:, when:, a strict sequence or an "
                    "in_order trajectory",
                    "check that this is intended",
                    code="possible_cycle",
                )
            )

    used_aliases: set[str] = set()
    mentioned: dict[str, list[str]] = {}  # name -> rule ids (for the no-catalog spelling check)
    for rule in ruleset.rules:
        for name in rule_tool_names(rule):
            if name in aliases:
                used_aliases.add(name)
                _alias_closure(name, aliases, used_aliases)
            mentioned.setdefault(name, []).append(rule.rule_id)

    if catalog is not None:
        known = set(catalog.names())
        cat_name = catalog.source or "the catalog"
        for rule in ruleset.rules:
            for name in rule_tool_names(rule):
                if name not in known and name not in aliases:
                    out.append(
                        LintProblem(
                            "error",
                            rule.rule_id,
                            locs.get(rule.rule_id),
                            f"rule {rule.rule_id!r} names tool {name!r}, which is neither in the catalog "
                            f"({cat_name}) nor an alias",
                            _name_hint(name, catalog),
                        )
                    )
            if isinstance(rule, BlocklistRule) and not any(rule.pattern in n for n in known):
                out.append(
                    LintProblem(
                        "warning",
                        rule.rule_id,
                        locs.get(rule.rule_id),
                        f"blocklist pattern {rule.pattern!r} matches no tool in the catalog ({cat_name})",
                        "that may be intended (a tool that must never appear), or the pattern is misspelt",
                    )
                )
        out.extend(_argument_problems(ruleset, catalog, locs))
        for alias, members in aliases.items():
            where = locs.get(f"aliases.{alias}")
            for m in members:
                if m not in known and m not in aliases:
                    out.append(
                        LintProblem(
                            "error",
                            None,
                            where,
                            f"alias {alias!r} lists tool {m!r}, which is neither in the catalog "
                            f"({cat_name}) nor an alias",
                            _name_hint(m, catalog),
                        )
                    )
            if alias in known:
                out.append(
                    LintProblem(
                        "warning",
                        None,
                        where,
                        f"alias {alias!r} has the name of a catalog tool: rules naming {alias!r} match the "
                        "alias's members, never the tool itself",
                        "rename the alias",
                    )
                )
    else:
        out.append(
            LintProblem(
                "warning",
                None,
                None,
                "no catalog given, so tool names were not checked against the agent's tools",
                "pass --catalog FILE or add `catalog: FILE` to the rule file",
            )
        )
        out.extend(_spelling(mentioned, aliases, locs))

    for alias in aliases:
        if alias not in used_aliases:
            out.append(
                LintProblem(
                    "warning",
                    None,
                    locs.get(f"aliases.{alias}"),
                    f"alias {alias!r} is not used by any rule",
                    "remove it or use it",
                )
            )

    for rule in ruleset.rules:
        out.extend(_when_problems(rule.rule_id, rule.when, locs.get(rule.rule_id)))
        for key, pattern in _arg_patterns(rule):
            if nested_quantifier(pattern):
                out.append(
                    LintProblem(
                        "warning",
                        rule.rule_id,
                        locs.get(rule.rule_id),
                        f"args_match.{key} = {pattern!r} repeats a group that itself repeats (a nested "
                        "quantifier): searching it can take time exponential in the argument's length, "
                        f"and a search past {SEARCH_TIMEOUT} s stops the check with an error",
                        "rewrite it without the outer repeat (`(a+)+` matches what `a+` matches)",
                        code="slow_pattern",
                    )
                )

    if ruleset.rules and all(r.type == "judge" for r in ruleset.rules):
        out.append(LintProblem("warning", None, None, JUDGE_ONLY_WARNING, JUDGE_ONLY_HINT, code="judge_only"))

    return [p for p in out if p.level == "error"] + [p for p in out if p.level == "warning"]


def certificate_problems(ruleset: RuleSet, folder: Path) -> list[LintProblem]:
    """A warning naming the `judge` rules no calibration certificate in ``folder`` covers for these rules
    and this prompt template (any model: lint knows none; a run with another model is still uncertified)."""
    from seqjudge.certificate import load_certificates, rules_hash, template_hash

    judge_rules = [r.rule_id for r in ruleset.rules if r.type == "judge"]
    if not judge_rules:
        return []
    key = (template_hash(), rules_hash(ruleset))
    covered = {
        entry.rule_id
        for cert in load_certificates(folder)
        if (cert.template_hash, cert.rules_hash) == key
        for entry in cert.rules
    }
    missing = [rid for rid in judge_rules if rid not in covered]
    if not missing:
        return []
    return [
        LintProblem(
            "warning",
            missing[0],
            None,
            f"judge rule(s) {', '.join(missing)} have no calibration certificate in {folder} for these "
            "rules: a run's judge findings on them are advisory, so a trace the judge fails goes to review "
            "(uncertified_judge_fail) and never to the verdict, the score or compare's gate",
            "`seqjudge calibrate DATASET --model MODEL` on a labelled dataset certifies them for that model "
            "(--store says where the certificates are)",
            code="uncertified_judge",
        )
    ]


# A rule set of `judge` rules alone is decided by the model alone: text in a trace that talks the judge
# into a pass meets no engine verdict that would contradict it (issue 15.10). Said by `lint` and by a run.
JUDGE_ONLY_WARNING = (
    "every rule is a `judge` rule, so no deterministic rule cross-checks the model: a trace whose text "
    "persuades the judge (prompt injection) can pass unchallenged"
)
JUDGE_ONLY_HINT = (
    "add deterministic rules (before, require, never_after, ...) for what can be stated exactly, and for "
    "high-risk suites have people audit a sample of judged traces (`seqjudge review`)"
)


def _arg_patterns(rule: object) -> list[tuple[str, str]]:
    """(argument, pattern) of every ``args_match`` in a rule's operands."""
    found: list[tuple[str, str]] = []
    stack: list[object] = list(vars(rule).values())
    while stack:
        value = stack.pop()
        if isinstance(value, ArgsSelector):
            found.extend(value.args_match.items())
        elif isinstance(value, list):
            stack.extend(value)
    return found


def _argument_problems(ruleset: RuleSet, catalog: Catalog, locs: dict[str, str]) -> list[LintProblem]:
    """``args_match`` and ``same:`` naming an argument that the catalog's schemas of the tools concerned do
    not have: such a selector matches no call (a call without the argument never matches), and such a
    ``same:`` puts no call in any group, so the rule checks nothing. Decided only when every tool concerned
    is in the catalog with a schema (a tool listed without parameters may take any)."""
    aliases = ruleset.aliases
    out: list[LintProblem] = []

    def schemas(names: list[str]) -> list[dict[str, object]] | None:
        tools = [t for n in names for t in expand_name(n, aliases)]
        specs = [catalog.tools.get(t) for t in tools]
        if not tools or any(s is None or not s.parameters for s in specs):
            return None
        return [s.parameters for s in specs if s is not None]

    def check(rule: RuleBase, argument: str, names: list[str], field: str, effect: str) -> None:
        known = schemas(names)
        if known is None or any(argument in params for params in known):
            return
        choices = sorted({a for params in known for a in params})
        guess = suggest(argument, choices)
        out.append(
            LintProblem(
                "error",
                rule.rule_id,
                locs.get(rule.rule_id),
                f"rule {rule.rule_id!r}: {field} names argument {argument!r}, which the catalog's schema of "
                f"{', '.join(dict.fromkeys(names))} does not have, so {effect}",
                (f"did you mean {guess!r}? The" if guess else "the")
                + f" catalog's arguments are: {', '.join(choices)}",
                code="unknown_argument",
            )
        )

    for rule in ruleset.rules:
        for op in rule.operands():
            for item in op if isinstance(op, list) else [op]:
                if isinstance(item, ArgsSelector):
                    names = [item.tool] if isinstance(item.tool, str) else list(item.tool)
                    for argument in item.args_match:
                        check(rule, argument, names, f"args_match.{argument}", "the operand selects no call")
        for argument in getattr(rule, "same", None) or []:
            check(rule, argument, rule_tool_names(rule), "same:", "no call is in any group")
        if rule.type == "lineage":
            # The argument path's first name must be an argument of the checked tools (a lineage rule's
            # other operands are its sources, whose arguments it does not read).
            head = _PATH_HEAD.match(rule.argument)  # type: ignore[attr-defined]
            if head:
                tools = operand_names(rule.tool)  # type: ignore[attr-defined]
                check(
                    rule, head.group(0), tools, "argument:", "no call carries it and the rule checks nothing"
                )
    return out


_PATH_HEAD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _alias_closure(name: str, aliases: dict[str, list[str]], used: set[str]) -> None:
    stack = list(aliases.get(name, ()))
    while stack:
        m = stack.pop()
        if m in aliases and m not in used:
            used.add(m)
            stack.extend(aliases[m])


def _name_hint(name: str, catalog: Catalog) -> str:
    guess = catalog.closest(name)
    if guess:
        return f"did you mean {guess!r}?"
    names = catalog.names()
    shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
    return f"the catalog has {len(names)} tools: {shown}; or define {name!r} under aliases:"


def _spelling(
    mentioned: dict[str, list[str]], aliases: dict[str, list[str]], locs: dict[str, str]
) -> list[LintProblem]:
    """Without a catalog: a name used once that is one or two edits from a name used more often is
    probably a typo (VerifyIdentiy next to VerifyIdentity), which would make its rule silently inert."""
    counts = {n: len(ids) for n, ids in mentioned.items()}
    for members in aliases.values():
        for m in members:
            counts[m] = counts.get(m, 0) + 1
    out: list[LintProblem] = []
    names = list(counts)
    for name in names:
        if counts[name] != 1 or name in aliases or len(name) < 5:
            continue
        limit = 1 if len(name) < 10 else 2
        for other in names:
            if other == name or counts[other] < 2:
                continue
            if name.lower() == other.lower() or _distance(name, other, limit) <= limit:
                rid = mentioned.get(name, [None])[0]
                out.append(
                    LintProblem(
                        "warning",
                        rid,
                        locs.get(rid or ""),
                        f"tool name {name!r} is used once and looks like a misspelling of {other!r}",
                        f"write {other!r} if that is meant, or pass --catalog to check names",
                    )
                )
                break
    return out


def _when_problems(rule_id: str, when: dict[str, object] | None, where: str | None) -> list[LintProblem]:
    if when is None:
        return []
    out: list[LintProblem] = []
    if not when:
        out.append(
            LintProblem(
                "warning",
                rule_id,
                where,
                f"rule {rule_id!r} has an empty when:, so it applies to every trace",
                "remove when: or give the context paths it depends on",
            )
        )
    for path in when:
        parts = path.split(".")
        if not path.strip() or any(not p.strip() for p in parts):
            out.append(
                LintProblem(
                    "warning",
                    rule_id,
                    where,
                    f"rule {rule_id!r}: when path {path!r} has an empty part",
                    "write dotted paths like user.role, without leading, trailing or double dots",
                )
            )
        elif path != path.strip() or any(p != p.strip() for p in parts):
            out.append(
                LintProblem(
                    "warning",
                    rule_id,
                    where,
                    f"rule {rule_id!r}: when path {path!r} has spaces around a part",
                    "remove the spaces: keys are matched exactly",
                )
            )
    return out


def guard_problems(ruleset: RuleSet, locations: dict[str, str] | None = None) -> list[LintProblem]:
    """What a guard before each call (``seqjudge guard``) cannot enforce of this rule set, rule by rule:
    rules that only make sense offline (nothing to deny before a call), and look-back rules whose call
    counts by its outcome (never certain before it runs). Each rule type says what it decides
    (``guard_kinds``, ``guard_at_end``, ``guard_operand``); a rule decided partly at the session's end is
    not a problem: the guard reports it when the session finishes."""
    locs = locations or {}
    out: list[LintProblem] = []
    for rule in ruleset.rules:
        where = locs.get(rule.rule_id)
        if not rule.guard_kinds:
            hint = (
                "run it with `--judge ask` to hand each call it is about to a person, or keep it for offline "
                "checks"
                if rule.type == "judge"
                else "keep it for offline checks (`seqjudge check`); the guard decides it at the end"
            )
            out.append(
                LintProblem(
                    "warning",
                    rule.rule_id,
                    where,
                    f"rule {rule.rule_id!r} ({rule.type}) only makes sense offline: nothing can be denied "
                    f"before a call, because {rule.guard_at_end}",
                    hint,
                    code="offline_only",
                )
            )
            continue
        field = rule.guard_operand
        if field and by_outcome_only(getattr(rule, field)):
            out.append(
                LintProblem(
                    "warning",
                    rule.rule_id,
                    where,
                    f"rule {rule.rule_id!r}: its {field} counts calls by outcome (status:), so a violation "
                    "is known only after the call ran and the guard never denies it",
                    f"the guard reports it when the session ends; drop `status:` from {field} if every "
                    "attempt should count (the guard then denies the attempt)",
                    code="guard_blind",
                )
            )
    return out
