"""Regular expressions from users, compiled and searched so that no search takes more than a bounded time:
``args_match`` patterns of rules, and patterns given for whole texts (``--error-pattern`` over call
outputs, ``redact: ["value:..."]`` over stored traces: ``UserPattern``). Outside the data flow (not in
``rules``), so that reading traces may use it as the rules do.

Python's ``re`` backtracks: ``(a+)+$`` against 28 a's and a ``!`` takes seconds, against 5,000 it never
ends, and even ``.*x.*y`` is quadratic on a failing search. A linear-time engine (RE2) has no look-ahead,
which rules use (``^(?!(no longer needed|ordered by mistake)$)``), and its Python binding costs about 15 µs
a search. The ``regex`` package reads ``re``'s syntax and stops a search after ``SEARCH_TIMEOUT`` seconds,
but a timed search costs 10-20 µs against ``re``'s 1. So each pattern gets both: ``re`` for texts short
enough that its worst case is cheap (a backtracking search of a pattern with q quantifiers costs at most
about n**(q+1) steps on n characters; with a nested quantifier, 2**n), and ``regex`` with the time limit
for longer ones. A pattern without quantifiers always takes ``re``. A timed search that runs out is an
``InputError`` naming the rule and the pattern, never a hang; ``seqjudge lint`` warns about nested
quantifiers before any trace is read.
"""

from __future__ import annotations

import math
import re
from typing import Any

from seqjudge.errors import InputError

SEARCH_TIMEOUT = 0.1  # seconds a single search may take (the engine checks its clock as it goes)
# A user's pattern run over whole texts (``--error-pattern`` over a call's output, a ``redact`` entry over a
# stored trace) may take this much longer a character: a linear search of a 40 MB text is not stopped, a
# backtracking one of a 41-character text is.
PER_CHAR_TIMEOUT = 1e-5


class PatternError(Exception):
    """A pattern that is not a regular expression (``regex``'s or ``re``'s message)."""


FAST_STEPS = 200_000  # the backtracking steps a plain ``re`` search may cost in the worst case (a few ms)


class Pattern:
    """``search(text)`` like ``re.Pattern.search``, bounded in time (``TimeoutError`` past the limit)."""

    __slots__ = ("fast", "pattern", "per_char", "short", "timed")

    def __init__(self, pattern: str, *, per_char: float = 0.0) -> None:
        # Imported here: only rules with args_match need it, and it costs a fresh `seqjudge check` ~15 ms.
        import regex

        self.pattern = pattern
        try:
            self.timed = regex.compile(pattern)  # its error first: the engine that bounds matching
        except regex.error as exc:
            raise PatternError(str(exc)) from None
        self.fast = re.compile(pattern)
        self.short = fast_length(pattern)
        self.per_char = per_char

    def search(self, text: str) -> Any:
        if len(text) <= self.short:
            return self.fast.search(text)
        return self.timed.search(text, timeout=SEARCH_TIMEOUT + len(text) * self.per_char)

    def sub(self, repl: Any, text: str) -> str:
        """``re.Pattern.sub``, bounded in time as ``search`` is."""
        if len(text) <= self.short:
            return self.fast.sub(repl, text)
        return self.timed.sub(repl, text, timeout=SEARCH_TIMEOUT + len(text) * self.per_char)  # type: ignore[no-any-return]


class UserPattern(Pattern):
    """A pattern a user gives for whole texts (``--error-pattern``, a ``redact: ["value:..."]`` entry):
    bounded by ``PER_CHAR_TIMEOUT`` a character too, and a search that runs out is an ``InputError`` (exit
    2) naming the pattern, the option or setting that gave it (``given``) and the input (``source``): never
    a hang, and never a silent "no match" (a missed error call, an unredacted secret)."""

    __slots__ = ("given", "shown", "source")

    def __init__(
        self, pattern: str, *, given: str, source: str | None = None, shown: str | None = None
    ) -> None:
        super().__init__(pattern, per_char=PER_CHAR_TIMEOUT)
        self.given = given
        self.source = source
        self.shown = shown or repr(pattern)  # what the message names: the user's part of a joined pattern

    def search(self, text: str) -> Any:
        try:
            return super().search(text)
        except TimeoutError:
            raise self._timed_out(text) from None

    def sub(self, repl: Any, text: str) -> str:
        try:
            return super().sub(repl, text)
        except TimeoutError:
            raise self._timed_out(text) from None

    def _timed_out(self, text: str) -> InputError:
        limit = SEARCH_TIMEOUT + len(text) * self.per_char
        return InputError(
            f"matching the pattern {self.shown} against a {len(text):,}-character text took longer than "
            f"{limit:.2g} s, so the search was stopped",
            source=self.source,
            where=self.given,
            hint="Rewrite the pattern without nested or overlapping quantifiers (`(a|aa)+` matches what `a+` "
            "matches; `(\\w+\\s?)*` what `[\\w\\s]*` does)",
        )


