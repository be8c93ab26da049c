"""A trace indexed once, so that evaluating a rule never scans the whole trace.

The index holds the trace as columns (each call's name, success and arguments) and, per tool name, the
sorted positions of its calls and of its successful calls. A selector's positions are derived from those
lists (merged or filtered) and cached, so rules that share an operand share the work. A ``View`` is what one
rule evaluation sees: the whole trace, or one ``same:`` group whose calls keep their global positions and
steps. The groups of a ``same:`` argument list are found once per trace (a ``Grouping``), and a selector's
positions are split by group once, so every rule with those arguments shares both.

Columns rather than call objects: the evaluators read a call's name far more often than anything else, and a
plain JSONL record (``seqjudge.trace.PlainTrace``) can hand its columns over without building a model.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Sequence
from typing import Any

from seqjudge.rules.select import Selector
from seqjudge.trace import PlainTrace, Trace

EMPTY: list[int] = []
# Up to this many calls a trace is indexed by the loop that suits few calls to many tools.
_SHORT = 64


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
        "_groupings",
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
        if len(ok) != self.n:
            raise ValueError(f"{self.n} call names but {len(ok)} statuses")
        by_name: dict[str, list[int]] = {}
        if self.n > _SHORT:
            for i, name in enumerate(names):
                try:
                    by_name[name].append(i)
                except KeyError:
                    by_name[name] = [i]
        else:  # few calls, mostly to different tools: a KeyError raised per new name would cost more
            for i, name in enumerate(names):
                if name in by_name:
                    by_name[name].append(i)
                else:
                    by_name[name] = [i]
        self.by_name = by_name
        # Calls fail rarely. Without a failed call (most traces) the successful positions are the same
        # lists, which nothing changes; otherwise the failed calls are found by C-level scans and cut out of
        # their names' lists, whose runs between them are copied as slices.
        n_failed = ok.count(False)
        if n_failed:
            failed: dict[str, list[int]] = {}
            i = -1
            for _ in range(n_failed):
                i = ok.index(False, i + 1)
                failed.setdefault(names[i], []).append(i)
            ok_by_name = by_name.copy()
            for name, cut in failed.items():
                positions = by_name[name]
                kept: list[int] = []
                start = 0
                for i in cut:
                    at = bisect_left(positions, i, start)
                    kept += positions[start:at]
                    start = at + 1
                kept += positions[start:]
                ok_by_name[name] = kept
            self.ok_by_name = ok_by_name
        else:
            self.ok_by_name = by_name
        self._sel: dict[Selector, tuple[list[int], list[int]]] = {}
        self._groupings: dict[tuple[str, ...], Grouping] = {}

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

    def grouping(self, keys: Sequence[str]) -> Grouping:
        """The calls grouped by the values of the ``keys`` arguments (a ``same:`` list), built once."""
        key = tuple(keys)
        hit = self._groupings.get(key)
        if hit is None:
            hit = self._groupings[key] = Grouping(self, key)
        return hit

    def matching(self, sel: Selector, i: int) -> bool:
        """Does the call at position ``i`` match ``sel``?"""
        return sel.hit(self.names[i], self.ok[i], self.args[i])


# Built once: json.dumps with options builds an encoder per call, a third of the cost of a small value.
_CANONICAL = json.JSONEncoder(separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _value_text(value: Any) -> str:
    return _CANONICAL.encode(value)


_NO_POSITIONS: tuple[list[int], list[int]] = ([], [])
_MISSING: Any = object()  # an argument a call lacks (None is a value: JSON's null)
# Values of these types are equal exactly when their JSON texts are, so (type, value) keys them. A float
# is not (0.0 == -0.0, and NaN is not equal to itself), nor a container (unhashable): their text keys them.
_AS_IS = frozenset({int, bool, type(None)})


class _Text:
    """Marks a grouping key that is a value's JSON text."""


def _group_key(value: Any) -> Any:
    """What a value is grouped by: equal keys exactly when the values' JSON texts are equal."""
    kind = type(value)
    if kind is str:
        return value  # the common case; no other key is a str
    # (type, value) keeps 1 and True apart, as their JSON texts are.
    return (kind, value) if kind in _AS_IS else (_Text, _value_text(value))


