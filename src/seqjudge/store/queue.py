"""The queue the workbench pages through, and the reviewers' agreement: reads over the team's record
(``store.team``).

The queue pages by keyset (the item number): every page costs the same however deep, and with the indexes
of migration 3 a page over 10,000 open items, its count included, takes tens of milliseconds at most. Its
filters are portable SQL: an item's reasons are a JSON list of fixed words, so the quoted word matches
exactly with LIKE; a run's risk level is read from the (few) runs' configs in Python.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from itertools import combinations
from typing import Any

from pydantic import BaseModel, Field

from seqjudge.crosscheck import Agreement, kappa_of
from seqjudge.defaults import REVIEW_REASONS
from seqjudge.errors import InputError
from seqjudge.store.codec import _iso, _now
from seqjudge.store.models import ReviewItem
from seqjudge.store.team import CLAIM_TTL, Decision, ItemStateName, TeamMixin, current_votes

QUEUE_PAGE = 50  # items per queue page unless asked otherwise
QUEUE_PAGE_MAX = 500
QUEUE_STATES: tuple[str, ...] = ("unresolved", "open", "in_review", "disputed", "resolved", "all")


class QueueEntry(BaseModel):
    item: ReviewItem
    state: ItemStateName
    required_reviews: int
    reviews_in: int
    claimed_by: str | None = None


class QueuePage(BaseModel):
    entries: list[QueueEntry]
    total: int  # items matching the filters, on every page
    next_after: int | None = None  # pass as ``after`` for the next page; None: this is the last


class PairAgreement(BaseModel):
    """Two reviewers' agreement over the items both decided: overall (``verdict``) and per rule."""

    reviewers: tuple[str, str]
    verdict: Agreement
    rules: dict[str, Agreement] = Field(default_factory=dict)


class AgreementReport(BaseModel):
    items: int  # items with two or more independent reviews
    pairs: list[PairAgreement]