def fast_length(pattern: str) -> float:
    """The longest text on which ``re``'s worst case stays under ``FAST_STEPS``."""
    if nested_quantifier(pattern):
        return math.log2(FAST_STEPS)
    quantifiers = count_quantifiers(pattern)
    if quantifiers == 0:
        return math.inf
    return FAST_STEPS ** (1 / (quantifiers + 1))


def compile_pattern(pattern: str) -> Pattern:
    """The compiled pattern (raises ``PatternError`` when it is not a regular expression)."""
    try:
        return Pattern(pattern)
    except re.error as exc:  # regex accepted what re does not (rare): one engine's verdict, regex's error
        raise PatternError(str(exc)) from None


def compile_user_pattern(
    pattern: str, *, given: str, source: str | None = None, shown: str | None = None
) -> UserPattern:
    """A ``UserPattern`` (raises ``PatternError`` when it is not a regular expression)."""
    try:
        return UserPattern(pattern, given=given, source=source, shown=shown)
    except re.error as exc:
        raise PatternError(str(exc)) from None


def timed_out(pattern: str, key: str, text: str, owner: str | None) -> InputError:
    return InputError(
        f"matching args_match.{key} = {pattern!r} against a {len(text):,}-character argument took longer "
        f"than {SEARCH_TIMEOUT} s, so the search was stopped",
        where=f"rule {owner}" if owner else None,
        hint="Rewrite the pattern without nested or overlapping quantifiers (`(a+)+` matches what `a+` "
        "matches; `.*x.*` searches as `x`); `seqjudge lint` points such patterns out",
    )


# A quantified group whose body is itself quantified: ``(a+)+``, ``(\w*)*``, ``(?:ab+){2,}``. Found by a
# scan of the pattern text (escapes and character classes skipped), not by parsing, so it may miss an
# exotic spelling; the time limit above is what bounds matching, this only warns early.
def nested_quantifier(pattern: str) -> bool:
    stack: list[bool] = []  # per open group: does its body hold a quantifier?
    i, n = 0, len(pattern)
    last_closed_had_quantifier = False
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            i += 2
            last_closed_had_quantifier = False
            continue
        if ch == "[":
            i = _class_end(pattern, i)
            last_closed_had_quantifier = False
            continue
        if ch == "(":
            stack.append(False)
            if pattern.startswith("(?", i):
                i += 2  # a group's flags or kind: (?:  (?=  (?!  (?P<name>  ...
                continue
        elif ch == "|":
            if stack:
                stack[-1] = True  # a repeated alternation ((a|a)*) backtracks like a nested repeat
        elif ch == ")":
            inner = stack.pop() if stack else False
            last_closed_had_quantifier = inner
            if stack and inner:
                stack[-1] = True
            i += 1
            continue
        elif ch in "*+?{":
            if ch == "{" and not _is_repeat(pattern, i):
                i += 1
                continue
            if ch == "?" and i > 0 and pattern[i - 1] in "*+?}":
                i += 1  # a lazy or possessive marker, not a quantifier of its own
                continue
            if last_closed_had_quantifier and pattern[i - 1] == ")" and ch != "?":
                return True
            if stack:
                stack[-1] = True
        last_closed_had_quantifier = False
        i += 1
    return False


def count_quantifiers(pattern: str) -> int:
    """Quantifiers in ``pattern`` (``*``, ``+``, ``?``, ``{m,n}``; escapes, classes, lazy marks and group
    kinds skipped). An alternation counts as one: it too can make a search try again."""
    count, i, n = 0, 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "[":
            i = _class_end(pattern, i)
            continue
        if ch == "(" and pattern.startswith("(?", i):
            i += 2
            continue
        repeat = ch in "*+|" or (ch == "{" and _is_repeat(pattern, i))
        if repeat or (ch == "?" and i > 0 and pattern[i - 1] not in "*+?}("):
            count += 1
        i += 1
    return count


def _class_end(pattern: str, at: int) -> int:
    j, n = at + 1, len(pattern)
    if j < n and pattern[j] == "^":
        j += 1
    if j < n and pattern[j] == "]":
        j += 1
    while j < n and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j + 1


def _is_repeat(pattern: str, at: int) -> bool:
    end = pattern.find("}", at)
    body = pattern[at + 1 : end] if end > at else ""
    return bool(body) and all(c.isdigit() or c == "," for c in body)
