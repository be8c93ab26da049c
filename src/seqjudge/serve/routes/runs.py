"""The runs page (filters) and one run's page: its summary, per-rule failures, certificate and audit status,
and the violation-rates panel (the same figures as `seqjudge runs show RUN --rates`)."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from seqjudge.errors import InputError
from seqjudge.serve.web import page, problem, viewer_of
from seqjudge.store import RUN_STATUSES, Store


def _runs(db: Store, status: str, text: str) -> list[Any]:
    found = db.list_runs()
    if status:
        found = [r for r in found if r.status == status]
    if text:
        needle = text.lower()
        found = [r for r in found if needle in r.id.lower() or needle in (r.label or "").lower()]
    return found


async def runs(request: Request) -> Response:
    viewer_of(request)
    status = request.query_params.get("status", "")
    text = request.query_params.get("q", "").strip()
    if status and status not in RUN_STATUSES:
        return problem(
            request, 400, "Unknown run status", f"status {status!r} is not one of {', '.join(RUN_STATUSES)}."
        )
    found = await run_in_threadpool(_runs, request.app.state.db, status, text)
    return page(
        request, "runs.html.j2", {"runs": found, "status": status, "q": text, "statuses": RUN_STATUSES}
    )


def _run_view(db: Store, ref: str) -> dict[str, Any]:
    from seqjudge.audit import certified_alpha, run_audit
    from seqjudge.outputs.html.view import health
    from seqjudge.rates import rates_or_note

    run_id = db.resolve_run(ref)
    info = db.run_info(run_id)
    results = [s.result for s in db.results(run_id)]
    cert, why = certified_alpha(db, run_id)
    rates, rates_note = rates_or_note(db, run_id)
    return {
        "info": info,
        "health": health(info, results),
        "certificate": cert,
        "certificate_why": why,
        "audit": run_audit(db, [run_id]),
        "rates": rates,
        "rates_note": rates_note,
    }


async def run(request: Request) -> Response:
    viewer_of(request)
    try:
        context = await run_in_threadpool(_run_view, request.app.state.db, request.path_params["run"])
    except InputError as exc:
        return problem(request, 404, "No such run", str(exc))
    return page(request, "run.html.j2", context)


ROUTES = [Route("/runs", runs, methods=["GET"]), Route("/runs/{run}", run, methods=["GET"])]
