"""A trace indexed once, so that evaluating a rule never scans the whole trace.

The index holds the trace as columns (each call's name, success and arguments) and, per tool name, the
sorted positions of its calls and of its successful calls. A selector's positions are derived from those
lists (merged or filtered) and cached, so rules that share an operand share the work. A ``View`` is what one
rule evaluation sees: the whole trace, or one ``same:`` group whose calls keep their global positions and
steps. The groups of a ``same:`` argument list are found once per trace (a ``Grouping``, which the engine
keeps per check and shares among the rules with those arguments); a group is evaluated on its share of the
rule's operands' positions, and calls no operand selects are grouped only if a rule asks for every call of a
group or the full report counts the values.

Columns rather than call objects: the evaluators read a call's name far more often than anything else, and a
plain JSONL record (``seqjudge.trace.PlainTrace``) can hand its columns over without building a model.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import repeat
from operator import contains
from typing import TYPE_CHECKING, Any

from seqjudge.rules.select import Selector
from seqjudge.trace import PlainTrace, Trace

if TYPE_CHECKING:
    from seqjudge.rules.lineage import Sources

EMPTY: list[int] = []
# Up to this many calls a trace is indexed by the loop that suits few calls to many tools.
_SHORT = 64


Pair = tuple[list[int], list[int]]
NO_POSITIONS: Pair = ([], [])  # shared: no evaluator changes the positions it is given


class _Positions(dict[Selector, Pair]):
    """A trace's positions per selector, (every matching position, the successful ones), each computed at
    its first lookup and kept: rules that share an operand share the work.

    A dict, so that a view hands an evaluator its lookup as the dict's own ``__getitem__`` (a call into C,
    not a Python frame: the evaluators ask for positions some thirty times a trace). It holds the index's
    columns, not the index, so that nothing refers back to the index (which then is freed as soon as the
    check ends, not by the garbage collector).
    """

    __slots__ = ("names", "ok", "args", "by_name", "ok_by_name")

    # No __init__ of its own: the index sets the columns on the empty dict (a Python call a trace saved).
    names: list[str]
    ok: list[bool]
    args: list[dict[str, Any]]
    by_name: dict[str, list[int]]
    ok_by_name: dict[str, list[int]]

    def __missing__(self, sel: Selector) -> Pair:
        by_name = self.by_name
        single = sel.single
        if single is not None:
            hit = (by_name[single], self.ok_by_name[single]) if single in by_name else NO_POSITIONS
            self[sel] = hit
            return hit
        ok_by_name = self.ok_by_name
        names = list(filter(by_name.__contains__, sel.names))  # (no comprehension's call)
        conditions = sel.conditions
        if not conditions and len(names) <= 1:
            result = (by_name[names[0]], ok_by_name[names[0]]) if names else NO_POSITIONS
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
            # Without a failed call in the trace, every position is a successful one (lists are shared:
            # nothing changes them).
            result = (every, every if ok_by_name is by_name else [i for i in every if ok[i]])
        self[sel] = result
        return result


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
        "source",
        "_lineage",
        "_owned",
    )

    def __init__(
        self,
        names: list[str],
        ok: list[bool],
        args: list[dict[str, Any]],
        steps: list[int],
        singles: Sequence[tuple[Selector, str]] = (),
    ) -> None:
        """``singles``: selectors of one tool name each (``Selector.single``), whose positions are set here
        rather than found at their first lookup (``_Positions.__missing__``: a Python call per selector
        and trace)."""
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
        # The trace itself, for the rules that read more than names, statuses and arguments (lineage: its
        # outputs and messages, parsed once for all of them at the first ask: ``lineage_sources``).
        self.source: Trace | PlainTrace | None = None
        self._lineage: Sources | None = None
        self._owned = False  # whether each name's successful positions are a list of its own (_own_lists)
        sel = self._sel = _Positions()
        sel.names, sel.ok, sel.args = names, ok, args
        ok_by_name = sel.ok_by_name = self.ok_by_name
        sel.by_name = by_name
        for single, name in singles:
            sel[single] = (by_name[name], ok_by_name[name]) if name in by_name else NO_POSITIONS

    def append(self, name: str, ok: bool, args: dict[str, Any], step: int) -> int:
        """Add a call at the end and return its position: the index of a session that grows a call at a
        time (``seqjudge.guard``), so that the engine's evaluators read it as they read a whole trace's.

        The columns, the per-name positions and the positions cached per selector grow in place (a call to
        a tool not called before empties the cache instead: a selector of that name cached the shared empty
        positions), and so do the lineage sources read so far (``Sources.added``)."""
        self._own_lists()
        i = self.n
        self.names.append(name)
        self.ok.append(ok)
        self.args.append(args)
        self.steps.append(step)
        self.n = i + 1
        self.sequential = step == i
        by_name, ok_by_name = self.by_name, self.ok_by_name
        cached = self._sel
        own = by_name.get(name)
        if own is None:
            by_name[name] = [i]
            ok_by_name[name] = [i] if ok else []
            cached.clear()
        else:
            own.append(i)
            if ok:
                ok_by_name[name].append(i)
            for sel, (every, good) in cached.items():
                # A selector of this name alone holds its lists, grown above; any other gets the call if it
                # matches it (``__missing__`` builds its lists of its own).
                if every is not own and sel.hit(name, ok, args):
                    every.append(i)
                    if ok:
                        good.append(i)
        if self._lineage is not None:
            self._lineage.added(i, name, ok, args, step)
        return i

    def pop(self) -> None:
        """Remove the last call (``append`` undone: the guard's proposed call, once decided)."""
        self._own_lists()
        i = self.n - 1
        if self._lineage is not None:
            self._lineage.removed(i, self.names[i], self.ok[i], self.args[i])
        name = self.names.pop()
        self.ok.pop()
        self.args.pop()
        self.steps.pop()
        self.n = i
        steps = self.steps
        self.sequential = not steps or steps[-1] == i - 1
        own, own_ok = self.by_name[name], self.ok_by_name[name]
        for every, good in self._sel.values():
            if every and every[-1] == i and every is not own:
                every.pop()
            if good and good[-1] == i and good is not own_ok:
                good.pop()
        own.pop()
        if own_ok and own_ok[-1] == i:
            own_ok.pop()
        if not own:
            del self.by_name[name], self.ok_by_name[name]
            self._sel.clear()  # (a selector cached this name's lists, which a later call would not grow)

    def _own_lists(self) -> None:
        """Give the successful positions lists of their own, so that a call appended (or removed) changes
        exactly the lists it belongs in: a built index shares them with every position's when no call failed
        (``ok_by_name is by_name``), and per name otherwise. A session's index does this once, when empty."""
        if self._owned:
            return
        ok = self.ok
        self.ok_by_name = {k: [i for i in v if ok[i]] for k, v in self.by_name.items()}
        self._sel.ok_by_name = self.ok_by_name
        self._sel.clear()  # (what it cached may share the lists replaced)
        self._owned = True

    @classmethod
    def of(cls, trace: Trace | PlainTrace, singles: Sequence[tuple[Selector, str]] = ()) -> TraceIndex:
        if isinstance(trace, PlainTrace):
            names = trace.names
            # (PlainTrace.steps, without the property's call: every call is its own step)
            index = cls(names, trace.ok, trace.args, list(range(len(names))), singles)
        else:
            calls = trace.calls
            index = cls(
                [c.tool_name for c in calls],
                [c.status == "ok" for c in calls],
                [c.arguments for c in calls],
                trace.steps,
                singles,
            )
        index.source = trace
        return index

    def lineage_sources(self) -> Sources:
        """The trace's outputs, user messages and context as lineage rules read them (built once)."""
        found = self._lineage
        if found is None:
            if self.source is None:
                raise ValueError("this index was built without its trace: lineage rules cannot read outputs")
            # Imported here: only a rule set with lineage rules pays for it (and for `regex`) at start-up.
            from seqjudge.rules.lineage import sources_of

            found = self._lineage = sources_of(self.source)
        return found

    def messages_moved(self) -> None:
        """The trace's messages changed their places among the calls (a guard's view of a session without
        some of its calls, ``seqjudge.guard.aside``): the lineage sources read so far read them again."""
        if self._lineage is not None and self.source is not None:
            from seqjudge.rules.lineage import sources_of

            self._lineage.user = sources_of(self.source).user

    def positions(self, sel: Selector) -> tuple[list[int], list[int]]:
        """(every matching position, the successful ones), sorted, for the whole trace."""
        return self._sel[sel]

    def matching(self, sel: Selector, i: int) -> bool:
        """Does the call at position ``i`` match ``sel``?"""
        return sel.hit(self.names[i], self.ok[i], self.args[i])


# Built once: json.dumps with options builds an encoder per call, a third of the cost of a small value.
_CANONICAL = json.JSONEncoder(separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _value_text(value: Any) -> str:
    return _CANONICAL.encode(value)


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

    A call lacking any of the arguments is in no group; values count as equal when their JSON texts are, and
    a group is named by its key (``_group_key`` of its values). Built lazily, because a rule reads only the
    groups its operands touch: ``split`` groups one selector's positions by their calls' values (cached, so
    every rule with those arguments and that operand shares it); the other calls' values are read only when
    the number of groups, their order of first appearance or a group's every call is asked for (``members``,
    built once for all groups). The grouping itself is built once per trace and ``same:`` list.
    """

    __slots__ = ("index", "keys", "_key", "_split", "_members")

    def __init__(self, index: TraceIndex, keys: tuple[str, ...]) -> None:
        self.index = index
        self.keys = keys
        self._key = keys[0] if len(keys) == 1 else None  # the common case, one argument, inlined below
        self._split: dict[Selector, dict[Any, tuple[list[int], list[int]]]] = {}
        self._members: dict[Any, list[int]] | None = None

    def key_of(self, args: dict[str, Any]) -> Any:
        """The key of the group of a call with these arguments, or ``_MISSING`` when it is in none."""
        k = self._key
        if k is not None:
            value = args.get(k, _MISSING)
            if value is _MISSING or type(value) is str:
                return value
            return _group_key(value)
        try:
            return tuple([_group_key(args[k]) for k in self.keys])
        except KeyError:
            return _MISSING

    def grouped(self, positions: Iterable[int]) -> Iterator[tuple[int, Any]]:
        """(position, group key) of each call at ``positions`` that is in a group, in their order: the one
        place a call's group is read. One argument (the common case) is looked up here, not through
        ``key_of``: a call per position would cost more than the lookup on the million-call trace."""
        args, k = self.index.args, self._key
        if k is None:
            key_of = self.key_of
            for i in positions:
                g = key_of(args[i])
                if g is not _MISSING:
                    yield i, g
            return
        for i in positions:
            g = args[i].get(k, _MISSING)
            if g is not _MISSING:
                yield i, (g if type(g) is str else _group_key(g))

    def split(self, sel: Selector) -> dict[Any, tuple[list[int], list[int]]]:
        """Per group that has any, (its calls matching ``sel``, the successful ones), sorted."""
        hit = self._split.get(sel)
        if hit is not None:
            return hit
        every, _ = self.index.positions(sel)
        ok = self.index.ok
        out: dict[Any, tuple[list[int], list[int]]] = {}
        for i, g in self.grouped(every):
            pair = out.get(g)
            if pair is None:
                pair = out[g] = ([], [])
            pair[0].append(i)
            if ok[i]:
                pair[1].append(i)
        self._split[sel] = out
        return out

    def shares(self, sels: Sequence[Selector]) -> dict[Any, dict[Selector, tuple[list[int], list[int]]]]:
        """Per group any of ``sels`` (distinct selectors) touches, in the order the groups first appear among
        their positions: each selector's share of the group's calls, (every, successful), sorted, or none. A
        view showing a group's share (``View.share``) is that group to an evaluator that reads only its
        operands' positions.

        One pass over the selectors' positions and no per-selector split cached: on a short trace a rule's
        operands touch a call or two, and a lean report evaluates each group once."""
        index = self.index
        ok, positions = index.ok, index._sel
        out: dict[Any, dict[Selector, tuple[list[int], list[int]]]] = {}
        for sel in sels:
            for i, g in self.grouped(positions[sel][0]):
                share = out.get(g)
                if share is None:
                    share = out[g] = dict.fromkeys(sels, NO_POSITIONS)
                pair = share[sel]
                if pair is NO_POSITIONS:
                    pair = share[sel] = ([], [])
                pair[0].append(i)
                if ok[i]:
                    pair[1].append(i)
        return out

    def group_of(self, i: int) -> Any:
        """The key of call ``i``'s group, or None when it lacks an argument (it is in no group)."""
        g = self.key_of(self.index.args[i])
        return None if g is _MISSING else g

    def added(self, i: int) -> None:
        """Call ``i`` was appended to the index (a guard session's, ``TraceIndex.append``): the groups found
        so far take it in, as a grouping built afresh would have it."""
        index = self.index
        args = index.args[i]
        g = self.key_of(args)
        if g is _MISSING:
            return
        name, ok = index.names[i], index.ok[i]
        for sel, groups in self._split.items():
            if sel.hit(name, ok, args):
                pair = groups.get(g)
                if pair is None:
                    pair = groups[g] = ([], [])
                pair[0].append(i)
                if ok:
                    pair[1].append(i)
        members = self._members
        if members is not None:
            if g in members:
                members[g].append(i)
            else:
                members[g] = [i]

    def removed(self, i: int) -> None:
        """Call ``i``, the last, is about to leave the index (``TraceIndex.pop``): ``added`` undone."""
        g = self.key_of(self.index.args[i])
        if g is _MISSING:
            return
        for groups in self._split.values():
            pair = groups.get(g)
            if pair is not None and pair[0][-1] == i:
                pair[0].pop()
                if pair[1] and pair[1][-1] == i:
                    pair[1].pop()
                if not pair[0]:
                    del groups[g]
        members = self._members
        if members is not None:
            calls = members[g]
            calls.pop()
            if not calls:
                del members[g]

    def members(self, g: Any) -> list[int]:
        """Every call of group ``g``, in order."""
        return self.all_members()[g]

    def all_members(self) -> dict[Any, list[int]]:
        """Every group's calls, the groups in order of first appearance (built at the first request)."""
        members = self._members
        if members is None:
            members = self._members = {}
            for i, g in self.grouped(range(self.index.n)):
                calls = members.get(g)
                if calls is None:
                    members[g] = [i]
                else:
                    calls.append(i)
        return members

    def first_seen(self, wanted: Iterable[Any]) -> dict[Any, int]:
        """The position of the first call of each wanted group. Without the members built, a scan from the
        start that stops once every wanted group is seen: on a long trace the values mostly appear early,
        so ordering a few failed groups does not read every call's arguments."""
        members = self._members
        if members is not None:
            return {g: members[g][0] for g in wanted}
        left = set(wanted)
        first: dict[Any, int] = {}
        for i, g in self.grouped(range(self.index.n)):
            if g in left:
                first[g] = i
                left.discard(g)
                if not left:
                    break
        return first

    def __len__(self) -> int:
        return len(self.all_members())

    def any(self) -> bool:
        """Does any call carry the arguments (is there a group)? Stops at the first that does."""
        if self._members is not None:
            return bool(self._members)
        args, k = self.index.args, self._key
        if k is not None:
            return any(map(contains, args, repeat(k)))  # at C speed: most calls may lack the argument
        keys = self.keys
        return any(all(k in a for k in keys) for a in args)

    def label(self, i: int) -> str:
        """The values of call ``i``'s group as messages name them: ``order_id="#1"``."""
        a = self.index.args[i]
        k = self._key
        if k is not None:  # one argument, the common case: no generator
            return f"{k}={_value_text(a[k])}"
        return ", ".join([f"{k}={_value_text(a[k])}" for k in self.keys])


class View:
    """The calls one rule evaluation sees: the whole trace, or one group of a ``same:`` rule.

    Evaluators read a view only through ``positions`` (and, walking a group's calls, ``members`` and
    ``every_position``), which the ``same:`` evaluation relies on: a group none of whose calls match any of
    a rule's operands gets the rule's finding on an empty trace. ``positions`` is a lookup (a dict's
    ``__getitem__``): of the index's positions for the whole trace; for a group, of its share (``show``).
    One view serves every group of a ``same:`` rule in turn. ``explain`` False: the report will not show a
    pass, so an evaluator may return ``evaluate.BARE_PASS`` instead of explaining it.
    """

    __slots__ = ("index", "grouping", "group", "explain", "positions")

    def __init__(
        self, index: TraceIndex, grouping: Grouping | None = None, group: Any = None, explain: bool = True
    ) -> None:
        self.index = index
        self.grouping = grouping
        self.group = group
        self.explain = explain
        self.positions: Callable[[Selector], Pair] = index._sel.__getitem__

    def show(self, share: dict[Selector, Pair], group: Any = None) -> None:
        """Show the group whose share of the operands' positions is ``share`` (it holds every operand of
        the rule); ``group`` its key in ``grouping``, for an evaluator that walks its calls."""
        self.positions = share.__getitem__
        self.group = group

    @property
    def members(self) -> list[int] | None:
        """The group's calls, or None for the whole trace."""
        return None if self.grouping is None else self.grouping.members(self.group)

    def every_position(self) -> Sequence[int]:
        return range(self.index.n) if self.grouping is None else self.grouping.members(self.group)
