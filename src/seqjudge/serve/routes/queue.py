"""The review queue: filters (run, reason, rule, risk level, state incl. disputed, who has claimed it),
pages of ``PAGE_SIZE``; the reviewers' agreement (Cohen's kappa per rule and per reviewer pair) and, per
judge rule, the labels that exist against what the guarantee needs, with the command that recalibrates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from seqjudge.errors import InputError, SeqjudgeError
from seqjudge.serve import queue as q
from seqjudge.serve.web import page, problem, viewer_of
from seqjudge.store import Store


def _labels(directory: Path, db: Store, options: dict[str, Any]) -> tuple[Path, Any, str | None]:
    """The team layer's label status of one golden dataset (``serve --dataset``), or why there is none.
    It opens the store again by its target: a PostgreSQL store by its URL (``path`` is SQLite's only)."""
    from seqjudge.workbench.labels import label_status

    try:
        return directory, label_status(directory, db.target.url or db.path, **options), None
    except SeqjudgeError as exc:
        return directory, None, str(exc)


def _queue_view(
    db: Store, labels: tuple[list[Path], dict[str, Any]], filters: q.Filters, after: int | None
) -> dict[str, Any]:
    found = filters.ask(db, after=after)
    run_id = db.resolve_run(filters.run) if filters.run else None
    return {
        "filters": filters,
        "run_id": run_id,
        "after": after,
        "found": found,
        "agreement": db.agreement(run=run_id),
        "labels": [_labels(directory, db, labels[1]) for directory in labels[0]],
        "states": q.STATES,
        "risks": q.RISKS,
        "reasons": q.REVIEW_REASONS,
    }


async def queue(request: Request) -> Response:
    viewer_of(request)
    try:
        filters, after = q.parse(dict(request.query_params))
        context = await run_in_threadpool(
            _queue_view,
            request.app.state.db,
            (request.app.state.datasets, request.app.state.label_options),
            filters,
            after,
        )
    except InputError as exc:
        return problem(request, 400, "This queue cannot be shown", str(exc))
    return page(request, "queue.html.j2", context)


ROUTES = [Route("/queue", queue, methods=["GET"])]
