"""The queue's filters, read from a page's query string (an unknown filter or value is a 400 page naming it,
never silently ignored), and carried from the queue to an item and on to the next item."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from urllib.parse import urlencode

from seqjudge.defaults import REVIEW_REASONS as REVIEW_REASONS
from seqjudge.errors import InputError

STATES = ("open", "in_review", "disputed", "resolved", "all")
RISKS = ("low", "medium", "high")
PAGE_SIZE = 50
KEYS = ("run", "reason", "rule", "risk", "status", "assignee", "page")


@dataclass(frozen=True)
class Filters:
    run: str = ""
    reason: str = ""
    rule: str = ""
    risk: str = ""
    status: str = "open"
    assignee: str = ""

    def query(self, **change: str | int) -> str:
        """The query string of these filters (defaults left out), with ``change`` applied."""
        values = {**asdict(self), **change}
        kept = {k: v for k, v in values.items() if v not in ("", None) and not (k == "page" and v == 1)}
        if kept.get("status") == "open":
            kept.pop("status")
        return urlencode(kept)


def parse(params: dict[str, str]) -> tuple[Filters, int]:
    """The filters and the page number (1-based) of a query string; InputError names what is wrong."""
    unknown = sorted(set(params) - set(KEYS))
    if unknown:
        raise InputError(
            f"unknown queue filter {unknown[0]!r}",
            where="the address",
            hint=f"the filters are {', '.join(KEYS)}",
        )
    f = Filters(
        **{k: params.get(k, "").strip() for k in KEYS if k not in ("page", "status")},
        status=params.get("status", "open").strip() or "open",
    )
    for name, value, allowed in (
        ("status", f.status, STATES),
        ("reason", f.reason, REVIEW_REASONS),
        ("risk", f.risk, RISKS),
    ):
        if value and value not in allowed:
            raise InputError(f"{name} {value!r} is not one of {', '.join(allowed)}", where="the address")
    text = params.get("page", "1").strip() or "1"
    if not text.isdigit() or int(text) < 1:
        raise InputError(
            f"page {text!r} is not a page number", where="the address", hint="pages count from 1"
        )
    return f, int(text)


def quote(text: str) -> str:
    from urllib.parse import quote as _quote

    return _quote(text, safe="")
