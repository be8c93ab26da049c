"""The sign-in page (a reviewer's token, POSTed), and sign-out."""

from __future__ import annotations

import hmac
import secrets

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from seqjudge.serve import auth
from seqjudge.serve.web import page, viewer_of


def _safe_next(target: str | None) -> str:
    """Where to go after signing in: a path on this server only (never ``//host`` or a scheme)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def _login_page(request: Request, *, error: str | None = None, status: int = 200) -> Response:
    token = secrets.token_urlsafe(24)
    response = page(
        request,
        "login.html.j2",
        {"login_token": token, "next": _safe_next(request.query_params.get("next")), "error": error},
        status=status,
    )
    response.set_cookie(
        auth.LOGIN_COOKIE, token, httponly=True, samesite="strict", path="/login", secure=_https(request)
    )
    return response


def _https(request: Request) -> bool:
    return bool(request.app.state.https)


async def login_form(request: Request) -> Response:
    return _login_page(request)


async def login(request: Request) -> Response:
    form = await request.form()
    cookie = request.cookies.get(auth.LOGIN_COOKIE, "")
    given = str(form.get("login_token", ""))
    if not cookie or not hmac.compare_digest(cookie.encode(), given.encode()):
        return _login_page(request, error="The sign-in form expired; sign in again.", status=403)
    token = str(form.get("token", ""))
    db = request.app.state.db
    opened = await run_in_threadpool(auth.sign_in, db, token) if token.strip() else None
    if opened is None:
        return _login_page(
            request,
            error="That token names no reviewer (or a disabled one). Ask an admin for yours: "
            "`seqjudge reviewers add NAME` prints it once.",
            status=401,
        )
    session_id, _ = opened
    response = RedirectResponse(_safe_next(str(form.get("next", "/"))), status_code=303)
    response.set_cookie(
        auth.SESSION_COOKIE,
        session_id,
        max_age=int(auth.SESSION_TTL.total_seconds()),
        httponly=True,
        samesite="strict",
        path="/",
        secure=_https(request),
    )
    response.delete_cookie(auth.LOGIN_COOKIE, path="/login")
    return response


async def logout(request: Request) -> Response:
    viewer_of(request)  # the guard let only a signed-in reviewer with the CSRF token through
    session_id = request.cookies.get(auth.SESSION_COOKIE, "")
    await run_in_threadpool(auth.sign_out, request.app.state.db, session_id)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(auth.SESSION_COOKIE, path="/")
    return response


ROUTES = [
    Route("/login", login_form, methods=["GET"]),
    Route("/login", login, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
]
