"""Operands compiled against a rule set's aliases into selectors that match calls."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from seqjudge.pattern import Pattern, compile_pattern, timed_out
from seqjudge.rules.base import ArgsSelector, Operand, operand_text
from seqjudge.trace import Call

# Built once: json.dumps with options builds an encoder per call, a third of the cost of a small value.
_CANONICAL = json.JSONEncoder(separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def arg_text(value: Any) -> str:
    """An argument's value as args_match sees it: strings as they are, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return _CANONICAL.encode(value)


@dataclass(frozen=True)
class ArgCondition:
    names: frozenset[str]
    patterns: tuple[tuple[str, Pattern], ...]  # (argument, compiled pattern)
    status: str | None = None
    owner: str | None = field(default=None, compare=False)  # the rule id an error names

    def matches(self, call: Call) -> bool:
        return self.hit(call.tool_name, call.status == "ok", call.arguments)

    def hit(self, name: str, ok: bool, args: dict[str, Any]) -> bool:
        """``matches`` on a call's parts, as the trace index holds them (status is "ok" or "error")."""
        if name not in self.names:
            return False
        if self.status is not None and (self.status == "ok") != ok:
            return False
        for key, rx in self.patterns:
            if key not in args:
                return False
            text = arg_text(args[key])
            try:
                if rx.search(text) is None:
                    return False
            except TimeoutError:
                raise timed_out(rx.pattern, key, text, self.owner) from None
        return True


# eq=False: selectors are compiled once per engine and used as cache keys on every trace, so identity
# hashing (free) beats hashing their frozensets and patterns each time.
@dataclass(frozen=True, eq=False)
class Selector:
    """Matches a call whose name is in ``names``, or that satisfies one of ``conditions``."""

    text: str
    names: frozenset[str]
    conditions: tuple[ArgCondition, ...] = field(default=())
    # The operand as advice names it: the tools an alias stands for, never the alias as if it were a tool
    # ("Login or SSOLogin", not "Authenticate"); ``text`` when the operand names no alias.
    tools: str = ""
    # The one name a plain single-tool operand matches, else None: the index's shortest path.
    single: str | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if not self.tools:
            object.__setattr__(self, "tools", self.text)
        if not self.conditions and len(self.names) == 1:
            object.__setattr__(self, "single", next(iter(self.names)))

    @property
    def all_names(self) -> frozenset[str]:
        out = set(self.names)
        for c in self.conditions:
            out |= c.names
        return frozenset(out)

    @property
    def by_status(self) -> bool:
        """Whether the operand picks calls by ``status:`` (then it, not "every attempt", says what counts)."""
        return any(c.status is not None for c in self.conditions)

    @property
    def name_only(self) -> bool:
        return not self.conditions

    def matches(self, call: Call) -> bool:
        return self.hit(call.tool_name, call.status == "ok", call.arguments)

    def hit(self, name: str, ok: bool, args: dict[str, Any]) -> bool:
        """``matches`` on a call's parts, as the trace index holds them."""
        if name in self.names:
            return True
        if not self.conditions:  # (most operands): no generator a call
            return False
        return any(c.hit(name, ok, args) for c in self.conditions)


def expand_name(name: str, aliases: dict[str, list[str]]) -> list[str]:
    """An alias matches its members, not itself; members may themselves be aliases (cycles are cut)."""
    out: list[str] = []
    stack = [name]
    seen: set[str] = set()
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in aliases:
            stack.extend(reversed(aliases[n]))
        else:
            out.append(n)
    return out


def operand_names(op: Operand) -> list[str]:
    """The names an operand mentions as written (aliases not expanded)."""
    if isinstance(op, str):
        return [op]
    if isinstance(op, ArgsSelector):
        return [op.tool] if isinstance(op.tool, str) else list(op.tool)
    out: list[str] = []
    for item in op:
        out.extend(operand_names(item))
    return out


def compile_operand(op: Operand, aliases: dict[str, list[str]], owner: str | None = None) -> Selector:
    """``owner``: the id of the rule the operand belongs to, named when one of its patterns times out."""
    names: set[str] = set()
    conditions: list[ArgCondition] = []
    items: list[str | ArgsSelector] = op if isinstance(op, list) else [op]
    for item in items:
        if isinstance(item, str):
            names.update(expand_name(item, aliases))
            continue
        tools = [item.tool] if isinstance(item.tool, str) else item.tool
        members: set[str] = set()
        for t in tools:
            members.update(expand_name(t, aliases))
        if not item.args_match and item.status is None:
            names |= members
        else:
            patterns = tuple((k, compile_pattern(v)) for k, v in item.args_match.items())
            conditions.append(ArgCondition(frozenset(members), patterns, item.status, owner))
    return Selector(operand_text(op), frozenset(names), tuple(conditions), tools_text(op, aliases))


def tools_text(op: Operand, aliases: dict[str, list[str]]) -> str:
    """The operand's text with each alias replaced by the tools it stands for."""
    if not any(n in aliases for n in operand_names(op)):
        return operand_text(op)
    items = [op] if isinstance(op, str) else op if isinstance(op, list) else []
    plain = [item for item in items if isinstance(item, str)]
    if items and len(plain) == len(items):
        return " or ".join(dict.fromkeys(t for item in plain for t in expand_name(item, aliases)))
    # An alias inside an argument selector: keep the selector's conditions, name the tools after it.
    tools = list(dict.fromkeys(t for n in operand_names(op) for t in expand_name(n, aliases)))
    return f"{operand_text(op)} (one of {', '.join(tools)})"


def selects_within(inner: Operand, outer: Operand, aliases: dict[str, list[str]]) -> bool:
    """True when every call ``inner`` can select, ``outer`` selects too, decided on tool names: every tool
    ``inner`` names (aliases expanded, whatever its conditions) is one ``outer`` names without conditions."""
    return compile_operand(inner, aliases).all_names <= compile_operand(outer, aliases).names
