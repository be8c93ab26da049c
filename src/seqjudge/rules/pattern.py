"""``args_match`` patterns: compiled and searched by one engine, with a time limit on every search.

Python's ``re`` backtracks: ``(a+)+$`` against 28 a's and a ``!`` takes seconds, against 5,000 it never
ends, and even ``.*x.*y`` is quadratic on a failing search. A linear-time engine (RE2) has no look-ahead,
which rules use (``^(?!(no longer needed|ordered by mistake)$)``), and its Python binding costs about 15 µs
a search. So patterns run on the ``regex`` package, which reads ``re``'s syntax and stops a search after
``SEARCH_TIMEOUT`` seconds: a search that runs out is an ``InputError`` naming the rule and the pattern,
never a hang. ``seqjudge lint`` warns about nested quantifiers, the usual cause, before any trace is read.
"""

from __future__ import annotations

from typing import Any

import regex

from seqjudge.errors import InputError

SEARCH_TIMEOUT = 0.1  # seconds a single search may take (the engine checks its clock as it goes)
PatternError = regex.error


def compile_pattern(pattern: str) -> Any:
    """The compiled pattern (raises ``PatternError`` when it is not a regular expression)."""
    return regex.compile(pattern)


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
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            i = j + 1
            last_closed_had_quantifier = False
            continue
        if ch == "(":
            stack.append(False)
            if pattern.startswith("(?", i):
                i += 2  # a group's flags or kind: (?:  (?=  (?!  (?P<name>  ...
                continue
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


def _is_repeat(pattern: str, at: int) -> bool:
    end = pattern.find("}", at)
    body = pattern[at + 1 : end] if end > at else ""
    return bool(body) and all(c.isdigit() or c == "," for c in body)
