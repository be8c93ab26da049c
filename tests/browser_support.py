"""The system Chromium for the browser tests (the report's, the workbench's), driven by Playwright.

Playwright never downloads a browser here: it launches the system's Chromium (``/usr/bin/chromium`` from
the Debian package ``chromium``, or ``$SEQJUDGE_CHROMIUM``) with the flags this machine needs (as root: no
sandbox; no background networking, which the closed network refuses). A test module marks itself
``NEEDS_CHROMIUM``: skipped, saying why, only when no Chromium is installed; a missing ``playwright``
package is an error (it is a test extra)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def find_chromium() -> str | None:
    configured = os.environ.get("SEQJUDGE_CHROMIUM")
    if configured:
        return configured
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


CHROMIUM = find_chromium()
NEEDS_CHROMIUM = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium found (install Debian's package: apt-get install -y chromium, "
    "or set SEQJUDGE_CHROMIUM to a Chromium binary)",
)


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium browser (Playwright's ``Browser``)."""
    from playwright.sync_api import sync_playwright  # a test extra: its absence is an error, not a skip

    with sync_playwright() as pw:
        instance = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            yield instance
        finally:
            instance.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """The module's browser (a test module imports this fixture)."""
    with chromium() as instance:
        yield instance


class Watched:
    """A page, and everything it did that a page of ours must never do: a script error or CSP violation
    (console errors; warnings vary with Chromium versions), a dialog (an ``alert`` that ran), a request."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.problems: list[str] = []
        self.dialogs: list[str] = []
        self.requests: list[str] = []
        page.on("console", lambda m: m.type == "error" and self.problems.append(m.text))
        page.on("pageerror", lambda e: self.problems.append(str(e)))
        page.on("dialog", self._dialog)
        page.on("request", lambda r: self.requests.append(r.url))

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()
