"""Validating one rule and turning pydantic's errors into plain-words problems.

Pydantic reports a bad rule as a list of errors whose locations carry union-branch tags (``str``,
``list[...]``, ``ArgsSelector``) and whose messages speak of types. Each becomes one problem that names the
key or value in the user's own terms, with a fix (a did-you-mean for a misspelt key, type or choice). A
value that fits no branch of an operand union is reported once, at the deepest place it went wrong,
instead of once per branch.

A ``Spec`` is one rule as the shapes in ``rules.shapes`` hand it over: the mapping to validate and where
each of its parts is written in the file, so that a dependency's ``first`` is reported at its ``requires``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from seqjudge.rules.document import Loc
from seqjudge.rules.model import RULE_CLASSES, RULE_TYPES, ArgsSelector, JudgeCriteria, JudgeExample
from seqjudge.rules.problems import ProblemCollector, describe, suggest

__all__ = ["RULE_CLASSES", "Spec", "validate_rule"]


SAME_TYPES = tuple(t for t in RULE_TYPES if "same" in RULE_CLASSES[t].model_fields)
SELECTOR_KEYS = tuple(ArgsSelector.model_fields)


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
class Spec:
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


def validate_rule(log: ProblemCollector, spec: Spec) -> BaseModel | None:
    """The rule ``spec`` describes, or None after adding its problems to ``log``."""
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
        log.add(loc, "missing field 'type' in a rule", hint)
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
        log.add(loc + ("type",), problem, f"valid types: {', '.join(RULE_TYPES)}")
        return None
    cls = RULE_CLASSES[rtype]
    try:
        return cls.model_validate(raw, strict=True)
    except ValidationError as exc:
        _translate(log, spec, cls, exc)
        return None


def _translate(log: ProblemCollector, spec: Spec, cls: type[BaseModel], exc: ValidationError) -> None:
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
            allowed = _allowed(cls, clean[:-1])
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
        _one_error(log, spec, cls, rtype, clean, err)
    # Data that fits no branch of a union (a number where a tool name belongs): one message, at the
    # deepest such place that has no more specific error below it.
    for point in mismatches:
        if any(c[: len(point)] == point for c, _ in survivors):
            continue
        if any(m != point and m[: len(point)] == point for m in mismatches):
            continue
        value = _get(raw, point)
        field_name = _field_name(spec.place(point))
        log.add(
            spec.place(point),
            f"{field_name!r} must be {_operand_words(point)}, got {describe(value)}",
            _type_hint(value, "operand"),
        )


# The mappings nested in a rule other than operand selectors, by the rule key that holds them: what to call
# one in a message, and its keys.
_NESTED: dict[str, tuple[str, tuple[str, ...]]] = {
    "criteria": (
        "a judge rule's criteria",
        tuple(f.alias or n for n, f in JudgeCriteria.model_fields.items()),
    ),
    "examples": ("an example of a judge rule", tuple(JudgeExample.model_fields)),
}
_SELECTOR = ("a {tool:, args_match:} selector", SELECTOR_KEYS)


def _nested(parent: Loc) -> tuple[str, tuple[str, ...]]:
    """What the mapping at ``parent`` (inside a rule) is called, and the keys it takes."""
    return _NESTED.get(str(parent[0]), _SELECTOR) if parent else _SELECTOR


def _allowed(cls: type[BaseModel], parent: Loc) -> list[str]:
    if parent:  # inside a nested mapping: an operand selector, or a judge rule's criteria or example
        return list(_nested(parent)[1])
    return list(cls.model_fields)


def _one_error(
    log: ProblemCollector, spec: Spec, cls: type[BaseModel], rtype: str, clean: Loc, err: ErrorDetails
) -> None:
    etype = err["type"]
    loc = spec.place(clean)
    name = _field_name(loc)
    value = err.get("input")
    ctx = err.get("ctx") or {}
    if etype == "extra_forbidden":
        key = clean[-1]
        if len(clean) == 1 and key == "same":
            log.add(
                loc,
                f"'same' does not apply to a {rtype} rule",
                f"`same:` is taken by {', '.join(SAME_TYPES)} rules; remove it",
                key=True,
            )
            return
        what = f"a {rtype} rule" if len(clean) == 1 else _nested(clean[:-1])[0]
        allowed = _allowed(cls, clean[:-1])
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
        log.add(loc, problem, hint, key=True)
    elif etype == "missing":
        if len(clean) == 1:
            needs = sorted(_required(rtype), key=list(cls.model_fields).index)
            log.add(
                loc[:-1],
                f"missing field {name!r} in a {rtype} rule",
                f"a {rtype} rule needs {_and(needs)}",
            )
        elif _nested(clean[:-1]) is _SELECTOR:
            log.add(
                loc[:-1],
                f"missing field {name!r} in a {{tool:, args_match:}} selector",
                "add tool: NAME next to args_match",
            )
        else:
            what, keys = _nested(clean[:-1])
            log.add(loc[:-1], f"missing field {name!r} in {what}", f"it needs {_and(list(keys))}")
    elif etype in _TYPE_WORDS:
        expected = _TYPE_WORDS[etype]
        hint = _type_hint(value, etype)
        if name == "when" and etype == "dict_type":
            hint = "write when: {user.role: standard} (dotted paths into the trace's context)"
        log.add(loc, f"{name!r} must be {expected}, got {describe(value)}", hint)
    elif etype == "literal_error":
        expected = ctx.get("expected", "")
        choices = re.findall(r"'([^']*)'", expected)
        guess = suggest(value, choices)
        problem = f"{name!r} must be one of {expected.replace(' or ', ', ')}, got {describe(value)}"
        if guess:
            problem += f" (did you mean {guess!r}?)"
        log.add(loc, problem, f"write {name}: {guess or (choices[0] if choices else '...')}")
    elif etype == "greater_than_equal":
        hints = {
            "max": "use max: 0 to ban the tool; a negative limit means nothing",
            "within": "steps are counted from 1, so within must be at least 1",
        }
        log.add(loc, f"{name!r} must be >= {ctx.get('ge')}, got {value}", hints.get(name, "raise the value"))
    elif etype == "too_short":
        if name == "tools" or spec.kind == "sequence":
            log.add(
                loc,
                f"a sequence needs at least two tools, got {ctx.get('actual_length', len(value or []))}",
                "list two or more tools, or use a `require` rule for one tool",
            )
        elif name == "expected":
            log.add(loc, "a trajectory's 'expected' must list at least one tool", "list the expected tools")
        else:
            log.add(loc, f"{name!r} needs at least {ctx.get('min_length')} item(s)", "add the missing items")
    elif etype == "string_too_short":
        if name == "pattern":
            log.add(
                loc,
                "the blocklist pattern is empty",
                "an empty pattern would forbid every tool; give a name or prefix such as admin_",
            )
        elif name == "description":
            log.add(
                loc,
                f"a {rtype} rule needs a non-empty description",
                "say in words what the rule requires",
            )
        else:
            log.add(loc, f"{name!r} must not be empty", "give a value")
    elif etype == "value_error":
        message = str(ctx.get("error", err.get("msg", ""))).removeprefix("Value error, ")
        if not clean and rtype == "before":
            first, then = spec.keymap.get("first", ("first",)), spec.keymap.get("then", ("then",))
            words = {"dependency": ("requires", "step"), "sequence": ("the sequence", "its next tool")}
            a, b = words.get(spec.kind, (_field_name(first), _field_name(then)))
            text = repr(_get(spec.raw, ("first",)))
            if spec.kind == "sequence":
                log.add(
                    loc + first,
                    f"the sequence repeats {text} twice in a row",
                    "a tool cannot be its own prerequisite: remove the repeat",
                )
            else:
                log.add(
                    loc,
                    f"{a} and {b} are both {text}",
                    "a tool cannot be its own prerequisite: name two different tools",
                )
            return
        if clean and clean[-1] == "args_match":
            log.add(
                loc,
                f"bad regular expression in {message}",
                "the values of args_match are Python regular expressions; escape special characters with \\",
            )
            return
        log.add(loc, message, "give a tool name" if "non-empty" in message else "fix the value")
    else:
        log.add(loc, f"{name!r}: {err.get('msg', 'invalid value')}", "fix the value")


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
