"""A store for the workbench's tests (routes through Starlette's TestClient, and the browser test): reviewers
ana, bo and the admin chief; a run whose items need two independent reviews; the report tests' runs, with
their hostile trace, and one more trace whose content is terminal escapes, bidi overrides and a
``javascript:`` URL."""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from report_data import build
from seqjudge.store import Store
from seqjudge.trace import Trace
from test_store import judge_result, make_result, make_trace, pair

HOSTILE_TEXT = (
    "\x1b[2J\x1b[32mPASS\x1b[0m \u202eevil\u202c javascript:alert(5) "
    '"onmouseover="alert(6)" <svg onload=alert(7)>'
)
HOSTILE_ID = "hostile-\u202etxt.exe"


def hostile_terminal_pair() -> tuple[Trace, Any]:
    trace = make_trace(HOSTILE_ID, good=False)
    data = trace.model_dump(mode="json")
    data["calls"][0]["output"] = {"link": "javascript:alert(8)", "text": HOSTILE_TEXT}
    data["messages"].append({"role": "assistant", "content": HOSTILE_TEXT, "at": 1})
    trace = Trace.model_validate(data)
    return trace, make_result(trace, judge_result(HOSTILE_ID, {"confirm-delete": 1}))


def build_team(path: Path | str, *, double: int = 3) -> dict[str, Any]:
    """The report tests' store plus a run of ``double`` items needing two reviews each, and reviewers."""
    data = build(path)
    with Store(path, create=False) as s:
        cand = data["candidate"]
        trace, result = hostile_terminal_pair()
        s.save_result(cand, trace, result)
        double_run = s.create_run(config={"review": {"reviews_per_item": 2}}, fingerprint={}, label="double")
        for i in range(double):
            s.save_result(double_run, *pair(f"d-{i}", "split"))
        s.finish_run(double_run, totals={"traces": double})
        data["double"] = double_run
        data["double_items"] = [item.id for item in s.review_items(run=double_run)]
        data["tokens"] = {
            "ana": s.add_reviewer("ana"),
            "bo": s.add_reviewer("bo"),
            "chief": s.add_reviewer("chief", admin=True),
        }
        data["hostile_item"] = next(i.id for i in s.review_items(status="all") if i.trace_id == HOSTILE_ID)
    return data


def hidden_value(html: str, name: str) -> str:
    found = re.search(rf'name="{re.escape(name)}" value="([^"]*)"', html)
    assert found is not None, f"no hidden field {name}"
    return found.group(1)


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """``app`` served by uvicorn on 127.0.0.1 at a free port, in a thread; yields its base URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        for _ in range(500):  # until it is up (it starts in milliseconds; the bound is a safety net)
            if server.started:
                break
            thread.join(0.01)
        assert server.started, "uvicorn did not start"
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
