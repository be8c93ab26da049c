"""The store on PostgreSQL against SQLite on the same machine (issue 35).

1. `seqjudge run rules.yaml t.jsonl --store S` (no model: the engine, redaction and the store) of 20,000
   traces into a new SQLite file and into a new PostgreSQL database, alternating, each in a fresh child
   process; wall time, the median of ``--repeat`` rounds. Target: PostgreSQL within 1.5x of SQLite.
2. With 1,000 runs stored (20 traces each, a quarter routed to review): `runs list` (``Store.list_runs``)
   and the review queue (``Store.review_items()``, every open item, and one run's), in-process, the median
   of ``--repeat`` calls after one warm-up.

The PostgreSQL server is started here as the tests start theirs (tests/pg_server.py: initdb into a
temporary folder, a loopback port), but with PostgreSQL's default durability (fsync on); the store's own
sessions use ``synchronous_commit = off``, as SQLite's WAL uses ``synchronous=NORMAL``. ``--url`` measures
an existing server instead (a database the benchmark may fill; it creates its own tables).

    python benchmarks/store_backends.py                       # both parts, 3 rounds
    python benchmarks/store_backends.py --traces 2000 --repeat 1 --runs 100   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from large_inputs import RULES, TOOLS  # noqa: E402 (the same rules and tools)

from pg_server import PgServer  # noqa: E402
from seqjudge.store import Store  # noqa: E402
from test_store import pair  # noqa: E402

SEQJUDGE = str(Path(sys.executable).with_name("seqjudge"))


def write_suite(folder: Path, traces: int) -> None:
    (folder / "rules.yaml").write_text(RULES, encoding="utf-8")
    with (folder / "t.jsonl").open("w", encoding="utf-8") as out:
        for t in range(traces):
            calls = [
                {"tool_name": TOOLS[(t + i) % len(TOOLS)], "arguments": {"order_id": f"#W{t}", "n": i}}
                for i in range(8)
            ]
            out.write(json.dumps({"trace_id": f"t{t}", "calls": calls}) + "\n")


def timed_run(folder: Path, store: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("SEQJUDGE_STORE", None)
    start = time.perf_counter()
    done = subprocess.run(
        [SEQJUDGE, "run", "rules.yaml", "t.jsonl", "--store", store, "--format", "json"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
    )
    took = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"seqjudge run failed ({done.returncode}): {done.stderr[-2000:]}")
    return took


def fresh_database(server: PgServer | None, url: str | None, n: int) -> str:
    if server is None:
        assert url is not None
        with Store(url) as s, s._tx() as conn:  # empty it: the benchmark's own tables only
            for table in ("baselines", "review_items", "judge_attempts", "rule_decisions", "results", "runs"):
                conn.execute(f"DELETE FROM {table}")
        return url
    name = f"bench_{n}"
    with server.admin() as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    return server.url(name)


def fill(target: str, runs: int, per_run: int) -> None:
    kinds = ["clean", "split", "nojudge", "clean"]  # a quarter routed to review
    stored = [pair(f"t{i}", kinds[i % 4]) for i in range(per_run)]
    with Store(target) as s:
        for _ in range(runs):
            run_id = s.create_run(config={"rules": "rules.yaml"}, fingerprint={})
            for trace, result in stored:
                s.save_result(run_id, trace, result)
            s.finish_run(run_id, totals={"traces": per_run})


def median_time(fn: Callable[[], Any], repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure_run(folder: Path, server: PgServer | None, url: str | None, traces: int, repeat: int) -> None:
    write_suite(folder, traces)
    sqlite_times, pg_times = [], []
    for n in range(repeat):
        sqlite_times.append(timed_run(folder, str(folder / f"s{n}.db")))
        pg_times.append(timed_run(folder, fresh_database(server, url, n)))
        print(f"round {n + 1}: sqlite {sqlite_times[-1]:.2f} s, postgresql {pg_times[-1]:.2f} s", flush=True)
    s, p = statistics.median(sqlite_times), statistics.median(pg_times)
    print(
        f"run of {traces} traces (median of {repeat}): sqlite {s:.2f} s, postgresql {p:.2f} s: {p / s:.2f}x"
    )


def measure_queries(folder: Path, server: PgServer | None, args: argparse.Namespace) -> None:
    targets = {"sqlite": str(folder / "many.db"), "postgresql": fresh_database(server, args.url, 99)}
    for name, target in targets.items():
        start = time.perf_counter()
        fill(target, args.runs, args.per_run)
        took = time.perf_counter() - start
        print(f"{name}: {args.runs} runs of {args.per_run} traces stored in {took:.1f} s", flush=True)
    for name, target in targets.items():
        with Store(target) as s:
            last = s.resolve_run("latest")
            listed = median_time(s.list_runs, args.repeat)
            queue = median_time(lambda: s.review_items(), args.repeat)  # noqa: B023
            one = median_time(lambda: s.review_items(run=last), args.repeat)  # noqa: B023
            items = len(s.review_items())
        print(
            f"{name}: runs list ({args.runs} runs) {listed * 1000:.0f} ms; review queue ({items} open items) "
            f"{queue * 1000:.0f} ms; one run's items {one * 1000:.1f} ms",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--runs", type=int, default=1_000)
    ap.add_argument("--per-run", type=int, default=20)
    ap.add_argument("--url", help="an existing PostgreSQL database instead of a server started here")
    ap.add_argument("--only", choices=["run", "queries"])
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a killed benchmark still stops its server
    server = None if args.url else PgServer(durable=True).start()
    folder = Path(tempfile.mkdtemp(prefix="seqjudge-store-bench-"))
    try:
        if args.only in (None, "run"):
            measure_run(folder, server, args.url, args.traces, args.repeat)
        if args.only in (None, "queries"):
            measure_queries(folder, server, args)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
