"""How CommonMark reads fenced blocks, for the tests and benchmarks that check hostile text stays inside one
(tests/test_escapes.py, benchmarks/hardening_probes.py): plain Python, no seqjudge import, so the probes
can run against an older checkout."""

from __future__ import annotations

import re

_OPEN = re.compile(r"^ {0,3}(`{3,})\w*$")


def outside_fences(md: str) -> list[str]:
    """The lines of ``md`` a CommonMark reader takes as markdown: those outside fenced code blocks (a block
    ends at a line of backticks, indented up to three spaces, as long as the opening fence at least)."""
    outside: list[str] = []
    fence: str | None = None
    for line in md.splitlines():
        if fence is None:
            opened = _OPEN.match(line)
            if opened:
                fence = opened.group(1)
            else:
                outside.append(line)
        elif re.fullmatch(rf" {{0,3}}`{{{len(fence)},}}\s*", line):
            fence = None
    assert fence is None, "a fence left open"
    return outside
