"""Trace text made safe for where it is shown: a terminal, a markdown table, HTML inside markdown, a
spreadsheet.

Trace ids, tool names, arguments, judge replies, reviewers' names and notes and environment values come from
outside, so they may hold anything: an ANSI escape sequence printed as is recolours, moves or clears the
reader's terminal, forges a PASS line, sets its title (OSC 0) or writes its clipboard (OSC 52); a bidi
override reorders what the reader sees; a newline or ``|`` in a markdown table cell ends the row and lets
what follows become markup (raw HTML included) in a pull-request comment; a backtick run as long as a code
fence's ends the fence; and a CSV cell starting ``=`` is a formula to a spreadsheet.

Every human-readable line a command writes goes through ``shown`` (``say`` for a command's own lines,
``terminal_stream`` for a view's text writer, ``outputs.registry.writer``); a field that must stay on its line
goes through ``terminal`` where it enters.
"""

from __future__ import annotations

import html
import json
import re
import sys
from collections.abc import Sequence
from typing import IO, Any, cast

from pydantic_core import PydanticSerializationError, to_json


def terminal(text: str) -> str:
    """``text`` on one line with every character that is not printable (C0 and C1 controls, ESC, DEL,
    newlines, tabs, bidi and other format characters) shown as its Python escape (``\\x1b``, ``\\n``)."""
    if text.isprintable():  # the fast path: ordinary text is returned as it is
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


_CONTROLS = bytes(range(0x20)) + b"\x7f"  # the characters of ASCII that are not printable


def printable_ascii(text: str) -> bool:
    """Whether ``text`` is ASCII without a control character: what ``terminal`` returns as it is, found
    faster than ``str.isprintable`` (which looks each character up) for long text; False says nothing."""
    if not text.isascii():
        return False
    data = text.encode("ascii")
    return len(data.translate(None, _CONTROLS)) == len(data)


def shown(text: str) -> str:
    """``text`` as a terminal may show it: its lines kept, every other character that is not printable
    escaped as ``terminal`` does (a carriage return too: it would let a line overwrite another)."""
    if text.isprintable():
        return text
    return "\n".join(terminal(line) for line in text.split("\n"))


def say(text: object = "", *, err: bool = False) -> None:
    """``print`` for the lines a command writes to a terminal (stdout, or stderr with ``err``): ``shown``."""
    print(shown(str(text)), file=sys.stderr if err else sys.stdout)


class TerminalText:
    """A text stream whose writes are ``shown``: what a view's text writer is given (the shared layer, so a
    new line in a view cannot forget it). Everything else is the wrapped stream's."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out

    def write(self, text: str) -> int:
        return self.out.write(shown(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.out, name)


def terminal_stream(out: IO[str]) -> IO[str]:
    """``out`` written through ``TerminalText`` (typed as the stream it stands for)."""
    return cast("IO[str]", TerminalText(out))


def md_code(text: str) -> str:
    """Inline code for a markdown table cell: one line, no backtick (it would end the span), pipes escaped.
    Inside a code span markdown shows HTML literally, so nothing else needs escaping."""
    return "`" + terminal(text).replace("`", "'").replace("|", "\\|") + "`"


def md_text(text: str) -> str:
    """Plain text for a markdown table cell or an HTML element inside markdown (``<summary>``): one line,
    HTML escaped, pipes escaped."""
    return html.escape(terminal(text), quote=False).replace("|", "\\|")


_BACKTICKS = re.compile("`+")


def md_fence(body: str) -> str:
    """The backtick fence of a fenced block holding ``body``: longer than any backtick run in it (CommonMark
    ends a block at a fence at least as long as its opening one), three at the least."""
    longest = max((len(run) for run in _BACKTICKS.findall(body)), default=0)
    return "`" * max(3, longest + 1)


# What a spreadsheet reads as the start of a formula (OWASP's CSV injection list).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """A CSV cell a spreadsheet shows as text: a string starting like a formula gets a leading ``'`` (as
    OWASP recommends); anything else is returned as it is."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")


def json_bytes(value: Any, *, shown: bool = False) -> bytes:
    """``value`` as compact JSON bytes (pydantic-core's ``to_json``), also when a string in it holds a lone
    surrogate, which is valid JSON (``"\\udcff"``) but has no UTF-8 encoding, so ``to_json`` raises.

    Such a character is then written as that JSON escape, so the output reads back as the input's value (a
    report's trace id stays the id); ``shown``: as the visible text ``\\udcff`` instead (a backslash and five
    characters), for a page that displays it rather than passes it on. A surrogate only occurs inside a JSON
    string, so either way the text stays JSON."""
    try:
        return to_json(value)
    except PydanticSerializationError:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        escape = "\\\\u{:04x}" if shown else "\\u{:04x}"
        return _SURROGATE.sub(lambda m: escape.format(ord(m.group())), text).encode("utf-8")


def listing(names: Sequence[str], limit: int) -> str:
    """The first ``limit`` names, comma-separated, then how many more there are ("a, b and 3 more"): enough
    for a message to show what exists without printing thousands of ids."""
    head = ", ".join(names[:limit])
    return head + (f" and {len(names) - limit} more" if len(names) > limit else "")
