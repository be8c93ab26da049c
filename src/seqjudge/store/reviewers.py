"""Reviewers of the workbench and their browser sessions.

- A token (``secrets.token_urlsafe(32)``: 256 random bits) is stored only as its SHA-256. A slow password
  hash guards guessable secrets; nobody can guess 2^256, so a plain hash loses nothing and a sign-in is one
  indexed lookup. The same holds for a session id. The CSRF token is per session and stored as is: it is
  not a credential, only proof that a form came from a page this session was shown.
- A reviewer is disabled, never removed: their decisions stay in the record under their name.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import sqlite3
from datetime import datetime, timedelta

from pydantic import BaseModel

from seqjudge.errors import InputError
from seqjudge.store.codec import _iso, _now
from seqjudge.store.connection import Connection

SESSION_TTL = timedelta(hours=12)  # a browser session's default life


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


def token_hash(secret: str) -> str:
    """What is stored for a token or a session id (see the module docstring for why SHA-256 suffices)."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


class ReviewersMixin(Connection):
    """The ``reviewers`` and ``web_sessions`` tables."""

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
                    source=self.location,
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
                    source=self.location,
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
                source=self.location,
                where="reviewer",
                hint="an admin registers reviewers with `seqjudge reviewers add NAME`",
            )
        if admin and not found.admin:
            raise InputError(
                f"{name!r} is not an admin: only an admin adjudicates a disputed item",
                source=self.location,
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
            # Sessions that expired are of no use: dropped here, where new ones are made (timestamps are
            # written in one format, UTC, so their text sorts as time does).
            conn.execute("DELETE FROM web_sessions WHERE expires_at <= ?", (_iso(now),))
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
