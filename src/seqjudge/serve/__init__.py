"""`seqjudge serve`: the review workbench in the browser, over the store.

Starlette (a small, well-kept ASGI toolkit) served by uvicorn; pages are rendered on the server from Jinja
templates (the project's jinja2, autoescape on); one small vendored script gives the keyboard. No front-end
build step. Modules, one job each:

- ``app``: the application factory (routes, the guard, the store it works on);
- ``guard``: every request's security: the session (sign-in required everywhere but the sign-in page and
  the static files), CSRF token and same-origin check on every state change, the security headers;
- ``auth``: sign-in, sessions and sign-out over the team layer's reviewers and sessions;
- ``web``: the templates and the response helpers; ``timeline``: an item's trace as one timeline;
  ``criteria``: a run's rule texts, from the same source as the judge's prompt;
- ``routes/``: one module per page.
"""
