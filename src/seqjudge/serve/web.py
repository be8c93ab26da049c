"""The workbench's templates and response helpers.

Every template is autoescaped, and every string printed passes through ``safetext.shown`` first (the
environment's ``finalize``): a terminal escape, a bidi override or another invisible control character in
trace content is shown as its escape (``\\x1b``, ``\\u202e``), never acted on or hidden. The report's shared
pieces (its stylesheet, the rates panel) are found in ``seqjudge.outputs.html`` by the same loader.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from jinja2 import ChoiceLoader, Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from seqjudge.outputs.html.render import fixed
from seqjudge.safetext import shown
from seqjudge.serve.auth import Viewer
from seqjudge.version import __version__


def _finalize(value: Any) -> Any:
    if isinstance(value, str) and not isinstance(value, Markup):
        return shown(value)
    return value


def _environment() -> Environment:
    env = Environment(
        loader=ChoiceLoader(
            [
                FileSystemLoader(str(resources.files("seqjudge.serve").joinpath("templates"))),
                FileSystemLoader(str(resources.files("seqjudge.outputs.html"))),
            ]
        ),
        autoescape=True,
        undefined=StrictUndefined,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["fixed"] = fixed
    env.globals["version"] = __version__
    return env


TEMPLATES = Jinja2Templates(env=_environment())


def viewer_of(request: Request) -> Viewer:
    """The signed-in reviewer (the guard has refused the request otherwise)."""
    found = request.scope.get("state", {}).get("viewer")
    if not isinstance(found, Viewer):  # a route the guard let through unauthenticated must not get here
        raise RuntimeError("no signed-in reviewer on a guarded route")
    return found


def page(request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
    viewer = request.scope.get("state", {}).get("viewer")
    return TEMPLATES.TemplateResponse(request, name, {"viewer": viewer, **context}, status_code=status)


def problem(request: Request, status: int, title: str, text: str) -> Response:
    """A page saying what was wrong and what to do (bad input: 400/404/409; refused: 403)."""
    return page(request, "problem.html.j2", {"title": title, "text": text}, status=status)
