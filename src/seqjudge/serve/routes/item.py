"""One review item: the trace as a timeline with every finding at its call, the rules with their criteria
(the judge's explanation and confidence beside each), the decision history (who, when), who has claimed it
(opening it takes a soft claim), and the decision form: a verdict per rule and a note, from the keyboard.

Blind review: the team layer's ``item_state`` gives only the decisions this viewer may see (another
reviewer's stays hidden until the viewer's own is in). A disputed item shows an admin every decision side by
side and takes their adjudication. A decision on an item that was resolved meanwhile is refused, saying by
whom, and the page shows what was submitted so that nothing typed is lost."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from seqjudge.errors import InputError
from seqjudge.serve import queue as q
from seqjudge.serve.auth import Viewer
from seqjudge.serve.criteria import rule_texts
from seqjudge.serve.timeline import timeline
from seqjudge.serve.web import page, problem, viewer_of
from seqjudge.store import ItemResolvedError, Store

EXACT = ("passed", "failed")
IDLE = ("not_exercised", "not_applicable")  # an exact rule with nothing to decide on this trace


def decided_rules(detail: Any) -> list[Any]:
    """The rules a reviewer decides: every `judge` rule, and every exact rule the trace exercised (one it
    never exercised, or that does not apply to it, has nothing for a person to say: it is left out, for
    every reviewer alike, so that two reviews compare the same rules)."""
    return [d for d in detail.result.rules if d.type == "judge" or d.engine not in IDLE]


def _filters(text: str) -> q.Filters:
    """The queue filters carried in the address (``?q=...``); bad ones fall back to the default queue."""
    try:
        params = {k: v[0] for k, v in parse_qs(text, keep_blank_values=True).items()}
        params.pop("after", None)
        return q.parse(params)[0]
    except InputError:
        return q.Filters()


def _next_item(db: Store, filters: q.Filters, item_id: int) -> int | None:
    """The item after this one in the filtered queue (by item number)."""
    found = filters.ask(db, after=item_id, limit=1)
    return found.entries[0].item.id if found.entries else None


def _rules(detail: Any, texts: dict[str, str], mine: dict[str, str]) -> list[dict[str, Any]]:
    """The form's rules: every rule of the trace. Preset: the viewer's own current decision (``mine``: a
    changed mind starts from it), else, for an exact rule the engine decided and the judge did not dispute,
    the engine's outcome; every other rule (a judge rule, a disputed or undecided one) is left to set."""
    rows = []
    for d in decided_rules(detail):
        settled = d.type != "judge" and d.engine in EXACT and d.agree is not False
        preset = mine.get(d.rule_id) or (d.engine[:4] if settled else None)
        rows.append({"d": d, "preset": preset, "criteria": texts.get(d.rule_id, "")})
    return rows


def _item_view(db: Store, item_id: int, viewer: Viewer, query: str, came_from: int | None) -> dict[str, Any]:
    detail = db.review_item(item_id)
    db.claim(item_id, viewer.name)
    info = db.run_info(detail.run_id)
    texts = rule_texts(info.config, info.fingerprint)
    steps, loose = timeline(detail.trace, detail.result)
    filters = _filters(query)
    next_id = _next_item(db, filters, item_id)
    state = db.item_state(item_id, viewer.name)
    seen = {d.id for d in state.decisions}
    return {
        "item": detail,
        "info": info,
        "state": state,
        # The append-only record: every entry's who and when; its content only where item_state lets this
        # viewer see the decision (blind review).
        "history": [(d, d.id in seen) for d in db.decision_history(item_id)],
        "steps": steps,
        "loose": loose,
        "rules": _rules(detail, texts.texts, dict(state.mine.rules) if state.mine is not None else {}),
        "criteria_note": texts.note,
        "judge": detail.result.judge,
        "q": filters.query(),
        "prev_id": came_from,  # k goes back to the item this one was reached from
        "next_id": next_id,
        "adjudicating": viewer.admin and state.state == "disputed",
    }


def _came_from(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() else None


async def item(request: Request) -> Response:
    viewer = viewer_of(request)
    item_id = request.path_params["item"]
    params = request.query_params
    try:
        context = await run_in_threadpool(
            _item_view,
            request.app.state.db,
            item_id,
            viewer,
            params.get("q", ""),
            _came_from(params.get("from")),
        )
    except InputError as exc:
        return problem(request, 404, f"No review item {item_id}", str(exc))
    return page(request, "item.html.j2", context)


def _decide(
    db: Store, item_id: int, viewer: Viewer, form: dict[str, str]
) -> tuple[int, str | None, int | None]:
    """Record the decision: (the status, what refused it or None, the next item of the queue). A form that
    is wrong is 400; an item resolved meanwhile is 409, saying by whom (the team layer refuses it)."""
    detail = db.review_item(item_id)
    known = [d.rule_id for d in decided_rules(detail)]
    rules: dict[str, str] = {}
    for rule_id in known:
        value = form.get(f"rule:{rule_id}", "")
        if value not in ("pass", "fail"):
            return 400, f"rule {rule_id} has no verdict: every rule needs pass or fail", None
        rules[rule_id] = value
    extra = sorted(k[5:] for k in form if k.startswith("rule:") and k[5:] not in known)
    if extra:
        return 400, f"rule {extra[0]} is not a rule of trace {detail.trace_id}", None
    kind = form.get("kind", "review")
    verdict = "fail" if "fail" in rules.values() else "pass"
    try:
        db.decide(item_id, viewer.name, verdict, rules, form.get("note", ""), kind=kind)
    except ItemResolvedError as exc:
        return 409, str(exc), None
    except InputError as exc:  # an adjudication by a non-admin, an unknown kind
        return 400, str(exc), None
    return 303, None, _next_item(db, _filters(form.get("q", "")), item_id)


async def decide(request: Request) -> Response:
    viewer = viewer_of(request)
    item_id = request.path_params["item"]
    form = {k: str(v) for k, v in (await request.form()).multi_items()}
    try:
        status, refused, next_id = await run_in_threadpool(
            _decide, request.app.state.db, item_id, viewer, form
        )
    except InputError as exc:  # no such item
        status, refused, next_id = 404, str(exc), None
    if refused is not None:
        kept = [(k, v) for k, v in form.items() if k != "csrf_token"]
        return page(
            request,
            "problem.html.j2",
            {"title": f"Decision on item {item_id} not recorded", "text": refused, "kept": kept},
            status=status,
        )
    carried = form.get("q", "")
    if next_id is None:
        return RedirectResponse("/queue" + (f"?{carried}" if carried else ""), status_code=303)
    return RedirectResponse(f"/items/{next_id}?q={q.quote(carried)}&from={item_id}", status_code=303)


ROUTES = [
    Route("/items/{item:int}", item, methods=["GET"]),
    Route("/items/{item:int}/decide", decide, methods=["POST"]),
]
