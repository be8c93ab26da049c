"""Engine speed: end-to-end `check` against merely parsing the same file with json.loads.

    python benchmarks/engine.py [--repeats 3] [--calls 1000000] [--traces 100000] [--workers N] [--only-b]

(a) one trace of N calls against 50 rules of every type, loaded and checked in-process;
(b) many traces of 20 calls against 20 rules, as JSONL through `seqjudge check` (in-process CLI);
(c) linearity: the same as (a) at N/10 calls, and the time ratio.
Medians of --repeats runs, each measured side by side with its parse-only baseline.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

import yaml

TOOLS = [f"tool_{i:02d}" for i in range(16)] + ["auth", "get_order", "cancel_order", "admin_reset"]


def rules_50() -> dict:
    rules: list[dict] = []
    t = TOOLS
    for i in range(6):
        rules.append({"type": "require", "tool": t[i]})
        rules.append({"type": "before", "first": t[i], "then": t[i + 6]})
        rules.append({"type": "max_calls", "tool": t[i], "max": 10_000_000})
        rules.append({"type": "eventually", "tool": t[i], "within": 50})
        rules.append({"type": "never_after", "trigger": "cancel_order", "forbidden": t[i + 8]})
        rules.append(
            {"type": "after", "trigger": t[i + 2], "then": [t[i + 3], t[i + 4], "auth"], "within": 40}
        )
    rules += [
        {"type": "blocklist", "pattern": "admin_"},
        {"type": "blocklist", "pattern": "drop_"},
        {"type": "sequence", "tools": ["auth", "get_order", "cancel_order"]},
        {"type": "sequence", "tools": ["auth", "tool_00"], "strict": True},
        {"type": "before", "first": "get_order", "then": "cancel_order", "same": ["order_id"]},
        {"type": "max_calls", "tool": "cancel_order", "max": 1, "same": ["order_id"]},
        {
            "type": "before",
            "first": {"tool": "get_order", "args_match": {"order_id": "^#1"}},
            "then": "cancel_order",
        },
        {"type": "trajectory", "expected": ["auth", "get_order", "cancel_order"]},
        {"type": "trajectory", "expected": ["auth", "tool_01", "tool_02"], "mode": "in_order"},
        {"type": "trajectory", "expected": ["auth", "tool_03"], "mode": "any_order"},
        {"type": "judge", "description": "confirm with the user before cancelling"},
        {"type": "require", "tool": "auth", "when": {"env": "prod"}},
        {"type": "before", "first": "auth", "then": "tool_15", "severity": "warning"},
        {"type": "max_calls", "tool": "admin_reset", "max": 0},
    ]
    assert len(rules) == 50, len(rules)
    return {"rules": rules}


def rules_20() -> dict:
    return {"rules": rules_50()["rules"][:12] + rules_50()["rules"][36:44]}


def make_calls(n: int, rng: random.Random) -> list[dict]:
    calls = [{"tool_name": "auth", "arguments": {"email": "a@example.com"}, "status": "ok"}]
    common = TOOLS[:16]
    for i in range(1, n):
        r = rng.random()
        if r < 0.04:
            name, args = "get_order", {"order_id": f"#{rng.randrange(1000)}"}
        elif r < 0.05:
            name, args = "cancel_order", {"order_id": f"#{rng.randrange(1000)}"}
        else:
            name, args = common[rng.randrange(16)], {"q": i % 97}
        calls.append(
            {"tool_name": name, "arguments": args, "status": "ok" if rng.random() > 0.02 else "error"}
        )
    return calls


def timed(fn) -> float:
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_one_trace(tmp: Path, n: int, repeats: int) -> tuple[float, float]:
    from seqjudge import check, load_rules, load_traces
    from seqjudge.rules.engine import Engine

    rng = random.Random(7)
    path = tmp / f"one_{n}.json"
    path.write_text(json.dumps({"trace_id": "big", "calls": make_calls(n, rng), "context": {"env": "prod"}}))
    rules_path = tmp / "rules50.yaml"
    rules_path.write_text(yaml.safe_dump(rules_50()))
    ruleset = load_rules(rules_path)
    assert check  # the public API is what users call; Engine is the same code compiled once

    def parse_only() -> None:
        json.loads(path.read_bytes())

    def end_to_end() -> None:
        engine = Engine(load_rules(rules_path))
        for trace in load_traces(path):
            engine.check(trace)

    parse, full = [], []
    for _ in range(repeats):
        parse.append(timed(parse_only))
        full.append(timed(end_to_end))
    del ruleset
    return statistics.median(parse), statistics.median(full)


def bench_many(tmp: Path, n_traces: int, repeats: int, workers: int | None = None) -> tuple[float, float]:
    from seqjudge.cli import run

    rng = random.Random(11)
    path = tmp / f"many_{n_traces}.jsonl"
    with path.open("w") as out:
        for k in range(n_traces):
            out.write(json.dumps({"trace_id": f"t{k}", "calls": make_calls(20, rng)}) + "\n")
    rules_path = tmp / "rules20.yaml"
    rules_path.write_text(yaml.safe_dump(rules_20()))

    def parse_only() -> None:
        with path.open("rb") as f:
            for line in f:
                json.loads(line)

    def through_cli() -> None:
        extra = [] if workers is None else ["--workers", str(workers)]
        code = run(
            ["check", str(rules_path), str(path), "--format", "jsonl", "--output", str(tmp / "out.jsonl")]
            + extra
        )
        assert code in (0, 1), code

    parse, full = [], []
    for _ in range(repeats):
        parse.append(timed(parse_only))
        full.append(timed(through_cli))
    return statistics.median(parse), statistics.median(full)


def bench_floor(tmp: Path, n_traces: int, repeats: int, workers: int) -> tuple[float, float, int]:
    """What (b) costs without the rules: the same processes parse every line of the same file and write,
    for each, a report of the size `check` writes (the first trace's real one); no rule is evaluated.

    The lower bound of (b) on this machine: reading the input and writing the output the report format
    asks for. Returns the parse-only and floor medians and the report's size in bytes.
    """
    from pydantic_core import to_json

    from seqjudge import load_rules
    from seqjudge.ingest.plain import plain_trace
    from seqjudge.rules.engine import Engine

    path = tmp / f"many_{n_traces}.jsonl"
    engine = Engine(load_rules(tmp / "rules20.yaml"))
    with path.open("rb") as f:
        first = plain_trace(json.loads(f.readline()), None)
    assert first is not None
    report = engine.check_data(first)
    size = len(to_json(report))

    def part(lo: int, hi: int, out: Path) -> None:
        with path.open("rb") as f, out.open("wb", buffering=1 << 20) as o:
            f.seek(lo)
            if lo:
                f.readline()  # the line that straddles lo belongs to the part before
            while f.tell() <= hi:
                line = f.readline()
                if not line:
                    break
                assert plain_trace(json.loads(line), None) is not None
                o.write(to_json(report) + b"\n")

    def floor() -> None:
        size_in = path.stat().st_size
        if workers < 1:
            part(0, size_in, tmp / "floor0.jsonl")
            return
        bounds = [size_in * k // workers for k in range(workers + 1)]
        pids = []
        for k in range(workers):
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                code = 0
                try:
                    part(bounds[k], bounds[k + 1] - 1, tmp / f"floor{k}.jsonl")
                except BaseException:
                    code = 1
                os._exit(code)
            pids.append(pid)
        for pid in pids:
            _, status = os.waitpid(pid, 0)
            assert status == 0, status

    def parse_only() -> None:
        with path.open("rb") as f:
            for line in f:
                json.loads(line)

    parse, full = [], []
    for _ in range(repeats):
        parse.append(timed(parse_only))
        full.append(timed(floor))
    return statistics.median(parse), statistics.median(full), size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--calls", type=int, default=1_000_000)
    ap.add_argument("--traces", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=None, help="(b): check --workers N (default: its own)")
    ap.add_argument("--only-b", action="store_true", help="skip (a) and (c)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if not args.only_b:
            p_small, f_small = bench_one_trace(tmp, args.calls // 10, args.repeats)
            p, f = bench_one_trace(tmp, args.calls, args.repeats)
            print(
                f"(a) 1 trace x {args.calls:,} calls, 50 rules: check {f:.2f} s "
                f"({args.calls / f:,.0f} calls/s); json.loads {p:.2f} s; ratio {f / p:.2f}x"
            )
            print(
                f"(c) linearity: {args.calls // 10:,} calls {f_small:.2f} s -> {args.calls:,} calls "
                f"{f:.2f} s: {f / f_small:.1f}x time for 10x calls"
            )
        p, f = bench_many(tmp, args.traces, args.repeats, args.workers)
        calls = args.traces * 20
        print(
            f"(b) {args.traces:,} traces x 20 calls, 20 rules, `seqjudge check` JSONL: {f:.2f} s "
            f"({calls / f:,.0f} calls/s, {args.traces / f:,.0f} traces/s); json.loads {p:.2f} s; "
            f"ratio {f / p:.2f}x"
        )
        from seqjudge.checkpool import worker_count

        workers = worker_count() if args.workers is None else args.workers
        print(
            f"(b) used {workers} worker process(es) after the first lines"
            if workers
            else "(b) ran in one process (--workers 0, one core, or no fork)"
        )
        if hasattr(os, "fork"):
            p, f, size = bench_floor(tmp, args.traces, args.repeats, workers)
            print(
                f"(b) floor, no rules: the same {max(workers, 1)} process(es) parse each line and write a "
                f"{size:,}-byte report for it: {f:.2f} s; json.loads {p:.2f} s; ratio {f / p:.2f}x"
            )
        print(f"medians of {args.repeats} runs, each side by side with its parse-only baseline")


if __name__ == "__main__":
    main()
