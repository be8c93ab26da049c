"""The review workbench's team layer: the append-only record of decisions, blind double review and
adjudication, and soft claims (reviewers and sessions: ``store.reviewers``; the queue: ``store.queue``).

Design decisions:

- ``review_decisions`` is append-only: no statement here updates or deletes a row. A reviewer's current
  decision on an item is their latest ``review`` row; a changed mind is a new row.
- An item needs ``required_reviews`` independent reviews (``review.reviews_per_item``). When they are in and
  agree (the same verdict, the same rules labelled the same way) the item is resolved through the existing
  resolution path (``ReviewMixin._write_resolution``), so export, golden labels, rates and audits see it as
  ever, every reviewer named. When they disagree the item is ``disputed`` and only an admin's
  ``adjudication`` resolves it. A rule one reviewer labelled and the other did not is a disagreement: a
  double review of a rule needs both labels (fail closed).
- A decision on a resolved item is refused (``ItemResolvedError``, naming who resolved it and when): it was
  made on a page that no longer shows the item's state. The CLI's ``review resolve`` keeps correcting an
  item that needs one review (``resolve_reviews``), appending the correction to the record.
- Blind review: ``item_state(item, viewer)`` hides another reviewer's decision until the viewer's own is in;
  an admin sees all on a disputed item; everyone sees all once it is resolved.
- ``review_items.team_state`` copies the state the decisions give an open item; it is written in the
  transaction that appends the decision, so that the queue filters on an indexed column.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, Field

from seqjudge.errors import InputError
from seqjudge.store.codec import _iso, _now
from seqjudge.store.models import ReviewItem
from seqjudge.store.review import ReviewMixin
from seqjudge.store.reviewers import ReviewersMixin

CLAIM_TTL = timedelta(minutes=30)  # a claim older than this no longer shows

ItemStateName = Literal["open", "in_review", "disputed", "resolved"]
DecisionKind = Literal["review", "adjudication"]


class Decision(BaseModel):
    """One row of an item's append-only record."""

    id: str
    item_id: int
    seq: int  # the item's decisions in the order they were made
    reviewer: str
    kind: DecisionKind
    verdict: Literal["pass", "fail"]
    rules: dict[str, Literal["pass", "fail"]] = Field(default_factory=dict)
    note: str = ""
    decided_at: datetime


class Claim(BaseModel):
    item_id: int
    reviewer: str
    claimed_at: datetime


class ItemState(BaseModel):
    """An item as one viewer may see it: ``decisions`` holds only what the viewer may see (blind review),
    ``hidden`` how many current decisions of others are not shown."""

    item_id: int
    state: ItemStateName
    required_reviews: int
    reviews_in: int  # independent reviews in (each reviewer's latest counts once)
    claimed_by: str | None = None
    claimed_at: datetime | None = None
    mine: Decision | None = None  # the viewer's current decision
    decisions: list[Decision] = Field(default_factory=list)
    hidden: int = 0


class ItemResolvedError(InputError):
    """A decision on an item resolved meanwhile."""


def _agree(a: Decision, b: Decision) -> bool:
    return a.verdict == b.verdict and a.rules == b.rules


def current_votes(decisions: list[Decision]) -> dict[str, Decision]:
    """Each reviewer's latest ``review`` decision (adjudications are not votes)."""
    votes: dict[str, Decision] = {}
    for d in sorted(decisions, key=lambda d: d.seq):
        if d.kind == "review":
            votes[d.reviewer] = d
    return votes


def derived_state(resolved: bool, required: int, votes: dict[str, Decision]) -> ItemStateName:
    if resolved:
        return "resolved"
    if not votes:
        return "open"
    if len(votes) < required:
        return "in_review"
    first, *rest = votes.values()
    return "resolved" if all(_agree(first, v) for v in rest) else "disputed"


