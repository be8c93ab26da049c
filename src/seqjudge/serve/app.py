"""The application factory: the routes of every page, behind the guard (``guard.Guard``), over one store."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from seqjudge.serve.guard import Guard
from seqjudge.serve.routes import adjudicate, auth, item, queue, runs, static

if TYPE_CHECKING:
    from seqjudge.store import Store


async def home(request: Request) -> Response:
    return RedirectResponse("/queue", status_code=303)


def routes() -> list[BaseRoute]:
    return [
        Route("/", home, methods=["GET"]),
        *auth.ROUTES,
        *static.ROUTES,
        *runs.ROUTES,
        *queue.ROUTES,
        *item.ROUTES,
        *adjudicate.ROUTES,
    ]


def create_app(
    db: Store,
    *,
    https: bool = False,
    datasets: Sequence[Path] = (),
    model: str | None = None,
    risk_level: str | None = None,
) -> Starlette:
    """The workbench over ``db`` (the caller opens and closes it). ``https``: the server is reached over
    TLS (behind a proxy that terminates it), so its cookies are marked ``Secure``. ``datasets``: golden
    dataset folders whose label status (per judge rule, against the guarantee) the queue page shows, for the
    judge ``model`` at ``risk_level`` (default: each dataset's own config)."""
    app = Starlette(routes=routes(), middleware=[Middleware(Guard, db=db, https=https)])
    app.state.db = db
    app.state.https = https
    app.state.datasets = list(datasets)
    app.state.label_options = {"model": model, "risk_level": risk_level}
    return app
