"""The four rule-file shapes, read into one list of validated rules with unique ids.

Four shapes load to the same rules (they may also be combined in one mapping):

1. ``{rules: [...], aliases?: {Name: [tool, ...]}, catalog?: path}``
2. seed 002's eval.yaml: ``{tests: [{id, metric: sequence_valid, rules: [...]}]}``; each test's rules get
   ``group = test id``.
3. seed 000's dependency spec: a top-level list (or ``dependencies:``) of
   ``{id, step, requires, severity | hard, description}`` -> ``before`` rules (first=requires, then=step).
4. v0 ``{sequences: [[A, B], ...]}`` -> ``before`` rules for consecutive pairs, with a deprecation warning.

Each shape only checks its own structure and hands every rule on as a ``Spec``; ``rules.messages`` validates
the rules themselves. Rules without an id get a derived one, made unique here.

Alias decisions (the issue leaves them open): an alias maps to a non-empty list of non-empty names; members
may be other aliases; an alias may not include itself, directly or through other aliases (it would
silently match nothing of itself, because an alias matches its members and never its own name). An alias
named like a real tool hides that tool from every rule; only a catalog can tell, so ``lint`` warns about it.
"""

from __future__ import annotations

import warnings
from typing import Any, cast

from pydantic import BaseModel

from seqjudge.rules.document import LineMap, Loc
from seqjudge.rules.messages import Spec, validate_rule
from seqjudge.rules.model import RuleBase, alias_loop
from seqjudge.rules.problems import ProblemCollector, describe

__all__ = ["SeqjudgeDeprecationWarning", "ShapeParser"]


class SeqjudgeDeprecationWarning(DeprecationWarning):
    """A rule-file form that still loads but will go away (the v0 ``sequences:`` form)."""


# Python hides DeprecationWarning outside __main__ by default; a user running the CLI on a v0 file must
# still be told to migrate, so our own category is shown (once per place) unless a filter says otherwise.
warnings.filterwarnings("default", category=SeqjudgeDeprecationWarning)

TOP_KEYS = ("rules", "tests", "dependencies", "sequences", "aliases", "catalog")
RULE_BEARING_KEYS = ("rules", "tests", "dependencies", "sequences")
TEST_KEYS = ("id", "metric", "rules", "description")
DEPENDENCY_KEYS = ("id", "step", "requires", "severity", "hard", "description", "same", "when")