class Grouping:
    """The calls of one trace grouped by the values of some arguments (one ``same:`` list).

    A call lacking any of the arguments is in no group. Groups are numbered by first appearance, and values
    count as equal when their JSON texts are. ``group_of[i]`` is call ``i``'s group (-1: none), so a
    selector's positions split into groups in one pass over those positions (``split``), not one pass over
    every group's calls per selector; the split is cached, so rules sharing an operand share it.
    """

    __slots__ = ("index", "keys", "group_of", "_first", "_split", "_members")

    def __init__(self, index: TraceIndex, keys: tuple[str, ...]) -> None:
        self.index = index
        self.keys = keys
        ids: dict[Any, int] = {}
        first: list[dict[str, Any]] = []  # per group, the arguments of its first call (for its label)
        group_of: list[int] = []
        # One loop with the common case, one string argument, inlined: it serves a trace of twenty calls
        # (where setting up C-level passes costs more than the loop) and of a million alike.
        if len(keys) == 1:
            (k,) = keys
            append, lookup = group_of.append, ids.get
            for a in index.args:
                value = a.get(k, _MISSING)
                if value is _MISSING:
                    append(-1)
                    continue
                key = value if type(value) is str else _group_key(value)
                g = lookup(key)
                if g is None:
                    g = ids[key] = len(first)
                    first.append(a)
                append(g)
        else:
            for a in index.args:
                try:
                    key = tuple([_group_key(a[k]) for k in keys])
                except KeyError:
                    group_of.append(-1)
                    continue
                g = ids.get(key)
                if g is None:
                    g = ids[key] = len(first)
                    first.append(a)
                group_of.append(g)
        self.group_of = group_of
        self._first = first
        self._split: dict[Selector, dict[int, tuple[list[int], list[int]]]] = {}
        self._members: list[list[int]] | None = None

    def __len__(self) -> int:
        return len(self._first)

    def label(self, g: int) -> str:
        """Group ``g``'s values as messages name them: ``order_id="#1"``."""
        a = self._first[g]
        return ", ".join(f"{k}={_value_text(a[k])}" for k in self.keys)

    def split(self, sel: Selector) -> dict[int, tuple[list[int], list[int]]]:
        """Per group that has any, (its calls matching ``sel``, the successful ones), sorted."""
        hit = self._split.get(sel)
        if hit is not None:
            return hit
        every, ok = self.index.positions(sel)
        group_of = self.group_of
        out: dict[int, tuple[list[int], list[int]]] = {}
        for i in every:
            g = group_of[i]
            if g >= 0:
                pair = out.get(g)
                if pair is None:
                    out[g] = ([i], [])
                else:
                    pair[0].append(i)
        for i in ok:
            g = group_of[i]
            if g >= 0:
                out[g][1].append(i)
        self._split[sel] = out
        return out

    def members(self, g: int) -> list[int]:
        """Every call of group ``g``, in order (built for all groups at the first request)."""
        if self._members is None:
            members: list[list[int]] = [[] for _ in self._first]
            for i, h in enumerate(self.group_of):
                if h >= 0:
                    members[h].append(i)
            self._members = members
        return self._members[g]


class View:
    """The calls one rule evaluation sees: the whole trace, or group ``group`` of a ``Grouping``.

    Evaluators read a view only through ``positions`` (and, walking a group's calls, ``members`` and
    ``every_position``), which the ``same:`` evaluation relies on: a group none of whose calls match any of
    a rule's operands gets the rule's finding on an empty trace.
    """

    __slots__ = ("index", "grouping", "group", "_cache")

    def __init__(self, index: TraceIndex, grouping: Grouping | None = None, group: int = -1) -> None:
        self.index = index
        self.grouping = grouping
        self.group = group
        # The whole trace's view reads the index's cache itself: a hit costs one call, not two.
        self._cache: dict[Selector, tuple[list[int], list[int]]] = index._sel

    @property
    def members(self) -> list[int] | None:
        """The group's calls, or None for the whole trace."""
        return None if self.grouping is None else self.grouping.members(self.group)

    def positions(self, sel: Selector) -> tuple[list[int], list[int]]:
        grouping = self.grouping
        if grouping is None:
            hit = self._cache.get(sel)
            return hit if hit is not None else self.index.positions(sel)
        return grouping.split(sel).get(self.group, _NO_POSITIONS)

    def every_position(self) -> Sequence[int]:
        return range(self.index.n) if self.grouping is None else self.grouping.members(self.group)
