"""The review queue: filters (run, reason, rule, risk level, state incl. disputed, who has claimed it),
pages of ``PAGE_SIZE``; the reviewers' agreement (Cohen's kappa per rule and per reviewer pair) and, per
judge rule, the labels that exist against what the guarantee needs, with the command that recalibrates."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from seqjudge.errors import InputError
from seqjudge.serve import queue as q
from seqjudge.serve.web import page, problem, viewer_of
from seqjudge.store import Store


def _queue_view(db: Store, filters: q.Filters, number: int) -> dict[str, Any]:
    run_id = db.resolve_run(filters.run) if filters.run else None
    found = db.review_queue(
        run=run_id,
        reason=filters.reason or None,
        rule=filters.rule or None,
        risk_level=filters.risk or None,
        state=None if filters.status == "all" else filters.status,
        claimed_by=filters.assignee or None,
        offset=(number - 1) * q.PAGE_SIZE,
        limit=q.PAGE_SIZE,
    )
    pages = max(1, -(-found.total // q.PAGE_SIZE))
    return {
        "filters": filters,
        "run_id": run_id,
        "page_number": number,
        "pages": pages,
        "found": found,
        "agreement": db.agreement(run=run_id),
        "labels": db.label_status(run=run_id),
        "states": q.STATES,
        "risks": q.RISKS,
        "reasons": q.REVIEW_REASONS,
    }


async def queue(request: Request) -> Response:
    viewer_of(request)
    try:
        filters, number = q.parse(dict(request.query_params))
        context = await run_in_threadpool(_queue_view, request.app.state.db, filters, number)
    except InputError as exc:
        return problem(request, 400, "This queue cannot be shown", str(exc))
    return page(request, "queue.html.j2", context)


ROUTES = [Route("/queue", queue, methods=["GET"])]
