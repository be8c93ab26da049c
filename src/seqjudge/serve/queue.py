"""The queue's filters, read from a page's query string (an unknown filter or value is a 400 page naming it,
never silently ignored), carried from the queue to an item and on to the next item, and the team layer's
queue query (``Store.queue``, keyset paging) asked with them."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote as _quote
from urllib.parse import urlencode

from seqjudge.defaults import REVIEW_REASONS as REVIEW_REASONS
from seqjudge.errors import InputError
from seqjudge.store.queue import QUEUE_STATES

if TYPE_CHECKING:
    from seqjudge.store import Store
    from seqjudge.store.queue import QueuePage

STATES = QUEUE_STATES  # the team layer's: unresolved (open, in review, disputed), open, ..., all
DEFAULT_STATE = "unresolved"
RISKS = ("low", "medium", "high")
PAGE_SIZE = 50
KEYS = ("run", "reason", "rule", "risk", "status", "assignee", "after")


@dataclass(frozen=True)
class Filters:
    run: str = ""
    reason: str = ""
    rule: str = ""
    risk: str = ""
    status: str = DEFAULT_STATE
    assignee: str = ""

    def query(self, **change: str | int) -> str:
        """The query string of these filters (defaults left out), with ``change`` applied."""
        values = {**asdict(self), **change}
        kept = {k: v for k, v in values.items() if v not in ("", None)}
        if kept.get("status") == DEFAULT_STATE:
            kept.pop("status")
        return urlencode(kept)

    def ask(self, db: Store, *, after: int | None, limit: int = PAGE_SIZE) -> QueuePage:
        """The page of the queue after item ``after`` (None: the first)."""
        return db.queue(
            run=self.run or None,
            reason=self.reason or None,
            rule=self.rule or None,
            risk_level=self.risk or None,
            state=self.status,
            claimed_by=self.assignee or None,
            after=after,
            limit=limit,
        )


def parse(params: dict[str, str]) -> tuple[Filters, int | None]:
    """The filters and where the page starts (``after``: the last item number of the page before) of a
    query string; InputError names what is wrong."""
    unknown = sorted(set(params) - set(KEYS))
    if unknown:
        raise InputError(
            f"unknown queue filter {unknown[0]!r}",
            where="the address",
            hint=f"the filters are {', '.join(KEYS)}",
        )
    f = Filters(
        **{k: params.get(k, "").strip() for k in KEYS if k not in ("after", "status")},
        status=params.get("status", DEFAULT_STATE).strip() or DEFAULT_STATE,
    )
    for name, value, allowed in (
        ("status", f.status, STATES),
        ("reason", f.reason, REVIEW_REASONS),
        ("risk", f.risk, RISKS),
    ):
        if value and value not in allowed:
            raise InputError(f"{name} {value!r} is not one of {', '.join(allowed)}", where="the address")
    text = params.get("after", "").strip()
    if text and not text.isdigit():
        raise InputError(f"after {text!r} is not an item number", where="the address")
    return f, int(text) if text else None


def quote(text: str) -> str:
    return _quote(text, safe="")
