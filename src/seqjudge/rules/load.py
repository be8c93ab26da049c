"""Rule files: read YAML or JSON, recognise its shape, validate every rule, and say where each problem is.

Four shapes load to the same ``RuleSet`` (they may also be combined in one mapping):

1. ``{rules: [...], aliases?: {Name: [tool, ...]}, catalog?: path}``
2. seed 002's eval.yaml: ``{tests: [{id, metric: sequence_valid, rules: [...]}]}``; each test's rules get
   ``group = test id``.
3. seed 000's dependency spec: a top-level list (or ``dependencies:``) of
   ``{id, step, requires, severity | hard, description}`` -> ``before`` rules (first=requires, then=step).
4. v0 ``{sequences: [[A, B], ...]}`` -> ``before`` rules for consecutive pairs, with a deprecation warning.

Every problem becomes an ``InputError`` naming the file, the line and the path inside it (``rules[2].first``),
what was wrong and how to fix it. We collect every problem we can find before raising, so that one run
of ``seqjudge lint`` shows them all; ``InputProblems`` carries the list.

Alias decisions (the issue leaves them open): an alias maps to a non-empty list of non-empty names; members
may be other aliases; an alias may not include itself, directly or through other aliases (it would
silently match nothing of itself, because an alias matches its members and never its own name). An alias
named like a real tool hides that tool from every rule; only a catalog can tell, so ``lint`` warns about it.
"""

from __future__ import annotations

import difflib
import json
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from seqjudge.errors import InputError
from seqjudge.rules.model import (
    RULE_TYPES,
    AfterRule,
    ArgsSelector,
    BeforeRule,
    BlocklistRule,
    EventuallyRule,
    JudgeRule,
    MaxCallsRule,
    NeverAfterRule,
    RequireRule,
    RuleSet,
    SequenceRule,
    TrajectoryRule,
)

__all__ = [
    "InputProblems",
    "LineMap",
    "SeqjudgeDeprecationWarning",
    "load_rules",
    "load_rules_located",
    "parse_rules",
    "read_document",
]

Loc = tuple[str | int, ...]


class SeqjudgeDeprecationWarning(DeprecationWarning):
    """A rule-file form that still loads but will go away (the v0 ``sequences:`` form)."""


# Python hides DeprecationWarning outside __main__ by default; a user running the CLI on a v0 file must
# still be told to migrate, so our own category is shown (once per place) unless a filter says otherwise.
warnings.filterwarnings("default", category=SeqjudgeDeprecationWarning)

RULE_CLASSES: dict[str, type[BaseModel]] = {
    "require": RequireRule,
    "before": BeforeRule,
    "blocklist": BlocklistRule,
    "max_calls": MaxCallsRule,
    "eventually": EventuallyRule,
    "never_after": NeverAfterRule,
    "after": AfterRule,
    "sequence": SequenceRule,
    "trajectory": TrajectoryRule,
    "judge": JudgeRule,
}
SAME_TYPES = tuple(t for t in RULE_TYPES if "same" in RULE_CLASSES[t].model_fields)
TOP_KEYS = ("rules", "tests", "dependencies", "sequences", "aliases", "catalog")
RULE_BEARING_KEYS = ("rules", "tests", "dependencies", "sequences")
TEST_KEYS = ("id", "metric", "rules", "description")
DEPENDENCY_KEYS = ("id", "step", "requires", "severity", "hard", "description", "same", "when")
SELECTOR_KEYS = tuple(ArgsSelector.model_fields)
OPERAND_FIELDS = ("tool", "first", "then", "trigger", "forbidden", "tools")


# --------------------------------------------------------------------------------------------------
# Problems


class InputProblems(InputError):
    """Several input problems found in one file; ``problems`` holds one ``InputError`` each.

    It renders as one paragraph when there is one problem, else as a headed list, so the CLI's
    ``error: ...`` line shows every problem at once.
    """

    def __init__(self, problems: list[InputError], *, source: str | None = None) -> None:
        if not problems:
            raise ValueError("InputProblems needs at least one problem")
        self.problems = list(problems)
        first = self.problems[0]
        super().__init__(first.problem, source=source or first.source, where=first.where, hint=first.hint)

    def render(self) -> str:
        if len(self.problems) == 1:
            return self.problems[0].render()
        lines = [f"{len(self.problems)} problems in {self.source}:"]
        lines.extend("  - " + p.render() for p in self.problems)
        return "\n".join(lines)


