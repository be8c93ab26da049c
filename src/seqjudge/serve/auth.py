"""Sign-in, sessions and sign-out: the thin layer between the guard and the team layer's reviewers and
web sessions (``Store.reviewer_for_token``, ``open_session``, ``session``, ``close_session``).

A reviewer's token is typed once on the sign-in page; from then on the browser holds only a random session
id (in an HttpOnly, SameSite=Strict cookie) and the store holds only its hash, with a CSRF token per session.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from seqjudge.store.reviewers import SESSION_TTL as TEAM_SESSION_TTL

if TYPE_CHECKING:
    from seqjudge.store import Store

SESSION_COOKIE = "seqjudge_session"
LOGIN_COOKIE = "seqjudge_login"  # the sign-in form's own CSRF token (double submit: no session yet)
SESSION_TTL = TEAM_SESSION_TTL  # the team layer's: the cookie lives as long as the session


@dataclass(frozen=True)
class Viewer:
    """Who is signed in on this request, and the CSRF token their forms carry."""

    name: str
    admin: bool
    csrf: str


def sign_in(db: Store, token: str) -> tuple[str, Viewer] | None:
    """The new session id and its viewer, or None when the token names no (enabled) reviewer."""
    reviewer = db.reviewer_for_token(token.strip())
    if reviewer is None:
        return None
    session_id, csrf = db.open_session(reviewer.name, SESSION_TTL)
    return session_id, Viewer(reviewer.name, bool(reviewer.admin), csrf)


def viewer(db: Store, session_id: str) -> Viewer | None:
    """The signed-in reviewer of a session id; None when it is unknown, expired, or its reviewer disabled."""
    found = db.session(session_id)
    if found is None:
        return None
    reviewer, csrf = found
    return Viewer(reviewer.name, bool(reviewer.admin), csrf)


def sign_out(db: Store, session_id: str) -> None:
    db.close_session(session_id)


def reviewers_exist(db: Store) -> bool:
    return any(r.active for r in db.reviewers())
