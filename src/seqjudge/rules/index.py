"""A trace indexed once, so that evaluating a rule never scans the whole trace.

The index holds, per tool name, the sorted positions of its calls and of its successful calls. A selector's
positions are derived from those lists (merged or filtered) and cached, so rules that share an operand share
the work. A ``View`` is what one rule evaluation sees: the whole trace, or one ``same:`` sub-trace whose calls
keep their global positions and steps.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from seqjudge.rules.select import Selector
from seqjudge.trace import Call, Trace

EMPTY: list[int] = []


class TraceIndex:
    __slots__ = ("calls", "n", "steps", "ok", "by_name", "ok_by_name", "_sel", "_groups")

    def __init__(self, trace: Trace) -> None:
        calls = trace.calls
        self.calls: list[Call] = calls
        self.n = len(calls)
        self.steps: list[int] = trace.steps
        ok = [c.status == "ok" for c in calls]
        by_name: dict[str, list[int]] = {}
        ok_by_name: dict[str, list[int]] = {}
        # One pass, appending to both lists of the call's name: sequential access only (a second pass
        # filtering each name's positions by `ok` reads a million-entry list at random).
        for i, c in enumerate(calls):
            name = c.tool_name
            try:
                by_name[name].append(i)
            except KeyError:
                by_name[name] = [i]
                ok_by_name[name] = []
            if ok[i]:
                ok_by_name[name].append(i)
        self.ok = ok
        self.by_name = by_name
        self.ok_by_name = ok_by_name
        self._sel: dict[Selector, tuple[list[int], list[int]]] = {}
        self._groups: dict[tuple[str, ...], list[tuple[str, list[int]]]] = {}

    def positions(self, sel: Selector) -> tuple[list[int], list[int]]:
        """(every matching position, the successful ones), sorted, for the whole trace."""
        hit = self._sel.get(sel)
        if hit is not None:
            return hit
        by_name, ok_by_name = self.by_name, self.ok_by_name
        names = [n for n in sel.names if n in by_name]
        if sel.name_only and len(names) == 1:
            result = (by_name[names[0]], ok_by_name[names[0]])
        else:
            every: list[int] = []
            for n in names:
                every.extend(by_name[n])
            calls = self.calls
            for cond in sel.conditions:
                for n in cond.names:
                    if n in sel.names:
                        continue  # already matched by name alone
                    for i in by_name.get(n, EMPTY):
                        if cond.matches(calls[i]):
                            every.append(i)
            every = sorted(set(every)) if sel.conditions else sorted(every)
            ok = self.ok
            result = (every, [i for i in every if ok[i]])
        self._sel[sel] = result
        return result

    def groups(self, keys: Sequence[str]) -> list[tuple[str, list[int]]]:
        """One (value label, positions) per distinct tuple of the ``keys`` arguments."""
        key = tuple(keys)
        hit = self._groups.get(key)
        if hit is not None:
            return hit
        found: dict[str, list[int]] = {}
        if len(key) == 1:
            # The common case, one argument: group by the raw value and render each label once.
            (k,) = key
            by_value: dict[Any, list[int]] = {}
            unhashable: list[tuple[int, Any]] = []
            for i, c in enumerate(self.calls):
                args = c.arguments
                if args and k in args:
                    value = args[k]
                    # (type, value) keeps 1, 1.0 and True apart, as their JSON texts are.
                    try:
                        by_value.setdefault((type(value), value), []).append(i)
                    except TypeError:
                        unhashable.append((i, value))
            for (_, value), positions in by_value.items():
                found[f"{k}={_value_text(value)}"] = positions
            for i, value in unhashable:
                found.setdefault(f"{k}={_value_text(value)}", []).append(i)
            if unhashable:
                for label in found:
                    found[label].sort()
        else:
            for i, c in enumerate(self.calls):
                args = c.arguments
                if not args:
                    continue
                try:
                    values = [args[k] for k in key]
                except KeyError:
                    continue
                label = ", ".join(f"{k}={_value_text(v)}" for k, v in zip(key, values, strict=True))
                found.setdefault(label, []).append(i)
        result = list(found.items())
        self._groups[key] = result
        return result


def _value_text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


class View:
    """The calls one rule evaluation sees."""

    __slots__ = ("index", "members", "label", "_cache")

    def __init__(self, index: TraceIndex, members: list[int] | None = None, label: str | None = None) -> None:
        self.index = index
        self.members = members
        self.label = label
        self._cache: dict[Selector, tuple[list[int], list[int]]] = {}

    def positions(self, sel: Selector) -> tuple[list[int], list[int]]:
        if self.members is None:
            return self.index.positions(sel)
        hit = self._cache.get(sel)
        if hit is None:
            calls, ok = self.index.calls, self.index.ok
            every = [i for i in self.members if sel.matches(calls[i])]
            hit = (every, [i for i in every if ok[i]])
            self._cache[sel] = hit
        return hit

    def every_position(self) -> Sequence[int]:
        return range(self.index.n) if self.members is None else self.members