def describe(value: Any) -> str:
    """A value as a person would name it in a message: the string 'x', the number 5, a mapping, ..."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {_short(value)!r}" if value else "an empty string"
    if isinstance(value, list):
        return "a list" if value else "an empty list"
    if isinstance(value, dict):
        return "a mapping" if value else "an empty mapping"
    return f"a {type(value).__name__}"


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fmt_loc(loc: Loc) -> str:
    """``('rules', 2, 'first')`` -> ``rules[2].first``."""
    out = ""
    for seg in loc:
        if isinstance(seg, int) and not isinstance(seg, bool):
            out += f"[{seg}]"
        elif isinstance(seg, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_\-]*", seg):
            out += ("." if out else "") + seg
        else:
            out += f"[{json.dumps(seg) if isinstance(seg, str) else repr(seg)}]"
    return out


def suggest(word: Any, choices: list[str] | tuple[str, ...]) -> str | None:
    """The closest choice to a mistyped word, if one is close enough to be worth suggesting."""
    if not isinstance(word, str):
        return None
    lowered = {c.lower(): c for c in choices}
    if word.lower() in lowered:
        return lowered[word.lower()]
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


# --------------------------------------------------------------------------------------------------
# Reading files, with line numbers


class LineMap:
    """Maps a path inside the loaded data (``('rules', 2, 'first')``) to its 1-based line in the file.

    Built from the node tree of ``yaml.compose``; JSON files are composed the same way when PyYAML can
    read them (nearly always), else there are no lines and messages give the path alone.
    """

    def __init__(self, root: yaml.Node | None = None) -> None:
        self.root = root

    def line(self, loc: Loc, *, key: bool = False) -> int | None:
        """The line of the value at ``loc`` (of its key if ``key``), or of its nearest existing parent."""
        node = self.root
        if node is None:
            return None
        for i, seg in enumerate(loc):
            last = i == len(loc) - 1
            if isinstance(node, yaml.MappingNode):
                for k, v in node.value:
                    if isinstance(k, yaml.ScalarNode) and k.value == str(seg):
                        if last and key:
                            return int(k.start_mark.line) + 1
                        node = v
                        break
                else:
                    break
            elif isinstance(node, yaml.SequenceNode) and isinstance(seg, int) and 0 <= seg < len(node.value):
                node = node.value[seg]
            else:
                break
        return int(node.start_mark.line) + 1


@dataclass
class Document:
    data: Any
    lines: LineMap
    source: str


def _find_duplicate_key(root: yaml.Node | None) -> tuple[str, int, int] | None:
    """(key, line, first line) of the first mapping that repeats a key: loaders keep the last silently."""
    if root is None:
        return None
    stack = [root]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            firsts: dict[str, int] = {}
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.tag != "tag:yaml.org,2002:merge":
                    if k.value in firsts:
                        return k.value, k.start_mark.line + 1, firsts[k.value]
                    firsts[k.value] = k.start_mark.line + 1
                stack.append(v)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(reversed(node.value))
    return None


class _DuplicateJSONKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateJSONKey(k)
        out[k] = v
    return out


def _compose(text: str) -> yaml.Node | None:
    loader = yaml.SafeLoader(text)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()


def read_document(path: str | Path, *, what: str = "rule file") -> Document:
    """Read a YAML or JSON file into plain data plus a ``LineMap``; every failure is an ``InputError``.

    ``.json`` is read as JSON; any other suffix as YAML, which also reads JSON.
    """
    p = Path(path)
    source = str(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(
            f"no such {what}", source=source, hint="Check the path and the current directory"
        ) from None
    except IsADirectoryError:
        raise InputError(
            f"is a directory, not a {what}", source=source, hint="Give the path of the file"
        ) from None
    except PermissionError:
        raise InputError(
            f"cannot read the {what}: permission denied", source=source, hint="Check the file's permissions"
        ) from None
    except UnicodeDecodeError as exc:
        raise InputError(
            f"the {what} is not UTF-8 text (byte {exc.start} cannot be decoded)",
            source=source,
            hint="Save the file as UTF-8",
        ) from None
    except OSError as exc:
        raise InputError(
            f"cannot read the {what}: {exc.strerror or exc}", source=source, hint="Check the path"
        ) from None
    if not text.strip():
        raise InputError(f"the {what} is empty", source=source, hint=_empty_hint(what))
    if p.suffix.lower() == ".json":
        return _read_json(text, source, what)
    return _read_yaml(text, source, what)


def _empty_hint(what: str) -> str:
    if what == "catalog":
        return 'Write {"tools": [...]} or a list of tool definitions'
    return "Write `rules:` followed by a list of rules"


def _read_json(text: str, source: str, what: str) -> Document:
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"invalid JSON: {exc.msg}",
            source=source,
            where=f"line {exc.lineno}, column {exc.colno}",
            hint="Fix the JSON syntax there (a missing comma, quote or bracket is the usual cause)",
        ) from None
    except _DuplicateJSONKey as exc:
        where = None
        try:
            dup = _find_duplicate_key(_compose(text.replace("\t", " ")))
        except yaml.YAMLError:
            dup = None
        if dup is not None:
            where = f"line {dup[1]}"
            hint = f"The key {exc.key!r} was first given on line {dup[2]}; keep one of them"
        else:
            hint = f"Keep one {exc.key!r} per object"
        raise InputError(f"duplicate key {exc.key!r}", source=source, where=where, hint=hint) from None
    try:
        # In valid JSON a raw tab can only be whitespace (inside strings it must be escaped), and PyYAML
        # rejects tabs where JSON allows them: spaces keep every line and column where it was.
        root = _compose(text.replace("\t", " "))
    except yaml.YAMLError:
        root = None  # valid JSON that PyYAML cannot read (rare): messages fall back to paths
    return Document(data, LineMap(root), source)


def _read_yaml(text: str, source: str, what: str) -> Document:
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        dup = _find_duplicate_key(node)
        if dup is not None:
            raise InputError(
                f"duplicate key {dup[0]!r}",
                source=source,
                where=f"line {dup[1]}",
                hint=f"The key {dup[0]!r} was first given on line {dup[2]}; keep one of them",
            )
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else None
        problem = exc.problem or exc.context or "cannot be parsed"
        if exc.context and exc.problem:
            problem = f"{exc.problem} ({exc.context})"
        if "expected a single document" in str(exc.context or ""):
            problem = "the file holds more than one YAML document"
            hint = "Remove the '---' separator: one file holds one rule set"
        else:
            hint = "Check the indentation, quoting and brackets there (a ': ' inside a value needs quotes)"
        raise InputError(f"invalid YAML: {problem}", source=source, where=where, hint=hint) from None
    except yaml.YAMLError as exc:
        raise InputError(f"invalid YAML: {exc}", source=source, hint="Check the file's syntax") from None
    finally:
        loader.dispose()
    if data is None:
        raise InputError(f"the {what} is empty", source=source, hint=_empty_hint(what))
    return Document(data, LineMap(node), source)


# --------------------------------------------------------------------------------------------------
# Turning pydantic errors into sentences


def _branch_ok(tag: str, value: Any) -> bool:
    """Does the data at a union branch have the branch's type? Only that branch's errors are relevant."""
    if tag == "str":
        return isinstance(value, str)
    if tag == "ArgsSelector":
        return isinstance(value, dict)
    if tag.startswith("list["):
        return isinstance(value, list)
    return True


def _walk(loc: tuple[Any, ...], raw: Any, missing: bool) -> tuple[Loc, Loc | None]:
    """Pydantic's loc with union-branch tags removed, and the point where the data left every branch."""
    segs = list(loc)
    tail = segs.pop() if missing and segs else None
    clean: list[str | int] = []
    cur = raw
    for seg in segs:
        present = isinstance(cur, dict) and seg in cur
        present = present or (isinstance(cur, list) and isinstance(seg, int) and 0 <= seg < len(cur))
        if present:
            clean.append(seg)
            cur = cur[seg]
        elif isinstance(seg, str):
            if not _branch_ok(seg, cur):
                return tuple(clean), tuple(clean)
        else:
            break
    if tail is not None:
        clean.append(tail)
    return tuple(clean), None