class QueueMixin(TeamMixin):
    """Reads over the team's record: the queue's pages and the reviewers' agreement."""

    # -- agreement ------------------------------------------------------------------------------------------
    def agreement(self, run: str | None = None) -> AgreementReport:
        """Cohen's kappa between each pair of reviewers, on the verdict and per rule, over the items both
        reviewed independently (each one's latest review; items with two or more reviews)."""
        sql = self._DECISION_SELECT + "WHERE kind = 'review'"
        params: tuple[Any, ...] = ()
        if run is not None:
            sql += " AND item_id IN (SELECT id FROM review_items WHERE run_id = ?)"
            params = (self.resolve_run(run),)
        by_item: dict[int, list[Decision]] = {}
        for row in self._read(sql + " ORDER BY item_id, seq", params):
            d = self._decision(row)
            by_item.setdefault(d.item_id, []).append(d)
        verdicts: dict[tuple[str, str], Counter[tuple[bool, bool]]] = {}
        per_rule: dict[tuple[str, str], dict[str, Counter[tuple[bool, bool]]]] = {}
        items = 0
        for decisions in by_item.values():
            votes = current_votes(decisions)
            if len(votes) < 2:
                continue
            items += 1
            for a, b in combinations(sorted(votes), 2):
                va, vb = votes[a], votes[b]
                verdicts.setdefault((a, b), Counter())[va.verdict == "fail", vb.verdict == "fail"] += 1
                rules = per_rule.setdefault((a, b), {})
                for rule_id in sorted(va.rules.keys() & vb.rules.keys()):
                    pair = (va.rules[rule_id] == "fail", vb.rules[rule_id] == "fail")
                    rules.setdefault(rule_id, Counter())[pair] += 1
        pairs = [
            PairAgreement(
                reviewers=pair,
                verdict=kappa_of(counts),
                rules={rule_id: kappa_of(c) for rule_id, c in sorted(per_rule.get(pair, {}).items())},
            )
            for pair, counts in sorted(verdicts.items())
        ]
        return AgreementReport(items=items, pairs=pairs)

    # -- the queue ------------------------------------------------------------------------------------------
    def queue(
        self,
        *,
        run: str | None = None,
        reason: str | None = None,
        rule: str | None = None,
        risk_level: str | None = None,
        state: str = "unresolved",
        claimed_by: str | None = None,
        after: int | None = None,
        limit: int = QUEUE_PAGE,
        now: datetime | None = None,
    ) -> QueuePage:
        """One page of review items, by item number, filtered; ``after`` is the previous page's
        ``next_after`` (keyset paging: every page costs the same, however deep).

        ``state``: unresolved (default: open, in review and disputed), open (no review in), in_review,
        disputed, resolved or all. ``rule``: items whose trace has that rule failed or undecided by the
        engine, the judge or the reconciliation. ``risk_level``: items of runs at that level.
        ``claimed_by``: items a reviewer claimed (a live claim)."""
        if state not in QUEUE_STATES:
            raise InputError(
                f"unknown queue state {state!r}", where="state", hint="use " + ", ".join(QUEUE_STATES)
            )
        if not 1 <= limit <= QUEUE_PAGE_MAX:
            raise InputError(
                f"page size {limit} is out of range", where="limit", hint=f"use 1 to {QUEUE_PAGE_MAX}"
            )
        where: list[str] = []
        params: list[Any] = []
        if run is not None:
            where.append("i.run_id = ?")
            params.append(self.resolve_run(run))
        if state == "unresolved":
            where.append("i.status = 'open'")
        elif state == "resolved":
            where.append("i.status = 'resolved'")
        elif state != "all":
            where.append("i.status = 'open' AND i.team_state = ?")
            params.append(state)
        if reason is not None:
            if reason not in REVIEW_REASONS:
                raise InputError(
                    f"unknown review reason {reason!r}",
                    where="reason",
                    hint="use one of " + ", ".join(REVIEW_REASONS),
                )
            # reasons is a JSON list of fixed words: the quoted word matches exactly, portably.
            where.append("i.reasons LIKE ?")
            params.append(f'%"{reason}"%')
        if rule is not None:
            where.append(
                "EXISTS (SELECT 1 FROM rule_decisions d WHERE d.run_id = i.run_id "
                "AND d.trace_id = i.trace_id AND d.rule_id = ? AND (d.final IN ('failed', 'deferred') "
                "OR d.engine = 'failed' OR d.judge = 'failed'))"
            )
            params.append(rule)
        if risk_level is not None:
            runs = [
                r["id"] for r in self._read("SELECT id, config FROM runs") if _risk(r["config"]) == risk_level
            ]
            if not runs:
                return QueuePage(entries=[], total=0)
            where.append("i.run_id IN (" + ", ".join("?" for _ in runs) + ")")
            params.extend(runs)
        if claimed_by is not None:
            where.append(
                "EXISTS (SELECT 1 FROM review_claims c WHERE c.item_id = i.id AND c.reviewer = ? "
                "AND c.claimed_at > ?)"
            )
            params.extend([claimed_by, _iso((now or _now()) - CLAIM_TTL)])
        cond = " AND ".join(where) if where else "1 = 1"
        (total,) = self._read(f"SELECT COUNT(*) AS n FROM review_items i WHERE {cond}", tuple(params))
        page_cond = cond + (" AND i.id > ?" if after is not None else "")
        page_params = (*params, *([after] if after is not None else []), limit + 1)
        rows = self._read(self._REVIEW_SELECT + f" WHERE {page_cond} ORDER BY i.id LIMIT ?", page_params)
        more = len(rows) > limit
        rows = rows[:limit]
        ids = [r["id"] for r in rows]
        counts: dict[int, int] = {}
        claims: dict[int, str] = {}
        if ids:
            marks = ", ".join("?" for _ in ids)
            for r in self._read(
                "SELECT item_id, COUNT(DISTINCT reviewer) AS n FROM review_decisions "
                f"WHERE kind = 'review' AND item_id IN ({marks}) GROUP BY item_id",
                tuple(ids),
            ):
                counts[r["item_id"]] = r["n"]
            for r in self._read(
                f"SELECT item_id, reviewer FROM review_claims WHERE item_id IN ({marks}) AND claimed_at > ?",
                (*ids, _iso((now or _now()) - CLAIM_TTL)),
            ):
                claims[r["item_id"]] = r["reviewer"]
        entries = [
            QueueEntry(
                item=self._review_item(r),
                state="resolved" if r["status"] == "resolved" else r["team_state"],
                required_reviews=r["required_reviews"],
                reviews_in=counts.get(r["id"], 0),
                claimed_by=None if r["status"] == "resolved" else claims.get(r["id"]),
            )
            for r in rows
        ]
        return QueuePage(entries=entries, total=total["n"], next_after=ids[-1] if more else None)


def _risk(config_text: str) -> str:
    """A stored run config's risk level (the default, medium, when it names none)."""
    return str(json.loads(config_text).get("risk_level") or "medium")
