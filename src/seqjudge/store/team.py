"""The review workbench's team layer: reviewers and their tokens, browser sessions, the append-only record of
decisions, blind double review and adjudication, soft claims, reviewer agreement and the queue's query.

Design decisions:

- A token (``secrets.token_urlsafe(32)``: 256 random bits) is stored only as its SHA-256. A slow password
  hash guards guessable secrets; nobody can guess 2^256, so a plain hash loses nothing and a sign-in is one
  indexed lookup. The same holds for a session id. The CSRF token is per session and stored as is: it is
  not a credential, only proof that a form came from a page this session was shown.
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

import hashlib
import json
import re
import secrets
import sqlite3
import uuid
from collections import Counter
from datetime import datetime, timedelta
from itertools import combinations
from typing import Any, Literal

from pydantic import BaseModel, Field

from seqjudge.crosscheck import Agreement, kappa_of
from seqjudge.defaults import REVIEW_REASONS
from seqjudge.errors import InputError
from seqjudge.store.codec import _iso, _now
from seqjudge.store.models import ReviewItem
from seqjudge.store.review import ReviewMixin

CLAIM_TTL = timedelta(minutes=30)  # a claim older than this no longer shows
SESSION_TTL = timedelta(hours=12)  # a browser session's default life
QUEUE_PAGE = 50  # items per queue page unless asked otherwise
QUEUE_PAGE_MAX = 500

ItemStateName = Literal["open", "in_review", "disputed", "resolved"]
DecisionKind = Literal["review", "adjudication"]
QUEUE_STATES: tuple[str, ...] = ("unresolved", "open", "in_review", "disputed", "resolved", "all")

# Names appear in labels (`labeler: "ana, bo"`), in the record and in the web page: letters, digits and a few
# separators, no comma (it joins names), no control or direction characters.
_NAME = re.compile(r"[^\W_](?:[\w.@+\- ]{0,62}[^\W_])?")


class Reviewer(BaseModel):
    name: str
    admin: bool
    created_at: datetime
    disabled_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.disabled_at is None


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


class ItemResolvedError(InputError):
    """A decision on an item resolved meanwhile."""


def token_hash(secret: str) -> str:
    """What is stored for a token or a session id (see the module docstring for why SHA-256 suffices)."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _dt(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


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