def _get(raw: Any, loc: Loc) -> Any:
    cur = raw
    for seg in loc:
        try:
            cur = cur[seg]
        except (KeyError, IndexError, TypeError):
            return None
    return cur


_TYPE_WORDS = {
    "string_type": "text (a string)",
    "int_type": "a whole number",
    "bool_type": "true or false",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "float_type": "a number",
}


@dataclass
class _Spec:
    """One rule to validate: the mapping handed to the model and where its parts are written."""

    loc: Loc
    raw: dict[str, Any]
    group: str | None = None
    explicit_id: bool = False
    kind: str = "rule"  # rule | dependency | sequence
    keymap: dict[str, Loc] = field(default_factory=dict)  # model field -> loc relative to ``loc``

    def place(self, clean: Loc) -> Loc:
        if clean and isinstance(clean[0], str) and clean[0] in self.keymap:
            return self.loc + self.keymap[clean[0]] + clean[1:]
        return self.loc + clean


# --------------------------------------------------------------------------------------------------
# The parser


class _Parser:
    def __init__(self, source: str, lines: LineMap | None) -> None:
        self.source = source
        self.lines = lines or LineMap()
        self.problems: list[InputError] = []
        self.specs: list[_Spec] = []
        self.aliases: dict[str, list[str]] = {}
        self.catalog: str | None = None
        self.alias_locs: dict[str, str] = {}

    # -- problems ------------------------------------------------------------------------------------
    def where(self, loc: Loc, *, key: bool = False) -> str:
        text = fmt_loc(loc)
        line = self.lines.line(loc, key=key)
        if line is None:
            return text or "top level"
        return f"line {line} ({text})" if text else f"line {line}"

    def add(self, loc: Loc, problem: str, hint: str | None = None, *, key: bool = False) -> None:
        hint = hint[:1].upper() + hint[1:] if hint else hint
        self.problems.append(
            InputError(problem, source=self.source, where=self.where(loc, key=key), hint=hint)
        )

    def unknown_key(self, loc: Loc, key: Any, allowed: tuple[str, ...] | list[str], what: str) -> None:
        guess = suggest(key, allowed)
        problem = f"unknown key {key!r} in {what}"
        if guess:
            problem += f" (did you mean {guess!r}?)"
            hint = f"rename it to {guess!r}"
        else:
            hint = f"{what} takes: {', '.join(allowed)}"
        self.add(loc + (key,), problem, hint, key=True)

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
            path = _alias_loop(name, good)
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
        self.specs.append(_Spec(loc, raw, group, explicit_id="id" in raw))

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
                    _Spec(
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
                _Spec(
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
                    _Spec(here, raw, None, kind="sequence", keymap={"first": (j,), "then": (j + 1,)})
                )

    # -- validation --------------------------------------------------------------------------------------
    def validate(self, spec: _Spec) -> BaseModel | None:
        raw, loc = spec.raw, spec.loc
        rtype = raw.get("type")
        if "type" not in raw:
            keys = set(raw)
            guesses = [
                t for t in RULE_TYPES if _required(t) <= keys and keys <= set(RULE_CLASSES[t].model_fields)
            ]
            hint = (
                f"its keys suggest `type: {guesses[0]}`"
                if guesses
                else f"add type: one of {', '.join(RULE_TYPES)}"
            )
            self.add(loc, "missing field 'type' in a rule", hint)
            return None
        if not isinstance(rtype, str) or rtype not in RULE_CLASSES:
            guess = suggest(rtype, RULE_TYPES)
            problem = (
                f"unknown rule type {rtype!r}"
                if isinstance(rtype, str)
                else f"'type' must be a rule type name, got {describe(rtype)}"
            )
            if guess:
                problem += f" (did you mean {guess!r}?)"
            self.add(loc + ("type",), problem, f"valid types: {', '.join(RULE_TYPES)}")
            return None
        cls = RULE_CLASSES[rtype]
        try:
            return cls.model_validate(raw, strict=True)
        except ValidationError as exc:
            self.translate(spec, cls, exc)
            return None

    def translate(self, spec: _Spec, cls: type[BaseModel], exc: ValidationError) -> None:
        raw = spec.raw
        rtype = raw["type"]
        survivors: list[tuple[Loc, ErrorDetails]] = []
        mismatches: list[Loc] = []
        for err in exc.errors(include_url=False):
            clean, mismatch = _walk(err["loc"], raw, err["type"] == "missing")
            if mismatch is not None:
                if mismatch not in mismatches:
                    mismatches.append(mismatch)
            else:
                survivors.append((clean, err))
        # Keys that look like a misspelt missing field are reported once, as the misspelling.
        explained: set[Loc] = set()
        for clean, err in survivors:
            if err["type"] == "extra_forbidden" and not _owned_elsewhere(clean):
                allowed = self._allowed(cls, clean[:-1])
                guess = suggest(clean[-1], allowed)
                if guess:
                    explained.add(clean[:-1] + (guess,))
        reported: set[tuple[Loc, str]] = set()
        for clean, err in survivors:
            if err["type"] == "missing" and clean in explained:
                continue
            if (clean, err["type"]) in reported:
                continue
            reported.add((clean, err["type"]))
            self.one_error(spec, cls, rtype, clean, err)
        # Data that fits no branch of a union (a number where a tool name belongs): one message, at the
        # deepest such place that has no more specific error below it.
        for point in mismatches:
            if any(c[: len(point)] == point for c, _ in survivors):
                continue
            if any(m != point and m[: len(point)] == point for m in mismatches):
                continue
            value = _get(raw, point)
            field_name = _field_name(spec.place(point))
            self.add(
                spec.place(point),
                f"{field_name!r} must be {_operand_words(point)}, got {describe(value)}",
                _type_hint(value, "operand"),
            )

    def _allowed(self, cls: type[BaseModel], parent: Loc) -> list[str]:
        if parent:  # inside an operand mapping: the only nested model
            return list(SELECTOR_KEYS)
        return list(cls.model_fields)

    def one_error(self, spec: _Spec, cls: type[BaseModel], rtype: str, clean: Loc, err: ErrorDetails) -> None:
        etype = err["type"]
        loc = spec.place(clean)
        name = _field_name(loc)
        value = err.get("input")
        ctx = err.get("ctx") or {}
        if etype == "extra_forbidden":
            key = clean[-1]
            if len(clean) == 1 and key == "same":
                self.add(
                    loc,
                    f"'same' does not apply to a {rtype} rule",
                    f"`same:` is taken by {', '.join(SAME_TYPES)} rules; remove it",
                    key=True,
                )
                return
            what = f"a {rtype} rule" if len(clean) == 1 else "a {tool:, args_match:} selector"
            allowed = self._allowed(cls, clean[:-1])
            guess = suggest(key, allowed)
            others = _owners(key)
            problem = f"unknown key {key!r} in {what}"
            if others and len(clean) == 1:
                # A real key of another rule type: naming its owners helps more than a spelling guess.
                takers = ", ".join(others)
                hint = f"{key!r} belongs to {takers} rules; a {rtype} rule takes: {', '.join(allowed)}"
            elif guess:
                problem += f" (did you mean {guess!r}?)"
                hint = f"rename it to {guess!r}"
            else:
                hint = f"{what} takes: {', '.join(allowed)}"
            self.add(loc, problem, hint, key=True)
        elif etype == "missing":
            if len(clean) == 1:
                needs = sorted(_required(rtype), key=list(cls.model_fields).index)
                self.add(
                    loc[:-1],
                    f"missing field {name!r} in a {rtype} rule",
                    f"a {rtype} rule needs {_and(needs)}",
                )
            else:
                self.add(
                    loc[:-1],
                    f"missing field {name!r} in a {{tool:, args_match:}} selector",
                    "add tool: NAME next to args_match",
                )
        elif etype in _TYPE_WORDS:
            expected = _TYPE_WORDS[etype]
            hint = _type_hint(value, etype)
            if name == "when" and etype == "dict_type":
                hint = "write when: {user.role: standard} (dotted paths into the trace's context)"
            self.add(loc, f"{name!r} must be {expected}, got {describe(value)}", hint)
        elif etype == "literal_error":
            expected = ctx.get("expected", "")
            choices = re.findall(r"'([^']*)'", expected)
            guess = suggest(value, choices)
            problem = f"{name!r} must be one of {expected.replace(' or ', ', ')}, got {describe(value)}"
            if guess:
                problem += f" (did you mean {guess!r}?)"
            self.add(loc, problem, f"write {name}: {guess or (choices[0] if choices else '...')}")
        elif etype == "greater_than_equal":
            hints = {
                "max": "use max: 0 to ban the tool; a negative limit means nothing",
                "within": "steps are counted from 1, so within must be at least 1",
            }
            self.add(
                loc, f"{name!r} must be >= {ctx.get('ge')}, got {value}", hints.get(name, "raise the value")
            )
        elif etype == "too_short":
            if name == "tools" or spec.kind == "sequence":
                self.add(
                    loc,
                    f"a sequence needs at least two tools, got {ctx.get('actual_length', len(value or []))}",
                    "list two or more tools, or use a `require` rule for one tool",
                )
            elif name == "expected":
                self.add(
                    loc, "a trajectory's 'expected' must list at least one tool", "list the expected tools"
                )
            else:
                self.add(
                    loc, f"{name!r} needs at least {ctx.get('min_length')} item(s)", "add the missing items"
                )
        elif etype == "string_too_short":
            if name == "pattern":
                self.add(
                    loc,
                    "the blocklist pattern is empty",
                    "an empty pattern would forbid every tool; give a name or prefix such as admin_",
                )
            elif name == "description":
                self.add(
                    loc,
                    f"a {rtype} rule needs a non-empty description",
                    "say in words what the rule requires",
                )
            else:
                self.add(loc, f"{name!r} must not be empty", "give a value")
        elif etype == "value_error":
            message = str(ctx.get("error", err.get("msg", ""))).removeprefix("Value error, ")
            if not clean and rtype == "before":
                first, then = spec.keymap.get("first", ("first",)), spec.keymap.get("then", ("then",))
                words = {"dependency": ("requires", "step"), "sequence": ("the sequence", "its next tool")}
                a, b = words.get(spec.kind, (_field_name(first), _field_name(then)))
                text = repr(_get(spec.raw, ("first",)))
                if spec.kind == "sequence":
                    self.add(
                        loc + first,
                        f"the sequence repeats {text} twice in a row",
                        "a tool cannot be its own prerequisite: remove the repeat",
                    )
                else:
                    self.add(
                        loc,
                        f"{a} and {b} are both {text}",
                        "a tool cannot be its own prerequisite: name two different tools",
                    )
                return
            if clean and clean[-1] == "args_match":
                self.add(
                    loc,
                    f"bad regular expression in {message}",
                    "the values of args_match are Python regular expressions; escape special characters "
                    "with \\",
                )
                return
            self.add(loc, message, "give a tool name" if "non-empty" in message else "fix the value")
        else:
            self.add(loc, f"{name!r}: {err.get('msg', 'invalid value')}", "fix the value")

    # -- ids and the result ---------------------------------------------------------------------------
    def build(self) -> tuple[list[BaseModel], dict[str, str]]:
        built: list[tuple[_Spec, BaseModel]] = []
        for spec in self.specs:
            model = self.validate(spec)
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
        locations = {m.rule_id: self.where(s.loc) for s, m in built}  # type: ignore[attr-defined]
        locations.update({f"aliases.{k}": v for k, v in self.alias_locs.items()})
        return [m for _, m in built], locations


def _alias_loop(name: str, aliases: dict[str, list[str]]) -> list[str] | None:
    """The path by which an alias reaches itself through alias members, or None."""
    stack: list[tuple[str, list[str]]] = [(m, [name, m]) for m in aliases[name]]
    seen: set[str] = set()
    while stack:
        cur, path = stack.pop()
        if cur == name:
            return path
        if cur in seen or cur not in aliases:
            continue
        seen.add(cur)
        stack.extend((m, path + [m]) for m in aliases[cur])
    return None


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _owners(key: Any) -> list[str]:
    """The rule types that take ``key``."""
    return [t for t in RULE_TYPES if isinstance(key, str) and key in RULE_CLASSES[t].model_fields]


def _owned_elsewhere(clean: Loc) -> bool:
    return len(clean) == 1 and bool(_owners(clean[-1]))


def _required(rtype: str) -> set[str]:
    fields = RULE_CLASSES[rtype].model_fields
    return {f for f, info in fields.items() if info.is_required() and f != "type"}


def _field_name(loc: Loc) -> str:
    for seg in reversed(loc):
        if isinstance(seg, str):
            return seg
    return "value"


def _operand_words(point: Loc) -> str:
    if len(point) >= 2 and point[-1] == "tool":
        return "a tool name or a list of tool names"
    if point and isinstance(point[-1], int):
        return "a tool name, an alias, or a {tool: NAME, args_match: {ARGUMENT: REGEX}} mapping"
    return "a tool name, an alias, a list of them, or a {tool: NAME, args_match: {ARGUMENT: REGEX}} mapping"


def _type_hint(value: Any, etype: str | None = None) -> str:
    if isinstance(value, bool) and etype != "bool_type":
        return "YAML reads yes/no/on/off/true/false as booleans: put the value in quotes"
    if value is None:
        return "give a value after the colon"
    if etype == "operand" and isinstance(value, int | float):
        return "tool names are text: put the name in quotes"
    if etype == "list_type" and isinstance(value, str):
        return f"write [{value}]"
    if etype == "string_type" and isinstance(value, int | float):
        return "put the value in quotes"
    if etype == "int_type" and isinstance(value, str | float):
        return "write a whole number without quotes"
    if etype == "bool_type":
        return "write true or false without quotes"
    return "fix the value's type"


def _item_text(item: Any, index: int) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict) and isinstance(item.get("tool"), str):
        return item["tool"]
    if isinstance(item, list) and item and all(isinstance(i, str) for i in item):
        return "|".join(item)
    return str(index)