class TeamMixin(ReviewersMixin, ReviewMixin):
    """The ``review_decisions`` and ``review_claims`` tables, and ``review_items.team_state``."""

    # -- decisions ------------------------------------------------------------------------------------------
    def decide(
        self,
        item_id: int,
        reviewer: str,
        verdict: str,
        rules: dict[str, str] | None = None,
        note: str = "",
        kind: str = "review",
    ) -> ItemState:
        """Append a registered reviewer's decision (the web's path) and resolve the item when its required
        reviews agree or an admin adjudicates; the item's state as the reviewer now sees it."""
        if kind not in ("review", "adjudication"):
            raise InputError(f"unknown decision kind {kind!r}", where="kind", hint="review or adjudication")
        self._active_reviewer(reviewer, admin=kind == "adjudication")
        rules = dict(rules or {})
        self._check_resolution([item_id], verdict=verdict, rules=rules, reviewer=reviewer)
        with self._tx() as conn:
            self._record(conn, item_id, reviewer, kind, verdict, rules, note, correct=False)
        return self.item_state(item_id, reviewer)

    def resolve_review(
        self,
        item_id: int,
        *,
        verdict: str,
        rules: dict[str, str] | None = None,
        note: str = "",
        reviewer: str,
    ) -> ReviewItem:
        return self.resolve_reviews([item_id], verdict=verdict, rules=rules, note=note, reviewer=reviewer)[0]

    def resolve_reviews(
        self,
        item_ids: list[int],
        *,
        verdict: str,
        rules: dict[str, str] | None = None,
        note: str = "",
        reviewer: str,
        adjudicate: bool = False,
    ) -> list[ReviewItem]:
        """The CLI's decision on several items (`review resolve`), recorded like any other: every item is
        checked first and all are written in one transaction, so a bad item id or rule changes nothing.

        An item that needs one review is resolved (again: a correction, appended to the record). An item
        that needs more gets one independent review by ``reviewer`` and resolves when they agree;
        ``adjudicate`` decides a disputed item and needs ``reviewer`` to be a registered admin. The reviewer
        of a plain review need not be registered (the CLI has the store file, so it is trusted as before),
        but a disabled reviewer is refused."""
        rules = dict(rules or {})
        self._check_resolution(item_ids, verdict=verdict, rules=rules, reviewer=reviewer)
        if adjudicate:
            self._active_reviewer(reviewer, admin=True)
        else:
            known = self.reviewer(reviewer)
            if known is not None and not known.active:
                self._active_reviewer(reviewer)  # raises: a disabled reviewer decides nothing
        kind = "adjudication" if adjudicate else "review"
        with self._tx() as conn:
            for item_id in item_ids:
                self._record(conn, item_id, reviewer, kind, verdict, rules, note, correct=not adjudicate)
        return [self._review_row(i) for i in item_ids]

    def _record(
        self,
        conn: sqlite3.Connection,
        item_id: int,
        reviewer: str,
        kind: str,
        verdict: str,
        rules: dict[str, str],
        note: str,
        *,
        correct: bool,
    ) -> None:
        """Append one decision and apply what it decides, inside the caller's transaction (read there too:
        another reviewer may have decided meanwhile). ``correct``: a review of a resolved item that needs
        one review replaces its resolution (the CLI's correction) instead of being refused."""
        # Lock the item's row first (a no-op write): two reviewers deciding it at once are taken one after
        # the other, each reading the other's decision, on SQLite (whose IMMEDIATE transaction locks the
        # file already) and on a server whose transactions see what committed while they waited.
        conn.execute("UPDATE review_items SET team_state = team_state WHERE id = ?", (item_id,))
        rows = conn.execute(
            "SELECT status, required_reviews, reviewer, resolved_at, resolution_verdict FROM review_items "
            "WHERE id = ?",
            (item_id,),
        ).fetchall()
        item = rows[0]
        required = int(item["required_reviews"])
        decisions = self._decisions_in(conn, item_id)
        resolved = item["status"] == "resolved"
        state = derived_state(resolved, required, current_votes(decisions))
        if resolved and not (correct and required == 1 and kind == "review"):
            raise ItemResolvedError(
                f"review item {item_id} was resolved meanwhile: {item['resolution_verdict']} by "
                f"{item['reviewer']} at {item['resolved_at']}",
                source=self.location,
                where=f"review item {item_id}",
                hint="your decision was not recorded; open the item again to see its resolution"
                + (
                    " (a one-review item is corrected with `seqjudge review resolve`)"
                    if required == 1
                    else ""
                ),
            )
        if kind == "adjudication" and state != "disputed":
            raise InputError(
                f"review item {item_id} is {state.replace('_', ' ')}, not disputed: there is nothing to "
                "adjudicate",
                source=self.location,
                where=f"review item {item_id}",
                hint="an adjudication decides between reviews that disagree; record a review instead",
            )
        now = _iso(_now())
        seq = max((d.seq for d in decisions), default=0) + 1
        conn.execute(
            "INSERT INTO review_decisions (id, item_id, seq, reviewer, kind, verdict, rules, note, "
            "decided_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                uuid.uuid4().hex,
                item_id,
                seq,
                self._clean(reviewer),
                kind,
                verdict,
                self._text(rules),
                self._clean(note),
                now,
            ),
        )
        if kind == "adjudication" or (resolved and correct):
            self._write_resolution(
                conn, item_id, verdict=verdict, rules=rules, note=note, reviewer=reviewer, at=now
            )
            return
        votes = current_votes(self._decisions_in(conn, item_id))
        new_state = derived_state(False, required, votes)
        if new_state == "resolved":
            agreed = list(votes.values())
            self._write_resolution(
                conn,
                item_id,
                verdict=verdict,
                rules=rules,
                note=" | ".join(dict.fromkeys(v.note for v in agreed if v.note)),
                reviewer=", ".join(votes),
                at=now,
            )
        else:
            conn.execute("UPDATE review_items SET team_state = ? WHERE id = ?", (new_state, item_id))

    _DECISION_SELECT = (
        "SELECT id, item_id, seq, reviewer, kind, verdict, rules, note, decided_at FROM review_decisions "
    )

    @staticmethod
    def _decision(row: sqlite3.Row) -> Decision:
        fields = {key: row[key] for key in row.keys()}  # noqa: SIM118 (a row is not a dict)
        return Decision(**{**fields, "rules": json.loads(fields["rules"])})

    def _decisions_in(self, conn: sqlite3.Connection, item_id: int) -> list[Decision]:
        rows = conn.execute(self._DECISION_SELECT + "WHERE item_id = ? ORDER BY seq", (item_id,)).fetchall()
        return [self._decision(r) for r in rows]

    def decision_history(self, item_id: int) -> list[Decision]:
        """Every decision on the item, oldest first (the whole record: for whoever may see it all)."""
        self._item_row(item_id)
        rows = self._read(self._DECISION_SELECT + "WHERE item_id = ? ORDER BY seq", (item_id,))
        return [self._decision(r) for r in rows]

    def _item_row(self, item_id: int) -> sqlite3.Row:
        rows = self._read(
            "SELECT id, status, required_reviews, team_state FROM review_items WHERE id = ?", (item_id,)
        )
        if not rows:
            raise InputError(f"no review item {item_id}", source=self.location, hint=self._items_hint())
        return rows[0]

    def item_state(self, item_id: int, viewer: str, *, now: datetime | None = None) -> ItemState:
        """The item's state, its claim, and the decisions ``viewer`` may see (blind until theirs is in)."""
        row = self._item_row(item_id)
        history = self.decision_history(item_id)
        votes = current_votes(history)
        state = derived_state(row["status"] == "resolved", int(row["required_reviews"]), votes)
        known = self.reviewer(viewer)
        admin = known is not None and known.active and known.admin
        mine = votes.get(viewer)
        sees_all = state == "resolved" or (state == "disputed" and admin) or mine is not None
        visible = history if sees_all else [d for d in history if d.reviewer == viewer]
        others = {name for name in votes if name != viewer}
        shown = {d.reviewer for d in visible}
        claim = self._claim_of(item_id, now)
        return ItemState(
            item_id=item_id,
            state=state,
            required_reviews=int(row["required_reviews"]),
            reviews_in=len(votes),
            claimed_by=None if claim is None or state == "resolved" else claim.reviewer,
            claimed_at=None if claim is None or state == "resolved" else claim.claimed_at,
            mine=mine,
            decisions=visible,
            hidden=len(others - shown),
        )

    # -- claims ---------------------------------------------------------------------------------------------
    def claim(self, item_id: int, reviewer: str) -> Claim:
        """Show that ``reviewer`` is on the item (replacing an older claim): it never blocks anyone."""
        self._item_row(item_id)
        now = _now()
        with self._tx() as conn:
            conn.execute("DELETE FROM review_claims WHERE item_id = ?", (item_id,))
            conn.execute(
                "INSERT INTO review_claims (item_id, reviewer, claimed_at) VALUES (?, ?, ?)",
                (item_id, self._clean(reviewer), _iso(now)),
            )
        return Claim(item_id=item_id, reviewer=reviewer, claimed_at=now)

    def release(self, item_id: int, reviewer: str) -> None:
        """Drop the reviewer's claim on the item (another's claim stays)."""
        with self._tx() as conn:
            conn.execute("DELETE FROM review_claims WHERE item_id = ? AND reviewer = ?", (item_id, reviewer))

    def claims(self, *, now: datetime | None = None) -> list[Claim]:
        """The claims younger than ``CLAIM_TTL``, by item."""
        since = _iso((now or _now()) - CLAIM_TTL)
        rows = self._read(
            "SELECT item_id, reviewer, claimed_at FROM review_claims WHERE claimed_at > ? ORDER BY item_id",
            (since,),
        )
        return [Claim(item_id=r["item_id"], reviewer=r["reviewer"], claimed_at=r["claimed_at"]) for r in rows]

    def _claim_of(self, item_id: int, now: datetime | None) -> Claim | None:
        since = _iso((now or _now()) - CLAIM_TTL)
        rows = self._read(
            "SELECT item_id, reviewer, claimed_at FROM review_claims WHERE item_id = ? AND claimed_at > ?",
            (item_id, since),
        )
        return (
            Claim(item_id=item_id, reviewer=rows[0]["reviewer"], claimed_at=rows[0]["claimed_at"])
            if rows
            else None
        )
