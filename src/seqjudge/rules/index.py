"""A trace indexed once, so that evaluating a rule never scans the whole trace.

The index holds the trace as columns (each call's name, success and arguments) and, per tool name, the
sorted positions of its calls and of its successful calls. A selector's positions are derived from those
lists (merged or filtered) and cached, so rules that share an operand share the work. A ``View`` is what one
rule evaluation sees: the whole trace, or one ``same:`` sub-trace whose calls keep their global positions
and steps.

Columns rather than call objects: the evaluators read a call's name far more often than anything else, and a
plain JSONL record (``seqjudge.trace.PlainTrace``) can hand its columns over without building a model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from seqjudge.rules.select import Selector
from seqjudge.trace import PlainTrace, Trace

EMPTY: list[int] = []


class TraceIndex:
    __slots__ = (
        "names",
        "ok",
        "args",
        "n",
        "steps",
        "sequential",
        "by_name",
        "ok_by_name",
        "_sel",
        "_groups",
    )

    def __init__(
        self, names: list[str], ok: list[bool], args: list[dict[str, Any]], steps: list[int]
    ) -> None:
        self.names = names
        self.ok = ok
        self.args = args
        self.n = len(names)
        self.steps = steps
        # Steps are ordinals from 0 that grow by at most one a call, so the last one says whether every
        # call is its own step (steps[i] == i), which lets evaluators use positions as steps.
        self.sequential = not steps or steps[-1] == self.n - 1
        by_name: dict[str, list[int]] = {}
        ok_by_name: dict[str, list[int]] = {}
        # One pass, appending to both lists of the call's name: sequential access only (a second pass
        # filtering each name's positions by `ok` reads a million-entry list at random).
        for i, (name, good) in enumerate(zip(names, ok, strict=True)):
            try:
                by_name[name].append(i)
            except KeyError:
                by_name[name] = [i]
                ok_by_name[name] = []
            if good:
                ok_by_name[name].append(i)
        self.by_name = by_name
        self.ok_by_name = ok_by_name
        self._sel: dict[Selector, tuple[list[int], list[int]]] = {}
        self._groups: dict[tuple[str, ...], list[tuple[str, list[int]]]] = {}

    @classmethod
    def of(cls, trace: Trace | PlainTrace) -> TraceIndex:
        if isinstance(trace, PlainTrace):
            return cls(trace.names, trace.ok, trace.args, trace.steps)
        calls = trace.calls
        return cls(
            [c.tool_name for c in calls],
            [c.status == "ok" for c in calls],
            [c.arguments for c in calls],
            trace.steps,
        )

    def positions(self, sel: Selector) -> tuple[list[int], list[int]]:
        """(every matching position, the successful ones), sorted, for the whole trace."""
        hit = self._sel.get(sel)
        if hit is not None:
            return hit
        by_name, ok_by_name = self.by_name, self.ok_by_name
        single = sel.single
        if single is not None:
            hit = (by_name[single], ok_by_name[single]) if single in by_name else ([], [])
            self._sel[sel] = hit
            return hit
        names = [n for n in sel.names if n in by_name]
        conditions = sel.conditions
        if not conditions and len(names) <= 1:
            result = (by_name[names[0]], ok_by_name[names[0]]) if names else ([], [])
        else:
            every: list[int] = []
            for n in names:
                every.extend(by_name[n])
            all_names, ok, args = self.names, self.ok, self.args
            for cond in conditions:
                for n in cond.names:
                    if n in sel.names:
                        continue  # already matched by name alone
                    for i in by_name.get(n, EMPTY):
                        if cond.hit(all_names[i], ok[i], args[i]):
                            every.append(i)
            every = sorted(set(every)) if conditions else sorted(every)
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
            for i, args in enumerate(self.args):
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
            for i, args in enumerate(self.args):
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

    def matching(self, sel: Selector, i: int) -> bool:
        """Does the call at position ``i`` match ``sel``?"""
        return sel.hit(self.names[i], self.ok[i], self.args[i])


# Built once: json.dumps with options builds an encoder per call, a third of the cost of a small value.
_CANONICAL = json.JSONEncoder(separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _value_text(value: Any) -> str:
    return _CANONICAL.encode(value)


class View:
    """The calls one rule evaluation sees."""

    __slots__ = ("index", "members", "label", "_cache")

    def __init__(self, index: TraceIndex, members: list[int] | None = None, label: str | None = None) -> None:
        self.index = index
        self.members = members
        self.label = label
        # The whole trace's view shares the index's cache: a hit costs one call, not two.
        self._cache: dict[Selector, tuple[list[int], list[int]]] = index._sel if members is None else {}

    def positions(self, sel: Selector) -> tuple[list[int], list[int]]:
        hit = self._cache.get(sel)
        if hit is None:
            if self.members is None:
                return self.index.positions(sel)
            index = self.index
            names, ok, args = index.names, index.ok, index.args
            every = [i for i in self.members if sel.hit(names[i], ok[i], args[i])]
            hit = (every, [i for i in every if ok[i]])
            self._cache[sel] = hit
        return hit

    def every_position(self) -> Sequence[int]:
        return range(self.index.n) if self.members is None else self.members