class ShapeParser(ProblemCollector):
    """Reads rule data of any shape into ``Spec``s, then validates them (``build``); problems pile up."""

    def __init__(self, source: str, lines: LineMap | None) -> None:
        super().__init__(source, lines)
        self.specs: list[Spec] = []
        self.aliases: dict[str, list[str]] = {}
        self.catalog: str | None = None
        self.alias_locs: dict[str, str] = {}

    # -- top level -------------------------------------------------------------------------------------
    def parse(self, data: Any) -> None:
        if isinstance(data, list):
            self.dependencies(data, ())
            return
        if not isinstance(data, dict):
            self.add(
                (),
                f"expected a mapping with `rules:` (or a list of dependencies), got {describe(data)}",
                "start the file with `rules:` followed by a list of rules",
            )
            return
        for key in data:
            if key not in TOP_KEYS:
                self.unknown_key((), key, TOP_KEYS, "the rule file")
        if not any(k in data for k in RULE_BEARING_KEYS):
            self.add(
                (),
                "the file defines no rules: it has none of `rules:`, `tests:`, `dependencies:` "
                "or `sequences:`",
                "add `rules:` followed by a list of rules",
            )
        if "aliases" in data:
            self.parse_aliases(data["aliases"])
        if "catalog" in data:
            value = data["catalog"]
            if isinstance(value, str) and value.strip():
                self.catalog = value
            else:
                self.add(
                    ("catalog",),
                    f"'catalog' must be the path of a tool catalog, got {describe(value)}",
                    "write catalog: catalog.json (relative to the rule file's folder)",
                )
        for key, value in data.items():
            if key == "rules":
                self.rules(value, ("rules",))
            elif key == "tests":
                self.tests(value)
            elif key == "dependencies":
                self.dependencies(value, ("dependencies",))
            elif key == "sequences":
                self.sequences(value)

    def parse_aliases(self, value: Any) -> None:
        loc: Loc = ("aliases",)
        if value is None:
            self.add(loc, "'aliases' is empty", "list aliases as Name: [tool, ...], or remove the key")
            return
        if not isinstance(value, dict):
            self.add(
                loc,
                f"'aliases' must be a mapping of Name: [tool, ...], got {describe(value)}",
                "write aliases: {Reads: [get_user, get_order]}",
            )
            return
        good: dict[str, list[str]] = {}
        for name, members in value.items():
            here = loc + (name,)
            if not isinstance(name, str) or not name.strip():
                self.add(
                    here,
                    f"an alias name must be non-empty text, got {describe(name)}",
                    "quote the name if YAML reads it as a number or boolean",
                    key=True,
                )
                continue
            if isinstance(members, str):
                self.add(
                    here,
                    f"alias {name!r} must map to a list of tool names, got {describe(members)}",
                    f"write {name}: [{members}]",
                )
                continue
            if not isinstance(members, list) or not members:
                self.add(
                    here,
                    f"alias {name!r} must map to a non-empty list of tool names, got {describe(members)}",
                    f"write {name}: [tool_a, tool_b]",
                )
                continue
            ok = True
            for j, member in enumerate(members):
                if not isinstance(member, str) or not member.strip():
                    self.add(
                        here + (j,),
                        f"alias {name!r} member {j + 1} must be a non-empty tool name, "
                        f"got {describe(member)}",
                        "quote names YAML would read as numbers or booleans",
                    )
                    ok = False
            if ok:
                good[name] = members
                self.alias_locs[name] = self.where(here, key=True)
        # An alias matches its members and never itself, so one that reaches itself would silently lose
        # that part of its meaning.
        for name in good:
            path = alias_loop(name, good)
            if path:
                self.add(
                    loc + (name,),
                    f"alias {name!r} includes itself ({' -> '.join(path)})",
                    "an alias matches its members, never its own name: list the real tool names instead",
                    key=True,
                )
        self.aliases = good

    # -- shape 1 and 2 ------------------------------------------------------------------------------
    def rules(self, value: Any, loc: Loc, group: str | None = None) -> None:
        if value is None:
            self.add(loc, "'rules' is empty", "list at least one rule under it, each starting with '- type:'")
            return
        if not isinstance(value, list):
            hint = (
                "start each rule with '- ' (a list item)"
                if isinstance(value, dict)
                else "write a list of rules, each starting with '- type:'"
            )
            self.add(loc, f"'rules' must be a list of rules, got {describe(value)}", hint)
            return
        if not value:
            self.add(loc, "'rules' is an empty list", "add at least one rule, or remove the key")
            return
        for i, raw in enumerate(value):
            self.rule(raw, loc + (i,), group)

    def tests(self, value: Any) -> None:
        loc: Loc = ("tests",)
        if not isinstance(value, list) or not value:
            self.add(
                loc,
                f"'tests' must be a non-empty list of tests, got {describe(value)}",
                "write tests: [{id: NAME, metric: sequence_valid, rules: [...]}]",
            )
            return
        seen: dict[str, str] = {}
        for i, entry in enumerate(value):
            here = loc + (i,)
            if not isinstance(entry, dict):
                self.add(
                    here,
                    f"a test must be a mapping with id, metric and rules, got {describe(entry)}",
                    "write - id: NAME\n    metric: sequence_valid\n    rules: [...]",
                )
                continue
            for key in entry:
                if key not in TEST_KEYS:
                    self.unknown_key(here, key, TEST_KEYS, "a test")
            test_id = entry.get("id")
            group: str | None = None
            if "id" not in entry:
                self.add(
                    here, "missing field 'id' in a test", "give the test an id: it names the group of rules"
                )
            elif not isinstance(test_id, str) or not test_id.strip():
                self.add(
                    here + ("id",),
                    f"a test id must be non-empty text, got {describe(test_id)}",
                    "quote ids YAML would read as numbers or booleans",
                )
            else:
                group = test_id
                if test_id in seen:
                    self.add(
                        here + ("id",),
                        f"duplicate test id {test_id!r} (also at {seen[test_id]})",
                        "give every test its own id",
                    )
                else:
                    seen[test_id] = self.where(here + ("id",))
            metric = entry.get("metric", "sequence_valid")
            if metric != "sequence_valid":
                self.add(
                    here + ("metric",),
                    f"unsupported metric {metric!r}",
                    "only metric: sequence_valid is supported; use it or remove the test",
                )
            if "rules" not in entry:
                self.add(here, "missing field 'rules' in a test", "list the test's rules under rules:")
            else:
                self.rules(entry["rules"], here + ("rules",), group=group or None)

    def rule(self, raw: Any, loc: Loc, group: str | None) -> None:
        if not isinstance(raw, dict):
            self.add(
                loc,
                f"expected a rule (a mapping with a `type:` key), got {describe(raw)}",
                "write a rule as - type: before\n    first: A\n    then: B",
            )
            return
        raw = dict(raw)
        if group is not None and "group" in raw:
            self.add(
                loc + ("group",),
                "a rule inside a test may not set 'group'",
                "the test's id is the group: remove the key",
                key=True,
            )
            raw.pop("group")
        if "id" in raw and (raw["id"] is None or raw["id"] == ""):
            self.add(
                loc + ("id",),
                "'id' is empty",
                "give an id, or remove the key to use the default id",
                key=True,
            )
            raw.pop("id")
        self.specs.append(Spec(loc, raw, group, explicit_id="id" in raw))

    # -- shape 3 ----------------------------------------------------------------------------------------
    def dependencies(self, value: Any, loc: Loc) -> None:
        if not isinstance(value, list) or not value:
            self.add(
                loc,
                f"the dependencies must be a non-empty list, got {describe(value)}",
                "write - {id: ID, step: TOOL, requires: TOOL, hard: true}",
            )
            return
        for i, entry in enumerate(value):
            self.dependency(entry, loc + (i,), top=not loc)

    def dependency(self, entry: Any, loc: Loc, *, top: bool) -> None:
        if not isinstance(entry, dict):
            self.add(
                loc,
                f"expected a dependency {{id, step, requires, hard}}, got {describe(entry)}",
                "write - {id: ID, step: TOOL, requires: TOOL, hard: true}",
            )
            return
        if "type" in entry and "step" not in entry:
            where = "at the top of the file" if top else "under dependencies:"
            self.add(
                loc,
                f"this looks like a rule, but a list {where} is read as dependency specs "
                "({step, requires})",
                "put rules under `rules:`",
            )
            return
        bad = False
        for key in entry:
            if key not in DEPENDENCY_KEYS:
                self.unknown_key(loc, key, DEPENDENCY_KEYS, "a dependency")
                bad = True
        for key in ("step", "requires"):
            if key not in entry:
                self.add(
                    loc,
                    f"missing field {key!r} in a dependency",
                    "a dependency needs step (the dependent tool) and requires (its prerequisite)",
                )
                bad = True
        if "severity" in entry and "hard" in entry:
            self.add(
                loc + ("hard",),
                "a dependency gives both 'severity' and 'hard'",
                "keep one: hard: true means severity: critical, hard: false means severity: warning",
                key=True,
            )
            bad = True
        elif "hard" in entry and not isinstance(entry["hard"], bool):
            self.add(
                loc + ("hard",),
                f"'hard' must be true or false, got {describe(entry['hard'])}",
                "write hard: true (critical) or hard: false (warning)",
            )
            bad = True
        if "id" in entry and (not isinstance(entry["id"], str) or not entry["id"]):
            self.add(
                loc + ("id",),
                f"a dependency id must be non-empty text, got {describe(entry['id'])}",
                "quote ids YAML would read as numbers or booleans",
            )
            bad = True
        if bad:
            return
        base: dict[str, Any] = {"type": "before", "then": entry["step"]}
        for key in ("severity", "description", "same", "when"):
            if key in entry:
                base[key] = entry[key]
        if "hard" in entry:
            base["severity"] = "critical" if entry["hard"] else "warning"
        requires = entry["requires"]
        keymap_then: dict[str, Loc] = {"then": ("step",)}
        if isinstance(requires, list):
            if not requires:
                self.add(
                    loc + ("requires",), "'requires' is an empty list", "name at least one prerequisite tool"
                )
                return
            # A list means every one of them is required: one before rule each.
            for j, item in enumerate(requires):
                raw = dict(base, first=item)
                if "id" in entry:
                    raw["id"] = entry["id"] if len(requires) == 1 else f"{entry['id']}/{_item_text(item, j)}"
                self.specs.append(
                    Spec(
                        loc,
                        raw,
                        None,
                        explicit_id="id" in entry,
                        kind="dependency",
                        keymap={**keymap_then, "first": ("requires", j)},
                    )
                )
        else:
            raw = dict(base, first=requires)
            if "id" in entry:
                raw["id"] = entry["id"]
            self.specs.append(
                Spec(
                    loc,
                    raw,
                    None,
                    explicit_id="id" in entry,
                    kind="dependency",
                    keymap={**keymap_then, "first": ("requires",)},
                )
            )

    # -- shape 4 ----------------------------------------------------------------------------------------
    def sequences(self, value: Any) -> None:
        loc: Loc = ("sequences",)
        # stacklevel 5 skips this method, parse, load._parse and parse_rules (or load_rules_located), to
        # point at the code that asked for the rules: keep it in step with that call chain.
        warnings.warn(
            f"{self.source} uses the v0 `sequences:` form, which is deprecated; run `seqjudge migrate "
            f"{self.source}` to print it as `rules:` (add --write to rewrite the file)",
            SeqjudgeDeprecationWarning,
            stacklevel=5,
        )
        if not isinstance(value, list) or not value:
            self.add(
                loc,
                f"'sequences' must be a non-empty list of tool lists, got {describe(value)}",
                "write sequences: [[GetCustomer, UpdateCustomer]]",
            )
            return
        for i, seq in enumerate(value):
            here = loc + (i,)
            if not isinstance(seq, list):
                self.add(
                    here,
                    f"each v0 sequence must be a list of tool names, got {describe(seq)}",
                    "write [FirstTool, SecondTool]",
                )
                continue
            if len(seq) < 2:
                self.add(
                    here,
                    f"a sequence needs at least two tools, got {len(seq)}",
                    "list two or more tools, or use a `require` rule for one tool",
                )
                continue
            ok = True
            for j, name in enumerate(seq):
                if not isinstance(name, str) or not name.strip():
                    self.add(
                        here + (j,),
                        f"a tool name must be non-empty text, got {describe(name)}",
                        "quote names YAML would read as numbers or booleans",
                    )
                    ok = False
            if not ok:
                continue
            for j in range(len(seq) - 1):
                raw = {"type": "before", "first": seq[j], "then": seq[j + 1]}
                self.specs.append(
                    Spec(here, raw, None, kind="sequence", keymap={"first": (j,), "then": (j + 1,)})
                )

    # -- ids and the result ---------------------------------------------------------------------------
    def build(self) -> tuple[list[BaseModel], dict[str, str]]:
        built: list[tuple[Spec, BaseModel]] = []
        for spec in self.specs:
            model = validate_rule(self, spec)
            if model is not None:
                if spec.group is not None:
                    model.group = spec.group  # type: ignore[attr-defined]
                built.append((spec, model))
        used: dict[str, str] = {}
        for spec, model in built:
            if spec.explicit_id:
                rid = model.rule_id  # type: ignore[attr-defined]
                here = self.where(spec.loc + (("id",) if spec.kind == "rule" else ()))
                if rid in used:
                    self.add(
                        spec.loc + (("id",) if spec.kind == "rule" else ()),
                        f"duplicate rule id {rid!r} (also at {used[rid]})",
                        "give every rule its own id",
                    )
                else:
                    used[rid] = here
        # Derived ids are made unique with #2, #3 ... (two identical rules are legal, if odd).
        for spec, model in built:
            if not spec.explicit_id:
                base = model.rule_id  # type: ignore[attr-defined]
                rid, n = base, 1
                while rid in used:
                    n += 1
                    rid = f"{base}#{n}"
                model.id = rid  # type: ignore[attr-defined]
                used[rid] = self.where(spec.loc)
        # Rules that validate but can never mean anything (each type says which of its own can't).
        for spec, model in built:
            rule = cast(RuleBase, model)
            for p in rule.pointless(self.aliases):
                self.add(spec.place(p.field), f"rule {rule.rule_id!r}: {p.problem}", p.hint)
        locations = {m.rule_id: self.where(s.loc) for s, m in built}  # type: ignore[attr-defined]
        locations.update({f"aliases.{k}": v for k, v in self.alias_locs.items()})
        return [m for _, m in built], locations


def _item_text(item: Any, index: int) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict) and isinstance(item.get("tool"), str):
        return item["tool"]
    if isinstance(item, list) and item and all(isinstance(i, str) for i in item):
        return "|".join(item)
    return str(index)
