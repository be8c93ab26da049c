"""Trace text made safe for where it is shown: a terminal, a markdown table, HTML inside markdown.

Trace ids, tool names and arguments come from the agent and its tools, so they may hold anything: an ANSI
escape sequence printed as is recolours, moves or clears the reader's terminal (or forges a PASS line), a
bidi override reorders what the reader sees, and a newline or ``|`` in a markdown table cell ends the row
and lets what follows become markup (raw HTML included) in a pull-request comment.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from pydantic_core import PydanticSerializationError, to_json


def terminal(text: str) -> str:
    """``text`` on one line with every character that is not printable (C0 and C1 controls, ESC, DEL,
    newlines, tabs, bidi and other format characters) shown as its Python escape (``\\x1b``, ``\\n``)."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def md_code(text: str) -> str:
    """Inline code for a markdown table cell: one line, no backtick (it would end the span), pipes escaped.
    Inside a code span markdown shows HTML literally, so nothing else needs escaping."""
    return "`" + terminal(text).replace("`", "'").replace("|", "\\|") + "`"


def md_text(text: str) -> str:
    """Plain text for a markdown table cell or an HTML element inside markdown (``<summary>``): one line,
    HTML escaped, pipes escaped."""
    return html.escape(terminal(text), quote=False).replace("|", "\\|")


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
