"""A writer SIGKILLed mid-run leaves every committed trace whole and nothing half-written; resume finishes.
On both backends (``store_target``): a SQLite file, a PostgreSQL database.

A child process saves results in a loop and prints ``SAVED id`` after each commit. The parent kills it
(once inside a transaction, deterministically; once at whatever moment the clock gives), reopens the
store and checks every trace: result, rule decisions, judge attempts and review item all present, or
none of them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pg_server import is_pg, raw_rows
from seqjudge.store import DuplicateTraceError, Store
from test_store import pair

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL (POSIX)")

TESTS = Path(__file__).resolve().parent
KINDS = ["clean", "split", "nojudge", "unscored"]
N = 40
LONG = 300  # long enough that the writer is still going when the parent gets round to killing it

CHILD = r"""
import random, sys, time
sys.path.insert(0, sys.argv[1])
from test_store import pair
from seqjudge.store import Store

path, run_id, n, stall = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
kinds = ["clean", "split", "nojudge", "unscored"]
store = Store(path)
if stall != "-":
    insert_attempts = store._insert_attempts

    def stalled(conn, run, trace_id, attempts):
        insert_attempts(conn, run, trace_id, attempts)
        if trace_id == stall:
            # Inside the transaction: the result, its rules and its attempts are written, not committed.
            print("INSIDE", trace_id, flush=True)
            time.sleep(120)
        elif stall == "jitter":
            # Transactions that take real time, so that a kill often lands inside one.
            time.sleep(random.uniform(0, 0.004))

    store._insert_attempts = stalled
for i in range(n):
    store.save_result(run_id, *pair(f"t{i}", kinds[i % 4]))
    print("SAVED", f"t{i}", flush=True)
print("DONE", flush=True)
"""


def expected(trace_id: str) -> tuple[Any, Any]:
    i = int(trace_id[1:])
    return pair(trace_id, KINDS[i % 4])


def start(path: str, run_id: str, stall: str = "-", n: int = N) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(TESTS), str(path), run_id, str(n), stall],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_until(child: subprocess.Popen[str], stop: Any) -> list[str]:
    """Lines until ``stop(line)`` holds; fails (rather than hanging) if the child ends first."""
    assert child.stdout is not None
    lines = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = child.stdout.readline()
        if not line:
            err = child.stderr.read() if child.stderr else ""
            raise AssertionError(f"the writer ended early: {err}")
        lines.append(line.strip())
        if stop(line.strip()):
            return lines
    raise AssertionError("the writer took too long")


def kill(child: subprocess.Popen[str]) -> None:
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL


def assert_whole(path: str, run_id: str) -> set[str]:
    """Every stored trace complete; no row of a trace that is not stored; the file sound. Returns the ids."""
    if not is_pg(path):
        assert raw_rows(path, "PRAGMA integrity_check")[0][0] == "ok"
        assert raw_rows(path, "PRAGMA foreign_key_check") == []
    for table in ("rule_decisions", "judge_attempts", "review_items"):
        orphans = raw_rows(
            path,
            f"SELECT COUNT(*) FROM {table} x LEFT JOIN results r "
            "ON r.run_id = x.run_id AND r.trace_id = x.trace_id WHERE r.trace_id IS NULL",
        )
        assert orphans == [(0,)], f"half-written rows in {table}"
    stored = {row[0] for row in raw_rows(path, "SELECT trace_id FROM results WHERE run_id = ?", (run_id,))}

    def per_trace(table: str) -> dict[str, int]:
        sql = f"SELECT trace_id, COUNT(*) FROM {table} WHERE run_id = ? GROUP BY trace_id"
        return {t: int(n) for t, n in raw_rows(path, sql, (run_id,))}

    rules, tries, items = per_trace("rule_decisions"), per_trace("judge_attempts"), per_trace("review_items")
    for trace_id in stored:
        _, result = expected(trace_id)
        assert rules.get(trace_id, 0) == len(result.rules), trace_id
        assert tries.get(trace_id, 0) == (len(result.judge.attempts) if result.judge is not None else 0), (
            trace_id
        )
        assert items.get(trace_id, 0) == (1 if result.review_reasons else 0), trace_id
    with Store(path) as s:
        for stored_result in s.results(run_id):
            assert stored_result.result == expected(stored_result.trace_id)[1]
    return stored


def new_run(path: str) -> str:
    with Store(path) as s:
        return s.create_run(config={"traces": "t.jsonl"}, fingerprint={})


def resume(path: str, run_id: str, n: int = N) -> int:
    """What `seqjudge run --resume` does with the store: skip what is stored, save the rest."""
    saved = 0
    with Store(path) as s:
        done = s.completed_trace_ids(run_id)
        for i in range(n):
            trace_id = f"t{i}"
            if trace_id in done:
                continue
            s.save_result(run_id, *expected(trace_id))
            saved += 1
        s.finish_run(run_id, totals={"traces": n})
    return saved


def test_killed_inside_a_transaction_leaves_nothing_of_that_trace(store_target: str) -> None:
    path = store_target
    run_id = new_run(path)
    child = start(path, run_id, stall="t13")  # a "split" trace: rules, two attempts and a review item
    lines = read_until(child, lambda line: line.startswith("INSIDE"))
    kill(child)
    saved = {line.split()[1] for line in lines if line.startswith("SAVED")}
    assert saved == {f"t{i}" for i in range(13)}
    stored = assert_whole(path, run_id)
    assert stored == saved  # t13 was mid-transaction: no trace of it at all
    with Store(path) as s:
        assert s.run_info(run_id).status == "running"  # killed: never finished
        assert "t13" not in {i.trace_id for i in s.review_items(run=run_id)}
    assert resume(path, run_id) == N - 13
    assert assert_whole(path, run_id) == {f"t{i}" for i in range(N)}


@pytest.mark.parametrize("after", [4, 23])
def test_killed_at_any_moment_then_resumed(store_target: str, after: int) -> None:
    path = store_target
    run_id = new_run(path)
    child = start(path, run_id, stall="jitter", n=LONG)
    lines = read_until(child, lambda line: line == f"SAVED t{after}")
    time.sleep(0.001 * (after % 5))  # somewhere in the next trace's work, wherever that is
    kill(child)
    saved = {line.split()[1] for line in lines if line.startswith("SAVED")}
    stored = assert_whole(path, run_id)
    assert saved <= stored  # every commit the writer saw is there...
    assert len(stored) < LONG  # ...and the kill did stop it mid-way
    resumed = resume(path, run_id, LONG)
    assert resumed == LONG - len(stored)  # nothing stored is saved (or judged) again
    assert assert_whole(path, run_id) == {f"t{i}" for i in range(LONG)}
    with Store(path) as s:
        assert s.run_info(run_id).status == "completed"
        with pytest.raises(DuplicateTraceError):
            s.save_result(run_id, *expected("t0"))
