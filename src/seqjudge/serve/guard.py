"""Every request's security, in one ASGI middleware, so that no page can forget it:

- **authentication**: a request without a valid session is redirected to the sign-in page (a browser
  asking for HTML) or refused with 401 (anything else). Only ``PUBLIC`` paths are open: the sign-in page
  and the static files (no data in them). The signed-in ``auth.Viewer`` is put in ``scope["state"]``.
- **CSRF**: every state-changing request (anything but GET, HEAD, OPTIONS) must carry its session's CSRF
  token, in the ``X-CSRF-Token`` header or the ``csrf_token`` field of a urlencoded form, and must not
  come from another site (an ``Origin`` other than this server's, or ``Sec-Fetch-Site: cross-site``): 403
  otherwise, before the page runs, so nothing is written. The sign-in form has no session yet: it carries a
  double-submit token (a cookie and a field, ``routes.auth``) and the same origin check.
- **headers**: a Content-Security-Policy without inline script (``script-src 'self'``), no framing,
  ``nosniff``, no referrer, and no caching of pages (they show trace content).
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from seqjudge.serve import auth

if TYPE_CHECKING:
    from seqjudge.store import Store

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
PUBLIC = ("/login", "/static/")  # exact path, or a prefix when it ends with "/"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
MAX_FORM_BYTES = 1_000_000  # a decision is a verdict per rule and a note: far below this

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
)


def is_public(path: str) -> bool:
    return any(path.startswith(p) if p.endswith("/") else path == p for p in PUBLIC)


def same_origin(scope: Scope, *, https: bool = False) -> bool:
    """Whether a state change comes from this site. A browser says so on every POST: ``Sec-Fetch-Site``
    (``same-origin``), and ``Origin`` (this server's; with ``Referrer-Policy: no-referrer`` Chromium sends
    ``Origin: null`` on a form post, so ``null`` counts only beside ``Sec-Fetch-Site: same-origin``). A
    client sending neither (a script holding the token) goes on to the token check. ``https``: the server
    sits behind a proxy that terminates TLS (``--behind-https``), so the browser's origin is https even
    though this hop is plain HTTP; the proxy must pass the ``Host`` header through."""
    headers = Headers(scope=scope)
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = headers.get("origin")
    if origin is None or (origin == "null" and site == "same-origin"):
        return True
    scheme = "https" if https else scope.get("scheme", "http")
    return origin == f"{scheme}://{headers.get('host', '')}"


class Guard:
    """The middleware; ``db`` is the store the sessions live in."""

    def __init__(self, app: App, db: Store, https: bool = False) -> None:
        self.app = app
        self.db = db
        self.https = https

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = _with_security_headers(send, no_store=not scope["path"].startswith("/static/"))
        unsafe = scope["method"] not in SAFE_METHODS
        if unsafe and not same_origin(scope, https=self.https):
            await _refuse(403, "refused: this request came from another site")(scope, receive, send)
            return
        request = Request(scope)
        session_id = request.cookies.get(auth.SESSION_COOKIE)
        viewer = await run_in_threadpool(auth.viewer, self.db, session_id) if session_id else None
        scope.setdefault("state", {})["viewer"] = viewer
        if is_public(scope["path"]):
            await self.app(scope, receive, send)
            return
        if viewer is None:
            await _unauthenticated(request)(scope, receive, send)
            return
        if unsafe:
            body = await _body(receive)
            if body is None:
                await _refuse(413, "refused: the request is too large")(scope, receive, send)
                return
            given = request.headers.get(CSRF_HEADER) or _form_token(request.headers, body)
            if not given or not hmac.compare_digest(given.encode(), viewer.csrf.encode()):
                await _refuse(403, "refused: the CSRF token is missing or wrong; reload the page")(
                    scope, receive, send
                )
                return
            receive = _replay(body)
        await self.app(scope, receive, send)


def _unauthenticated(request: Request) -> Response:
    if request.method == "GET" and "text/html" in request.headers.get("accept", ""):
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303)
    return _refuse(401, "sign in first: this workbench needs a reviewer's session")


def _refuse(status: int, text: str) -> Response:
    return PlainTextResponse(text, status_code=status)


async def _body(receive: Receive) -> bytes | None:
    """The whole request body, or None when it is larger than ``MAX_FORM_BYTES``."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_FORM_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _form_token(headers: Headers, body: bytes) -> str | None:
    if headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        return None
    values = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).get(CSRF_FIELD)
    return values[0] if values else None


def _replay(body: bytes) -> Receive:
    """A ``receive`` that gives the already-read body to the page (the form is parsed again there)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


def _with_security_headers(send: Send, *, no_store: bool) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            present = {k.lower() for k, _ in headers}
            headers += [(k, v) for k, v in SECURITY_HEADERS if k not in present]
            if no_store and b"cache-control" not in present:
                headers.append((b"cache-control", b"no-store"))
            message["headers"] = headers
        await send(message)

    return wrapped