# --------------------------------------------------------------------------------------------------
# Public entry points


def _parse(data: Any, source: str, lines: LineMap | None) -> tuple[RuleSet, dict[str, str]]:
    parser = _Parser(source, lines)
    parser.parse(data)
    rules, locations = parser.build()
    if parser.problems:
        raise InputProblems(parser.problems, source=source)
    ruleset = RuleSet(
        rules=rules,  # type: ignore[arg-type]
        aliases=parser.aliases,
        catalog=parser.catalog,
        source=None if source == "<memory>" else source,
    )
    return ruleset, locations


def parse_rules(data: Any, source: str = "<memory>", lines: LineMap | None = None) -> RuleSet:
    """Validate already-loaded rule data of any shape. ``lines`` (a ``LineMap``) adds line numbers."""
    return _parse(data, source, lines)[0]


def load_rules_located(path: str | Path) -> tuple[RuleSet, dict[str, str]]:
    """``load_rules`` plus where each rule (by id) and alias (``aliases.NAME``) is written, for lint."""
    doc = read_document(path)
    ruleset, locations = _parse(doc.data, doc.source, doc.lines)
    if ruleset.catalog and not Path(ruleset.catalog).is_absolute():
        # The catalog is named relative to the rule file, wherever seqjudge runs from.
        ruleset.catalog = str(Path(path).parent / ruleset.catalog)
    return ruleset, locations


def load_rules(path: str | Path) -> RuleSet:
    """Load a rule file of any supported shape (YAML or JSON); every problem is an ``InputError``."""
    return load_rules_located(path)[0]
