"""The adjudication view (admins): the disputed items, each reviewer's decision side by side; the item page
takes the admin's final decision."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from seqjudge.serve.auth import Viewer
from seqjudge.serve.web import page, problem, viewer_of
from seqjudge.store import Store

LISTED = 200  # disputed items listed on the page


def _disputed(db: Store, viewer: Viewer) -> dict[str, Any]:
    found = db.queue(state="disputed", limit=LISTED)
    rows = [(e.item, db.item_state(e.item.id, viewer.name)) for e in found.entries]
    return {"rows": rows, "total": found.total, "listed": LISTED}


async def adjudicate(request: Request) -> Response:
    viewer = viewer_of(request)
    if not viewer.admin:
        return problem(
            request,
            403,
            "Admins only",
            "Adjudication is for admins: a disputed item's final "
            "decision is an admin's (`seqjudge reviewers add NAME --admin`).",
        )
    context = await run_in_threadpool(_disputed, request.app.state.db, viewer)
    return page(request, "adjudicate.html.j2", context)


ROUTES = [Route("/adjudicate", adjudicate, methods=["GET"])]
