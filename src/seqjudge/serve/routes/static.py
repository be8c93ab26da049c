"""The workbench's few static files: its script and style, and the report's stylesheet (shared, not
copied). Only these names are served; anything else is 404."""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

FILES = {
    "workbench.js": ("seqjudge.serve", "static/workbench.js", "text/javascript"),
    "workbench.css": ("seqjudge.serve", "static/workbench.css", "text/css"),
    "report.css": ("seqjudge.outputs.html", "report.css", "text/css"),
}


def _read(name: str) -> bytes:
    package, path, _ = FILES[name]
    return resources.files(package).joinpath(path).read_bytes()


async def static(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in FILES:
        return PlainTextResponse("not found", status_code=404)
    return Response(
        _read(name),
        media_type=FILES[name][2] + "; charset=utf-8",
        headers={"cache-control": "no-cache"},
    )


ROUTES = [Route("/static/{name}", static, methods=["GET"])]
