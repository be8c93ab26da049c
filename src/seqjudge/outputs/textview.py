"""Plain-text views of engine reports: the actionable FAIL block of seed 002, one line per trace, totals."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, AnyStr

from seqjudge.redact import may_need_redaction, redact_value
from seqjudge.report import Report, Violation
from seqjudge.rules.coverage import Coverage
from seqjudge.safetext import printable_ascii, terminal
from seqjudge.trace import PlainTrace, Trace

WINDOW = 4  # calls shown on each side of the offending call in long traces
SHORT_TRACE = 12  # traces up to this many calls are shown whole
SCREEN_WHOLE = 200  # traces up to this many calls have their arguments screened for secrets at once
MARK = "← violation"
INDENT = "     "  # of a block's call list


# One encoder for every call's arguments: json.dumps with these options builds a new one each time.
_ENCODER = json.JSONEncoder(separators=(", ", "="), ensure_ascii=False, sort_keys=True, default=str)
ARGS_LIMIT = 60  # characters of a call's arguments shown


def _dump(args: dict[str, Any]) -> str:
    return _ENCODER.encode(args)


def _args_text(args: dict[str, Any], limit: int = ARGS_LIMIT, *, dumped: str | None = None) -> str:
    """``(key=value, ...)``, shortened to ``limit``; ``dumped``: ``_dump(args)``, already known to need no
    redaction."""
    if not args:
        return ""
    text = dumped
    if text is None:
        # A terminal or CI log is outside the process: the one redaction policy.
        text = _dump(redact_value(args))
    return "(" + _shortened(text[1:-1].replace('"', ""), limit) + ")"


def _shortened(text: str, limit: int = ARGS_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# What the encoder escapes in a string (ensure_ascii off): the quote, the backslash and C0 controls.
_JSON_ESCAPED = re.compile('[\x00-\x1f"\\\\]')


def _plain_calls(names: list[str], arguments: list[dict[str, Any]], numbers: list[str]) -> list[str] | None:
    """Each call's ``name(key=value, ...)`` as ``Calls`` shows it (``_args_text``) but for arguments too long
    to show whole (``_shortened_calls``), after its number (``numbers``, ``_numbers``: the start of its line
    in the block's list), made directly when every call's arguments are the usual ones - plain strings and
    integers under string keys - and no key or value needs redaction or a JSON escape (the encoder costs
    several microseconds a call, and every shown call is written). None otherwise: the encoder's way then.

    Keys and values already found clean (``_KNOWN``) are not screened again; the others are screened in one
    text. The screen finds its words in a key or value wherever it would in the encoder's text of the
    arguments (the same keys and values, without the quotes no screened word holds), so a miss here is a
    miss there."""
    known = _KNOWN
    numerals = _NUMERALS
    fresh: list[str] = []
    texts: list[str] = []
    append = texts.append
    # The keys of the last two-argument call, as they came (already screened), and sorted: the same key
    # objects come call after call (the JSON reader keeps one of each short string).
    came, came_other, key, other, opening, middle = _NO_KEY, _NO_KEY, "", "", "", ""
    pairs = _PAIRS
    for number, name, args in zip(numbers, names, arguments, strict=True):
        # Two arguments, the usual size: the loop below unrolled, without sorted() or a parts list, and its
        # keys looked up (``_pair``) only when they are not the last call's.
        if len(args) == 2:
            first, then = args
            if first is not came or then is not came_other:
                pair = pairs.get((first, then))
                if pair is None:
                    pair = _pair(first, then)
                    if pair is None:
                        return None
                came, came_other = first, then
                key, other, opening, middle = pair
            value, second = args[key], args[other]
            # Exactly str and int: a bool is an int that JSON writes as true, a subclass may print otherwise.
            kind = type(value)
            if kind is str:
                if value not in known:
                    fresh.append(value)
            elif kind is int:
                try:
                    value = numerals[value]
                except KeyError:
                    value = _numeral(value)
            else:
                return None
            kind = type(second)
            if kind is str:
                if second not in known:
                    fresh.append(second)
            elif kind is int:
                try:
                    second = numerals[second]
                except KeyError:
                    second = _numeral(second)
            else:
                return None
            append(f"{number}{name}{opening}{value}{middle}{second})")
        elif not args:
            append(f"{number}{name}")
        else:
            parts = []
            for each in sorted(args) if len(args) > 1 else args:
                value = args[each]
                if each not in known:
                    if type(each) is not str:
                        return None
                    fresh.append(each)
                kind = type(value)
                if kind is str:
                    if value not in known:
                        fresh.append(value)
                elif kind is int:
                    value = _numeral(value)
                else:
                    return None
                parts.append(f"{each}={value}")
            append(f"{number}{name}({', '.join(parts)})")
    return texts if not fresh or _screened(fresh) else None


def _shortened_calls(
    texts: list[str], numbers: list[str], names: list[str], arguments: list[dict[str, Any]]
) -> None:
    """``_plain_calls``' texts with each call's arguments past ``ARGS_LIMIT`` shortened (``_shortened``), in
    place."""
    limit = ARGS_LIMIT
    for i, (number, name, text) in enumerate(zip(numbers, names, texts, strict=True)):
        start = len(number) + len(name) + 1  # of the arguments
        if arguments[i] and len(text) - start - 1 > limit:
            texts[i] = f"{text[:start]}{text[start : start + limit - 1]}…)"


def _screened(fresh: list[str]) -> bool:
    """Whether none of ``fresh``, keys and string values, needs redaction or a JSON escape, and all are
    printable: then a call's text is printable when its name is (``Calls``). Those that do not are kept in
    ``_KNOWN``."""
    joined = " ".join(fresh)  # a space: the encoder does not escape it, and no screened word holds one
    if _JSON_ESCAPED.search(joined) or not joined.isprintable() or may_need_redaction(joined):
        return False
    known = _KNOWN
    if len(known) > _KNOWN_MAX:
        known.clear()
    known.update(text for text in fresh if len(text) <= _KNOWN_LENGTH)
    return True


def _pair(first: Any, then: Any) -> tuple[str, str, str, str] | None:
    """A two-argument call's keys ``first`` and ``then`` (as they came) in the encoder's order, and what its
    text holds around their values; kept in ``_PAIRS`` when short. None when a key is not a string or needs
    redaction or an escape (``_screened``)."""
    if type(first) is not str or type(then) is not str:
        return None
    key, other = (first, then) if first < then else (then, first)
    fresh = [text for text in (key, other) if text not in _KNOWN]
    if fresh and not _screened(fresh):
        return None
    pair = (key, other, f"({key}=", f", {other}=")
    if len(first) <= _KNOWN_LENGTH and len(then) <= _KNOWN_LENGTH:
        if len(_PAIRS) >= _PAIRS_MAX:
            _PAIRS.clear()
        _PAIRS[first, then] = pair
    return pair


# Argument keys and string values found printable and to need neither redaction nor a JSON escape: the
# same keys, ids and words recur from call to call and trace to trace, and a set lookup is far cheaper than
# screening them again. Only short ones, and a bounded number (cleared when full): memory does not grow with
# the traces.
_KNOWN: set[str] = set()
_NO_KEY = object()  # no call's key
_KNOWN_MAX = 1 << 16
_KNOWN_LENGTH = 64
# A two-argument call's keys as they came -> ``_pair``: calls of a trace alternate between a few pairs of
# keys, and a lookup costs a fifth of sorting and screening the pair again. Short keys only, bounded.
_PAIRS: dict[tuple[str, str], tuple[str, str, str, str]] = {}
_PAIRS_MAX = 4096


def _printable(names: list[str]) -> bool:
    """Whether every one of ``names`` is printable; those that are kept in ``_PRINTABLE``."""
    if not "".join(names).isprintable():
        return False
    if len(_PRINTABLE) >= _KNOWN_MAX:
        _PRINTABLE.clear()
    _PRINTABLE.update(name for name in names if len(name) <= _KNOWN_LENGTH)
    return True


# Tool names found printable: a run calls the same few tools again and again, and the engine has hashed
# each trace's names (its index by name), so a set lookup a name costs less than reading every character
# again. Short ones, a bounded number (cleared when full).
_PRINTABLE: set[str] = set()


def _numeral(value: int) -> str:
    """``value``'s decimal text, as the encoder writes an int, kept in ``_NUMERALS`` when short."""
    text = str(value)
    if len(text) <= _NUMERAL_LENGTH:
        if len(_NUMERALS) >= _KNOWN_MAX:
            _NUMERALS.clear()
        _NUMERALS[value] = text
    return text


# Integer arguments' texts by value: counters, quantities and ids recur, and a dict lookup costs a third of
# formatting the int again. Only ints are looked up here (a bool, equal to 1 or 0, never is: its JSON is
# true or false); short texts only, a bounded number (cleared when full).
_NUMERALS: dict[int, str] = {}
_NUMERAL_LENGTH = 20


def _numbers(n: int) -> list[str]:
    """The start of each line of an ``n``-call list: a newline, ``INDENT`` and the call's number,
    right-aligned."""
    made = _NUMBERS.get(n)
    if made is None:
        width = len(str(n))
        made = _NUMBERS[n] = [f"\n{INDENT}{i:>{width}}. " for i in range(1, n + 1)]
    return made


_NUMBERS: dict[int, list[str]] = {}  # per number of calls, up to SCREEN_WHOLE


@dataclass(frozen=True, slots=True)
class Palette:
    """The words the text views mark a verdict with, plain or wrapped in a terminal's colour codes
    (``outputs.check.TextOutput`` builds the coloured one; everything else is plain)."""

    fail: str = "❌ FAIL"
    warn: str = "⚠️  WARN"
    failed: str = "FAIL  "
    passed: str = "PASS  "
    review: str = "REVIEW"
    mark: str = MARK
    # The words as the text output writes them, in UTF-8: a block's head before its trace id, the mark
    # after a call's line.
    fail_head: bytes = field(init=False, repr=False, compare=False)
    warn_head: bytes = field(init=False, repr=False, compare=False)
    mark_after: bytes = field(init=False, repr=False, compare=False)
    labels: dict[str, str] = field(init=False, repr=False, compare=False)  # by verdict

    def __post_init__(self) -> None:
        object.__setattr__(self, "fail_head", f"{self.fail}: ".encode())
        object.__setattr__(self, "warn_head", f"{self.warn}: ".encode())
        object.__setattr__(self, "mark_after", f"  {self.mark}".encode())
        object.__setattr__(self, "labels", {"pass": self.passed, "fail": self.failed, "review": self.review})


PLAIN = Palette()
_FAILED = " [failed]"  # a failed call's note


class Calls:
    """A trace's calls as the text views show them, each call's text made once (a trace with several
    violations lists the same calls in each block)."""

    __slots__ = (
        "names",
        "args",
        "n",
        "width",
        "notes",
        "_texts",
        "_lines",
        "_clean",
        "windows",
        "_body",
        "_pieces",
        "_encoded",
    )

    def __init__(self, trace: Trace | PlainTrace) -> None:
        # What follows a call's text: failed, ran in parallel (a step shared with a neighbour).
        notes: dict[int, str]
        if isinstance(trace, PlainTrace):  # its calls are each their own step
            self.names, self.args = trace.names, trace.args
            n = len(self.names)
            ok = trace.ok
            notes = {} if all(ok) else {i: _FAILED for i, good in enumerate(ok) if not good}
        else:
            self.names = [c.tool_name for c in trace.calls]
            self.args = [c.arguments for c in trace.calls]
            n = len(self.names)
            notes = {i: _FAILED for i, c in enumerate(trace.calls) if c.status == "error"}
            steps = trace.steps
            for i in range(n):
                if (i > 0 and steps[i] == steps[i - 1]) or (i + 1 < n and steps[i + 1] == steps[i]):
                    notes[i] = notes.get(i, "") + f" [step {steps[i] + 1}, parallel]"
        self.notes = notes
        self.n = n
        self.width = len(str(n))  # of the call numbers
        # Each call's number, name and arguments as the block's list shows them, when made at once.
        self._texts: list[str] | None = None
        self._lines: dict[str, list[str | None]] = {}  # indent -> each call's line, made when first shown
        # trace_lines per (marks, indent, mark), as text, and a violation's per (offending call, mark):
        # violations of several rules often point at the same call.
        self.windows: dict[tuple[Any, ...], str] = {}
        self._clean: list[str] | None = None
        # The block indent's whole call list as one text, each line after a newline, and where each line's
        # newline is (the last: the text's length), when made at once: a one-mark window is then two
        # slices of it around the mark, not a join of lines.
        self._body: tuple[str, list[int]] | None = None
        self._pieces: list[str] = []  # the body's lines, each after its newline
        # The body in UTF-8 and its lines' ends there (``encoded``).
        self._encoded: tuple[bytes, list[int]] | None = None
        if 0 < n <= SCREEN_WHOLE:  # (no calls: ``_window`` says so)
            # One redaction screen over every call's arguments: most traces need no walk at all.
            numbers = _NUMBERS.get(n) or _numbers(n)
            texts = _plain_calls(self.names, self.args, numbers)
            if texts is not None:
                pieces = texts
                if notes:
                    pieces = texts.copy()
                    for i, note in notes.items():
                        pieces[i] += note
                lengths = list(map(len, pieces))
                cut = len(numbers[0])
                # Arguments too long to show whole (a line longer than the longest whole one can be: found
                # from the lines' lengths, needed for their ends anyway), or a name that is not printable
                # (the arguments are: ``_plain_calls``): the texts finished, and their lines made again.
                if max(lengths) > cut + ARGS_LIMIT + 2 or not (
                    _PRINTABLE.issuperset(self.names) or _printable(self.names)
                ):
                    _shortened_calls(texts, numbers, self.names, self.args)
                    texts = [text[:cut] + terminal(text[cut:]) for text in texts]  # no escape codes
                    pieces = texts.copy()
                    for i, note in notes.items():
                        pieces[i] += note
                    lengths = list(map(len, pieces))
                self._texts = texts  # without the notes (``_text``)
                body = "".join(pieces)
                ends = list(accumulate(lengths, initial=0))
                self._body = (body, ends)
                self._pieces = pieces
                if body.isascii():  # a byte a character: the same ends. Both text and junit cut from it.
                    self._encoded = (body.encode(), ends)
                return
            dumps = [_dump(a) for a in self.args]
            if not may_need_redaction("\n".join(dumps)):
                self._clean = dumps

    def line(self, i: int, indent: str) -> str:
        """Call ``i``'s line in the list, numbered from 1, without a mark."""
        return self.lines(i, i + 1, indent)[0]

    def lines(self, start: int, end: int, indent: str) -> list[str]:
        """Calls ``start`` to ``end - 1`` as ``line`` shows them, each line made when first asked for."""
        made = self._lines.get(indent)
        if made is None:
            if indent == INDENT and self._body is not None:
                # No line holds a newline (``terminal``): the body's lines are the calls'.
                made = self._lines[indent] = list(self._body[0][1:].split("\n"))
            else:
                made = self._lines[indent] = [None] * self.n
        run = made[start:end]
        if None in run:
            for i in range(start, end):
                if made[i] is None:
                    made[i] = f"{indent}{i + 1:>{self.width}}. {self._text(i)}{self.notes.get(i, '')}"
            run = made[start:end]
        return run  # type: ignore[return-value]

    def window(self, call: int | None, mark: str) -> str:
        """The call list of a violation whose offending call is ``call`` (None: no call), in the block indent,
        ``mark`` after the call: ``_window``'s lines for the one mark (or none), as one text."""
        body = self._body
        n = self.n
        if body is None or (call is not None and not 0 <= call < n):
            return "\n".join(_window(self, () if call is None else (call,), INDENT, mark))
        text, ends = body
        return cut_window(text, ends, call, n, "  " + mark, _gap(INDENT, self.width) + "\n", "\n" + _tail(n))

    def window_bytes(self, call: int | None, palette: Palette) -> bytes:
        """``window`` in UTF-8: cut from the call list encoded once, not a text encoded per window."""
        encoded = self.encoded()
        if encoded is not None and (call is None or 0 <= call < self.n):
            gap, tail = window_ends(self.n)
            return cut_window(encoded[0], encoded[1], call, self.n, palette.mark_after, gap, tail)
        return self.window(call, palette.mark).encode()

    def encoded(self) -> tuple[bytes, list[int]] | None:
        """The block indent's whole call list in UTF-8, each line after a newline, and where each line's
        newline is (the last: the length), as ``cut_window`` takes them; made once. None when the lines are
        made one by one (no calls, or more than ``SCREEN_WHOLE``)."""
        encoded = self._encoded
        if encoded is None:
            if self._body is None:
                return None
            text, ends = self._body
            if not text.isascii():  # else a byte a character: the same ends
                lines = [piece.encode() for piece in self._pieces]
                ends = list(accumulate(map(len, lines), initial=0))
            encoded = self._encoded = (text.encode(), ends)
        return encoded

    def _text(self, i: int) -> str:
        if self._texts is not None:
            return self._texts[i][len(INDENT) + self.width + 3 :]  # after the newline and number
        args = _args_text(self.args[i], dumped=self._clean[i] if self._clean is not None else None)
        return terminal(f"{self.names[i]}{args}")  # no escape codes


def trace_lines(
    trace: Trace | PlainTrace | Calls,
    marks: Iterable[int],
    *,
    indent: str = INDENT,
    palette: Palette = PLAIN,
) -> list[str]:
    """The numbered call list with ``← violation`` at marked calls; a window around them when long.

    Calls are numbered from 1 here (prose: "call N"); machine output counts from 0 (README, "Reports")."""
    return _trace_text(trace, tuple(sorted(set(marks))), indent, palette).split("\n")


def _trace_text(
    trace: Trace | PlainTrace | Calls,
    marked: tuple[int, ...],
    indent: str = INDENT,
    palette: Palette = PLAIN,
) -> str:
    """``trace_lines`` as one text (no line of it holds a newline: ``terminal`` shows one as ``\\n``);
    ``marked``: the marks, sorted, each once."""
    calls = trace if isinstance(trace, Calls) else Calls(trace)
    key = (marked, indent, palette.mark)
    known = calls.windows.get(key)
    if known is None:
        known = calls.windows[key] = "\n".join(_window(calls, marked, indent, palette.mark))
    return known


def _window(calls: Calls, marked: tuple[int, ...], indent: str, mark: str) -> list[str]:
    """The lines of ``trace_lines``; ``marked``: the marks, sorted, each once; ``mark``: the palette's."""
    n = calls.n
    if n == 0:
        return [indent + "(no calls)"]
    if len(marked) == 1 and n > SHORT_TRACE and 0 <= marked[0] < n:
        # A violation's one offending call: the runs below, written out for one.
        m = marked[0]
        start = m - WINDOW if m > WINDOW else 0
        end = m + WINDOW + 1
        run = calls.lines(start, end if end < n else n, indent)
        run[m - start] += "  " + mark
        if start:
            run.insert(0, _gap(indent, calls.width))
        if end < n:
            run.append(f"{_gap(indent, calls.width)}  ({n} calls in all)")
        return run
    # The calls shown, as runs [start, end): the whole of a short trace (its first calls when nothing is
    # marked), else WINDOW calls either side of each mark, runs that meet or overlap joined.
    if n <= SHORT_TRACE or not marked:
        runs = [(0, n if marked else min(n, SHORT_TRACE))]
    else:
        runs = []
        for m in marked:
            start = m - WINDOW if m > WINDOW else 0
            end = m + WINDOW + 1
            if end > n:
                end = n
            if start >= end:
                continue  # a mark past the last call shows none
            if runs and start <= runs[-1][1]:
                runs[-1] = (runs[-1][0], max(runs[-1][1], end))
            else:
                runs.append((start, end))
    gap = _gap(indent, calls.width)
    mark = "  " + mark
    lines: list[str] = []
    shown_to = 0
    for start, end in runs:
        if start != shown_to:
            lines.append(gap)
        run = calls.lines(start, end, indent)
        for m in marked:
            if start <= m < end:
                run[m - start] += mark
        lines += run
        shown_to = end
    if shown_to != n:
        lines.append(f"{gap}  ({n} calls in all)")
    return lines


def cut_window(
    text: AnyStr, ends: list[int], call: int | None, n: int, mark: AnyStr, gap: AnyStr, tail: AnyStr
) -> AnyStr:
    """``_window``'s lines for the one mark ``call`` (``0 <= call < n``; None: no mark) as one text, cut from
    ``text``, the whole list of ``n > 0`` calls with each line after a newline (``ends``: where each line's
    newline is, then the end), text or UTF-8: the calls shown, ``mark`` after the marked one, the ``gap``
    line and a newline before them when calls before them are left out, a newline and the ``tail`` line
    when calls after them are."""
    if call is None:  # the first calls
        return text[1:] if n <= SHORT_TRACE else text[1 : ends[SHORT_TRACE]] + tail
    cut = ends[call + 1]
    if n <= SHORT_TRACE:
        return text[1:cut] + mark + text[cut:]
    # WINDOW calls either side of the mark, in one join: fewer new objects than concatenating the pieces.
    start = call - WINDOW if call > WINDOW else 0
    end = call + WINDOW + 1
    empty = text[:0]
    return empty.join(
        (
            gap if start else empty,
            text[ends[start] + 1 : cut],
            mark,
            text[cut:] if end >= n else text[cut : ends[end]],
            empty if end >= n else tail,
        )
    )


def _gap(indent: str, width: int) -> str:
    """The line that stands for calls left out of a list whose numbers are ``width`` wide."""
    gap = _GAPS.get((indent, width))
    if gap is None:
        gap = _GAPS[indent, width] = f"{indent}{'…':>{width}}"
    return gap


_GAPS: dict[tuple[str, int], str] = {}


def _tail(n: int) -> str:
    """The gap line that ends a window of the block indent's ``n``-call list short of its last call."""
    tail = _TAILS.get(n)
    if tail is None:
        tail = _TAILS[n] = f"{_gap(INDENT, len(str(n)))}  ({n} calls in all)"
    return tail


_TAILS: dict[int, str] = {}  # per number of calls


def window_ends(n: int) -> tuple[bytes, bytes]:
    """``cut_window``'s ``gap`` and ``tail`` for the block indent's ``n``-call list, in UTF-8 (what junit's
    escaping leaves as they are: no markup in them); kept."""
    made = _ENDS.get(n)
    if made is None:
        made = _ENDS[n] = (f"{_gap(INDENT, len(str(n)))}\n".encode(), f"\n{_tail(n)}".encode())
    return made


_ENDS: dict[int, tuple[bytes, bytes]] = {}  # per number of calls, up to SCREEN_WHOLE


def violation_text(
    trace: Trace | PlainTrace | Calls,
    trace_id: str,
    v: Mapping[str, Any],
    rule: Mapping[str, Any] | None,
    palette: Palette = PLAIN,
) -> str:
    """The actionable FAIL block of violation ``v`` (a report's violation as data), ``rule`` its rule's
    result (type and group), from the report data as the engine gives it."""
    calls = trace if isinstance(trace, Calls) else Calls(trace)
    rules = [{**rule, "rule_id": v["rule_id"]}] if rule is not None else []  # ``rule`` is the violation's
    parts: list[bytes] = []
    _blocks(parts, calls, f"{terminal(str(trace_id))} · ".encode(), [v], rules, palette)
    return b"".join(parts)[:-2].decode()  # without the separator after the block


_BETWEEN = b"\n\n"  # after each block


def _blocks(
    parts: list[bytes],
    calls: Calls,
    id_head: bytes,
    violations: Iterable[Mapping[str, Any]],
    rules: Sequence[Mapping[str, Any]],
    palette: Palette,
) -> None:
    """``violation_text``'s block of each of ``violations`` (``rules``: the rules' results, a report's), each
    followed by a blank line, added to ``parts`` in UTF-8; ``id_head``: what follows the severity's word,
    the trace id as shown (``terminal``) and a dot, in UTF-8.

    Made in UTF-8: the words are mostly ASCII, which encodes by a copy, while a text holding the marks and
    the window's gap (not Latin-1) would be encoded character by character. The words around the window
    are made for each violation: keeping them by their key cost more (hashing the engine's new texts) than
    making them again.

    Its pieces are the ones junit uses too (``violation_words``, ``cut_window``), with the call list, its
    ends and the gap and tail lines taken once a trace, and a rule's result found where ``_rule`` last
    found it."""
    windows: dict[int | None, bytes] = {}  # by offending call: several rules' violations often share one
    fail, warn = palette.fail_head + id_head, palette.warn_head + id_head
    n = calls.n
    encoded = calls.encoded()
    if encoded is not None:
        text, ends = encoded
        gap, tail = window_ends(n)
        mark = palette.mark_after
    at_of = _RULE_AT.get
    count = len(rules)
    for v in violations:
        call = v["offending_call_index"]
        window = windows.get(call)
        if window is None:
            if encoded is not None and call is not None and 0 <= call < n:
                window = windows[call] = cut_window(text, ends, call, n, mark, gap, tail)
            else:  # no calls, past SCREEN_WHOLE, odd arguments, or a call the trace does not have
                window = windows[call] = calls.window_bytes(call, palette)
        rule_id = v["rule_id"]
        rule: Mapping[str, Any] | None
        at = at_of(rule_id)  # (``rule_result``, written out: a call a violation costs more than these lines)
        if at is None or at >= count or (rule := rules[at])["rule_id"] != rule_id:
            rule = _rule(rules, rule_id)
        before, after = violation_words(v, rule)
        parts += (
            fail if v["severity"] == "critical" else warn,
            before.encode(),
            window,
            after.encode(),
            _BETWEEN,
        )


def rule_result(rules: Sequence[Mapping[str, Any]], rule_id: str) -> Mapping[str, Any] | None:
    """The result of rule ``rule_id`` among ``rules`` (a report's), looked for first where it was last found
    (``_rule``); None when the report has none."""
    at = _RULE_AT.get(rule_id)
    if at is not None and at < len(rules) and (rule := rules[at])["rule_id"] == rule_id:
        return rule
    return _rule(rules, rule_id)


def _rule(rules: Sequence[Mapping[str, Any]], rule_id: str) -> Mapping[str, Any] | None:
    """The result of rule ``rule_id`` among ``rules`` (a report lists each rule once; the last, should one
    come twice), its place kept in ``_RULE_AT``: the engine lists the rules in the rule set's order, so a
    rule's result is found where it was in the trace before, checked by its id, and no per-trace table of
    the results is made."""
    for at in range(len(rules) - 1, -1, -1):
        if rules[at]["rule_id"] == rule_id:
            if len(_RULE_AT) >= _RULE_AT_MAX:
                _RULE_AT.clear()
            _RULE_AT[rule_id] = at
            return rules[at]
    return None


_RULE_AT: dict[str, int] = {}  # rule id -> where its result was last found in a report's rules
_RULE_AT_MAX = 4096


def violation_words(v: Mapping[str, Any], rule: Mapping[str, Any] | None) -> tuple[str, str]:
    """What violation ``v``'s block (``violation_text``) says between the trace id and the window, and after
    the window; ``rule``: its rule's result (type and group). The same few again and again over a run: a
    writer that keeps them (junit) puts blocks together from them."""
    group = rule.get("group") if rule else None
    suggestion = v.get("suggestion")
    rule_id, expected, actual, why = v["rule_id"], v["expected_order"], v["actual_order"], v["explanation"]
    # The engine's words name the trace's tools (and the rules'): each one line, without escape codes. Checked
    # at once, and escaped only when one needs it: a check a word cost more than making the words.
    if not printable_ascii(f"{rule_id}{expected}{actual}{why}{suggestion or ''}"):
        rule_id, expected, actual, why = (terminal(word) for word in (rule_id, expected, actual, why))
        suggestion = suggestion and terminal(suggestion)
    return (
        f"{rule_id}{f' [{terminal(str(group))}]' if group else ''}\n\n"
        f"   Rule: {rule['type'] if rule else '?'} ({v['violation_type']})\n"
        f"   Expected: {expected}\n   Actual: {actual}\n\n   Trace:\n",
        f"\n\n   Why: {why}\n   Suggestion: {suggestion}" if suggestion else f"\n\n   Why: {why}",
    )


def window_text(calls: Calls, call: int | None, palette: Palette = PLAIN) -> str:
    """The call list of a violation whose offending call is ``call`` (None: no call), made once a trace."""
    window = calls.windows.get((call, palette.mark))
    if window is None:
        window = calls.windows[call, palette.mark] = calls.window(call, palette.mark)
    return window


def violation_block(trace: Trace | PlainTrace | Calls, report: Report, v: Violation) -> str:
    rule = next((r for r in report.rules if r.rule_id == v.rule_id), None)
    return violation_text(
        trace,
        report.trace_id,
        v.model_dump(),
        {"type": rule.type, "group": rule.group} if rule else None,
    )


def report_bytes(trace: Trace | PlainTrace, data: Mapping[str, Any], palette: Palette = PLAIN) -> bytes:
    """A trace's text in UTF-8: the FAIL block of each violation, then its one line (``Engine.check_data``'s
    data)."""
    violations = data["violations"]
    shown_id = terminal(str(data["trace_id"]))
    line = _verdict_text(
        palette.labels[data["verdict"]],
        shown_id,
        data["sequence_correctness_score"],
        data["rules_passed"],
        data["total_rules_checked"],
        len(violations),
    )
    if not violations:
        return line.encode()
    parts: list[bytes] = []
    _blocks(parts, Calls(trace), f"{shown_id} · ".encode(), violations, data["rules"], palette)
    parts.append(line.encode())
    return b"".join(parts)


def verdict_line(
    verdict: str,
    trace_id: str,
    score: float,
    passed: int,
    checked: int,
    violations: int,
    palette: Palette = PLAIN,
) -> str:
    return _verdict_text(
        palette.labels[verdict], terminal(str(trace_id)), score, passed, checked, violations
    )[:-1]


def _verdict_text(label: str, shown_id: str, score: float, passed: int, checked: int, violations: int) -> str:
    """``verdict_line`` and its newline; ``shown_id``: the trace id as shown (``terminal``)."""
    return (
        f"{label} {shown_id}  score {score:.2f}  "
        f"({passed}/{checked} rules passed, {violations} violation(s))\n"
    )


def trace_line(report: Report) -> str:
    return verdict_line(
        report.verdict,
        report.trace_id,
        report.sequence_correctness_score,
        report.rules_passed,
        report.total_rules_checked,
        len(report.violations),
    )


FIRST_IDS = 3  # trace ids kept per failed rule, for the closing tally


class Totals:
    """Running counts over a stream of reports, for the closing lines and the demo.

    Everything here is a count or a short list per rule: a run's summary, never its reports, so memory does
    not grow with the number of traces. A new figure is one more attribute filled in ``count``."""

    def __init__(self) -> None:
        self.verdicts: Counter[str] = Counter()
        self.violated: Counter[str] = Counter()
        self.deferred: Counter[str] = Counter()
        self.first: dict[str, list[str]] = {}  # rule id -> the first FIRST_IDS traces it failed on
        self.n = 0
        self.coverage: Coverage | None = None  # what the traces left unchecked, when the command tracks it

    def add(self, report: Report) -> None:
        self.count(
            report.verdict,
            [v.rule_id for v in report.violations],
            [r.rule_id for r in report.rules if r.outcome == "deferred"],
            report.trace_id,
        )

    def count(
        self, verdict: str, violated: list[str], deferred: list[str], trace_id: str | None = None
    ) -> None:
        """``add`` from a report's verdict, its violations' rule ids and its deferred rules' ids (what
        ``seqjudge check`` has when it skips the report models)."""
        self.n += 1
        self.verdicts[verdict] += 1
        if violated:
            # dict.fromkeys, not a set: first-seen order, so that equal counts list the same way every run.
            # Counted here, not by Counter.update (whose Mapping check alone is two Python calls a trace).
            counts = self.violated
            first = self.first
            for rule_id in dict.fromkeys(violated):
                if rule_id in counts:
                    counts[rule_id] += 1
                else:
                    counts[rule_id] = 1
                if trace_id is not None:
                    ids = first.get(rule_id)
                    if ids is None:
                        first[rule_id] = [trace_id]
                    elif len(ids) < FIRST_IDS:
                        ids.append(trace_id)
        if deferred:
            self.deferred.update(deferred)

    def fresh(self) -> Totals:
        """Empty totals that track what these do (the same coverage question): filled with a run's later
        traces elsewhere (a worker process), then ``merge``d here in input order."""
        part = Totals()
        part.coverage = self.coverage.fresh() if self.coverage is not None else None
        return part

    def merge(self, part: Totals) -> None:
        """Count ``part``'s traces (a ``fresh`` copy filled with the traces that follow these) as if each had
        been counted here: the first-seen order of the rules and their first trace ids come out the same."""
        self.n += part.n
        self.verdicts.update(part.verdicts)
        self.violated.update(part.violated)
        self.deferred.update(part.deferred)
        for rule_id, ids in part.first.items():
            mine = self.first.setdefault(rule_id, [])
            mine.extend(ids[: FIRST_IDS - len(mine)])
        if self.coverage is not None and part.coverage is not None:
            self.coverage.merge(part.coverage)

    def line(self) -> str:
        return (
            f"{self.n} trace(s): {self.verdicts['pass']} pass, {self.verdicts['fail']} fail, "
            f"{self.verdicts['review']} review"
        )

    def tally(self) -> list[str]:
        """The closing per-rule tally: each rule that failed, on how many traces, and the first of them."""
        if not self.violated:
            return []
        ranked = self.violated.most_common()
        width = max(len(rule_id) for rule_id, _ in ranked)
        lines = ["failed rules (traces failed, first traces):"]
        for rule_id, n in ranked:
            ids = [terminal(t) for t in self.first.get(rule_id, [])]
            more = ", …" if n > len(ids) else ""
            lines.append(f"  {rule_id:<{width}}  {n:>6}  {', '.join(ids)}{more}")
        return lines

    def as_dict(self) -> dict[str, Any]:
        return {
            "traces": self.n,
            "pass": self.verdicts["pass"],
            "fail": self.verdicts["fail"],
            "review": self.verdicts["review"],
            "violations_by_rule": dict(self.violated.most_common()),
            "deferred_rules": dict(self.deferred.most_common()),
            **({"coverage": self.coverage.as_dict()} if self.coverage is not None else {}),
        }
