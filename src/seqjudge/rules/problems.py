"""The words of input problems: naming values and places, guessing what was meant, collecting problems.

Shared by rule files and tool catalogs. Every problem becomes an ``InputError`` naming the file, the line
and the path inside it (``rules[2].first``), what was wrong and how to fix it. A file's problems are all
collected before raising, so that one run of ``seqjudge lint`` shows them all; ``InputProblems`` carries
the list.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from seqjudge.errors import InputError
from seqjudge.rules.document import LineMap, Loc

__all__ = ["InputProblems", "ProblemCollector", "describe", "fmt_loc", "suggest"]


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


class ProblemCollector:
    """The problems found in one file so far, each placed by its path and (when known) its line."""

    def __init__(self, source: str, lines: LineMap | None) -> None:
        self.source = source
        self.lines = lines or LineMap()
        self.problems: list[InputError] = []

    def where(self, loc: Loc, *, key: bool = False) -> str:
        """``line 4 (rules[0].thne)``; the path alone when the file's lines are unknown."""
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
