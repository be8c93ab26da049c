"""The workbench's server time (`seqjudge serve`): the queue page over 10,000 open review items (its first
page and a filtered page) and the item page of a 1,000-call trace.

    python benchmarks/workbench.py [--items 10000] [--calls 1000] [--repeats 30] [--store PATH]

A store is built first (or reused with --store: built once, then kept): --items traces of 4 or 5 calls that
fail read-before-update (a third of them email-limit too: the filtered page asks for those) with
`review: {fails: true}`, so each is an open review item, and one 1,000-call trace routed to review. The
app runs in this process through Starlette's TestClient with a signed-in session, so a request's time is
the server's: the guard (session lookup), the store's queries, the template, plus the test client's
in-memory transport (no socket). Printed per page: the median and p95 milliseconds of --repeats requests
(after one warm-up request), and the page's size.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from starlette.testclient import TestClient

from seqjudge.crosscheck import reconcile
from seqjudge.rules.engine import check
from seqjudge.rules.load import parse_rules
from seqjudge.serve.app import create_app
from seqjudge.store import Store
from seqjudge.trace import Trace

RULES = parse_rules(
    {
        "rules": [
            {
                "id": "read-before-update",
                "type": "before",
                "first": "Get",
                "then": "Update",
                "severity": "critical",
            },
            {"id": "verify-first", "type": "require", "tool": "Verify", "severity": "critical"},
            {"id": "email-limit", "type": "max_calls", "tool": "Email", "max": 1, "severity": "warning"},
        ]
    }
)


def _trace(trace_id: str, calls: int, *, twice: bool = False) -> Trace:
    """Update before Get (read-before-update fails); ``twice``: a second email (email-limit fails too)."""
    names = ["Verify", "Update", "Get", "Email"] + (["Email"] if twice else [])
    return Trace.model_validate(
        {
            "trace_id": trace_id,
            "calls": [
                {
                    "tool_name": names[i] if i < len(names) else names[1 + i % 3],
                    "arguments": {"customer_id": f"C-{i}", "note": "x" * 200},
                    "output": {"ok": True, "rows": [{"n": n, "text": "y" * 40} for n in range(5)]},
                }
                for i in range(calls)
            ],
            "messages": [{"role": "user", "content": f"message {i}", "at": i} for i in range(0, calls, 10)],
        }
    )


def build(path: Path, items: int, calls: int) -> None:
    with Store(path) as db:
        run_id = db.create_run(config={"rules": "bench.yaml", "review": {"fails": True}}, fingerprint={})
        for i in range(items):
            trace = _trace(f"t{i:05d}", 5 if i % 3 == 0 else 4, twice=i % 3 == 0)
            db.save_result(run_id, trace, reconcile(check(trace, RULES), None, queue_fails=True))
        big = _trace("big", calls)
        db.save_result(run_id, big, reconcile(check(big, RULES), None, queue_fails=True))
        db.finish_run(run_id, totals={"traces": items + 1})
        db.add_reviewer("bench", admin=True)


def timed(client: TestClient, path: str, repeats: int) -> tuple[float, float, int]:
    client.get(path)  # warm-up: templates compiled, caches filled
    times = []
    size = 0
    for _ in range(repeats):
        start = time.perf_counter()
        response = client.get(path)
        times.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, (path, response.status_code)
        size = len(response.content)
    times.sort()
    p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
    return statistics.median(times), p95, size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--store", type=Path, default=None)
    args = parser.parse_args(argv)
    path = args.store or Path(tempfile.mkdtemp()) / "seqjudge.db"
    if not path.exists():
        start = time.perf_counter()
        build(path, args.items, args.calls)
        took = time.perf_counter() - start
        print(f"built {path}: {args.items} items and a {args.calls}-call trace in {took:.1f} s")
    with Store(path, create=False) as db:
        token = db.add_reviewer(f"bench-{time.time_ns()}")
        client = TestClient(create_app(db))
        login = client.get("/login").text
        found = re.search(r'name="login_token" value="([^"]+)"', login)
        assert found is not None
        client.post("/login", data={"login_token": found.group(1), "token": token})
        big = next(
            e.item.id
            for e in db.queue(state="all", limit=500, after=args.items - 5).entries
            if e.item.trace_id == "big"
        )
        pages: list[tuple[str, str]] = [
            (f"queue, first page ({args.items:,} open)", "/queue"),
            (
                "queue, filtered (rule + reason), a later page",
                f"/queue?rule=email-limit&reason=engine_fail&after={args.items // 2}",
            ),
            (f"item page, {args.calls}-call trace", f"/items/{big}"),
        ]
        print(f"{'page':<48} {'median ms':>10} {'p95 ms':>8} {'bytes':>10}")
        for name, url in pages:
            median, p95, size = timed(client, url, args.repeats)
            print(f"{name:<48} {median:>10.1f} {p95:>8.1f} {size:>10,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