class TeamMixin(ReviewMixin):
    """The ``reviewers``, ``web_sessions``, ``review_decisions`` and ``review_claims`` tables."""

    # -- reviewers ------------------------------------------------------------------------------------------
    def add_reviewer(self, name: str, *, admin: bool = False) -> str:
        """Register a reviewer; returns their token, which is stored nowhere (only its hash)."""
        if not _NAME.fullmatch(name):
            raise InputError(
                f"{name!r} cannot be a reviewer's name",
                where="NAME",
                hint="use 1 to 64 letters, digits, spaces or . @ + - _ (no comma), starting and ending with "
                "a letter or digit",
            )
        token = secrets.token_urlsafe(32)
        with self._tx() as conn:
            if conn.execute("SELECT 1 FROM reviewers WHERE name = ?", (name,)).fetchall():
                raise InputError(
                    f"there is already a reviewer named {name!r}",
                    source=str(self.path),
                    where="NAME",
                    hint="choose another name; `seqjudge reviewers list` shows the names taken",
                )
            conn.execute(
                "INSERT INTO reviewers (name, token_hash, admin, created_at) VALUES (?, ?, ?, ?)",
                (name, token_hash(token), int(admin), _iso(_now())),
            )
        return token

    def reviewers(self) -> list[Reviewer]:
        rows = self._read("SELECT name, admin, created_at, disabled_at FROM reviewers ORDER BY name")
        return [self._reviewer(r) for r in rows]

    @staticmethod
    def _reviewer(row: sqlite3.Row) -> Reviewer:
        return Reviewer(
            name=row["name"],
            admin=bool(row["admin"]),
            created_at=row["created_at"],
            disabled_at=row["disabled_at"],
        )

    def reviewer(self, name: str) -> Reviewer | None:
        rows = self._read(
            "SELECT name, admin, created_at, disabled_at FROM reviewers WHERE name = ?", (name,)
        )
        return self._reviewer(rows[0]) if rows else None

    def disable_reviewer(self, name: str) -> Reviewer:
        """Refuse the reviewer's token and end their sessions; their decisions stay in the record."""
        with self._tx() as conn:
            rows = conn.execute("SELECT disabled_at FROM reviewers WHERE name = ?", (name,)).fetchall()
            if not rows:
                raise InputError(
                    f"no reviewer named {name!r}",
                    source=str(self.path),
                    where="NAME",
                    hint="`seqjudge reviewers list` shows the reviewers",
                )
            if rows[0]["disabled_at"] is None:
                conn.execute("UPDATE reviewers SET disabled_at = ? WHERE name = ?", (_iso(_now()), name))
            conn.execute("DELETE FROM web_sessions WHERE reviewer = ?", (name,))
        found = self.reviewer(name)
        assert found is not None
        return found

    def reviewer_for_token(self, token: str) -> Reviewer | None:
        """The active reviewer this token signs in; None for an unknown token or a disabled reviewer."""
        rows = self._read(
            "SELECT name, admin, created_at, disabled_at FROM reviewers WHERE token_hash = ?",
            (token_hash(token),),
        )
        if not rows or rows[0]["disabled_at"] is not None:
            return None
        return self._reviewer(rows[0])

    def _active_reviewer(self, name: str, *, admin: bool = False) -> Reviewer:
        found = self.reviewer(name)
        if found is None or not found.active:
            why = "is not a registered reviewer" if found is None else "is disabled"
            raise InputError(
                f"{name!r} {why}",
                source=str(self.path),
                where="reviewer",
                hint="an admin registers reviewers with `seqjudge reviewers add NAME`",
            )
        if admin and not found.admin:
            raise InputError(
                f"{name!r} is not an admin: only an admin adjudicates a disputed item",
                source=str(self.path),
                where="reviewer",
                hint="ask an admin (`seqjudge reviewers list` marks them) to adjudicate",
            )
        return found

    # -- sessions -------------------------------------------------------------------------------------------
    def open_session(self, reviewer: str, ttl: timedelta = SESSION_TTL) -> tuple[str, str]:
        """A browser session for an active reviewer: (session id, CSRF token). Only the id's hash is kept."""
        self._active_reviewer(reviewer)
        session_id = secrets.token_urlsafe(32)
        csrf = secrets.token_urlsafe(32)
        now = _now()
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO web_sessions (id_hash, reviewer, csrf_token, created_at, expires_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (token_hash(session_id), reviewer, csrf, _iso(now), _iso(now + ttl)),
            )
        return session_id, csrf

    def session(self, session_id: str, *, now: datetime | None = None) -> tuple[Reviewer, str] | None:
        """(the reviewer, the session's CSRF token), or None: unknown, expired, or the reviewer disabled."""
        rows = self._read(
            "SELECT s.csrf_token, s.expires_at, r.name, r.admin, r.created_at, r.disabled_at "
            "FROM web_sessions s JOIN reviewers r ON r.name = s.reviewer WHERE s.id_hash = ?",
            (token_hash(session_id),),
        )
        if not rows:
            return None
        row = rows[0]
        if row["disabled_at"] is not None or datetime.fromisoformat(row["expires_at"]) <= (now or _now()):
            return None
        return self._reviewer(row), row["csrf_token"]

    def close_session(self, session_id: str) -> None:
        with self._tx() as conn:
            conn.execute("DELETE FROM web_sessions WHERE id_hash = ?", (token_hash(session_id),))

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
                source=str(self.path),
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
                source=str(self.path),
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
            raise InputError(f"no review item {item_id}", source=str(self.path), hint=self._items_hint())
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
