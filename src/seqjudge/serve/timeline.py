"""An item's trace as one timeline: its messages and calls in the order they happened, each engine and
judge finding anchored at its offending call (``outputs.html.view.marks``, as the report anchors them), and
findings at no single call listed apart.

Arguments and outputs are kept whole up to ``FIELD_CHARS`` (the page folds them in ``<details>``); beyond,
the page says how much was left out and where the whole value is (``seqjudge review show ITEM --full``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic_core import to_json

from seqjudge.crosscheck import TraceResult
from seqjudge.outputs.html.view import marks
from seqjudge.trace import Trace

FIELD_CHARS = 20_000


@dataclass
class Field:
    text: str
    cut: int  # characters left out


@dataclass
class Step:
    kind: str  # "message" or "call"
    index: int  # the call's index, or the message's position
    role: str = ""
    tool: str = ""
    status: str = ""
    args: Field | None = None
    output: Field | None = None
    error: Field | None = None
    text: Field | None = None
    marks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def offending(self) -> bool:
        return bool(self.marks)


def _field(value: Any) -> Field | None:
    if value is None or value == {} or value == "":
        return None
    # pydantic-core's encoder: json.dumps with an indent runs in pure Python, most of a 1,000-call page.
    text = value if isinstance(value, str) else to_json(value, indent=2, fallback=str).decode("utf-8")
    if len(text) <= FIELD_CHARS:
        return Field(text, 0)
    return Field(text[:FIELD_CHARS], len(text) - FIELD_CHARS)


def timeline(trace: Trace, result: TraceResult) -> tuple[list[Step], list[dict[str, Any]]]:
    """The steps in order, and the findings anchored at no call of the trace."""
    found = marks(result)
    n = len(trace.calls)
    at_call: dict[int, list[dict[str, Any]]] = {}
    loose: list[dict[str, Any]] = []
    for mark in found:
        call = mark.get("call")
        if isinstance(call, int) and 0 <= call < n:
            at_call.setdefault(call, []).append(mark)
        else:
            loose.append(mark)
    # A message's ``at`` is the number of calls made before it; a message without one comes first.
    before: dict[int, list[Step]] = {}
    for i, m in enumerate(trace.messages):
        slot = m.at if m.at is not None and m.at <= n else 0
        before.setdefault(slot, []).append(Step("message", i, role=m.role, text=_field(m.content)))
    steps: list[Step] = []
    for i, call in enumerate(trace.calls):
        steps.extend(before.get(i, []))
        steps.append(
            Step(
                "call",
                i,
                tool=call.tool_name,
                status=call.status or "",
                args=_field(call.arguments),
                output=_field(call.output),
                error=_field(call.error),
                marks=at_call.get(i, []),
            )
        )
    steps.extend(before.get(n, []))
    return steps, loose
