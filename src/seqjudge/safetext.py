"""Trace text made safe for where it is shown: a terminal, a markdown table, HTML inside markdown.

Trace ids, tool names and arguments come from the agent and its tools, so they may hold anything: an ANSI
escape sequence printed as is recolours, moves or clears the reader's terminal (or forges a PASS line), a
bidi override reorders what the reader sees, and a newline or ``|`` in a markdown table cell ends the row
and lets what follows become markup (raw HTML included) in a pull-request comment.
"""

from __future__ import annotations

import html
from collections.abc import Sequence


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


def listing(names: Sequence[str], limit: int) -> str:
    """The first ``limit`` names, comma-separated, then how many more there are ("a, b and 3 more"): enough
    for a message to show what exists without printing thousands of ids."""
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
