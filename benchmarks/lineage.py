"""What lineage rules cost: the engine benchmark's workloads with 5 lineage rules added, side by side.

    python benchmarks/lineage.py [--repeats 3] [--calls 1000000] [--traces 100000]

(a) engine.py's (a): one trace of N calls against its 50 rules, through `seqjudge check --format jsonl`
    (in-process CLI), with and without 5 lineage rules; every `get_order` call's output holds its order id
    and key, as a lookup's would. Target: the lineage rules cost at most 1.3x the same check without them.
(b) linearity: 5 lineage rules alone over T and T/10 traces of 20 calls; the time ratio (10 is linear).
Medians of --repeats runs; the variants alternate within each run.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine import SAME_KEY, make_calls, rules_50, timed  # noqa: E402

from seqjudge.cli import run as cli  # noqa: E402

LINEAGE = [
    {
        "id": "cancel-order-looked-up",
        "type": "lineage",
        "tool": "cancel_order",
        "argument": "order_id",
        "from": [{"output": "get_order", "path": "order_id"}, {"user": True}],
    },
    {
        "id": "cancel-order-anywhere",
        "type": "lineage",
        "tool": "cancel_order",
        "argument": "order_id",
        "from": [{"output": "get_order"}],
    },
    {
        "id": "cancel-order-normalised",
        "type": "lineage",
        "tool": "cancel_order",
        "argument": "order_id",
        "from": [{"output": "get_order", "path": "order_id"}],
        "normalize": ["trim", "lowercase", "strip_hash"],
    },
    {
        "id": "key-from-a-lookup",
        "type": "lineage",
        "tool": "tool_04",
        "argument": SAME_KEY,
        "from": [{"output": "get_order", "path": SAME_KEY}],
    },
    {
        "id": "q-listed",
        "type": "lineage",
        "tool": "tool_03",
        "argument": "q",
        "from": [{"values": list(range(97))}],
    },
]


def with_outputs(calls: list[dict]) -> list[dict]:
    """Every successful get_order returns its order and key, as a lookup's output (JSON text)."""
    for call in calls:
        if call["tool_name"] == "get_order" and call["status"] == "ok":
            arguments = call["arguments"]
            output = {"order_id": arguments["order_id"], SAME_KEY: arguments[SAME_KEY], "status": "pending"}
            call["output"] = json.dumps(output)
    return calls


def check(rules: Path, traces: Path) -> None:
    code = cli(["check", str(rules), str(traces), "--format", "jsonl", "--workers", "0", "-o", "/dev/null"])
    assert code in (0, 1), code


def side_by_side(work: dict[str, Callable[[], None]], repeats: int) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in work}
    for _ in range(repeats):
        for name, fn in work.items():
            times[name].append(timed(fn))
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--calls", type=int, default=1_000_000)
    ap.add_argument("--traces", type=int, default=100_000)
    args = ap.parse_args()
    if args.repeats < 1 or args.calls < 10 or args.traces < 10:
        ap.error("--repeats >= 1, --calls >= 10, --traces >= 10")
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        base = rules_50()
        (tmp / "base.yaml").write_text(yaml.safe_dump(base))
        (tmp / "lineage.yaml").write_text(yaml.safe_dump({"rules": base["rules"] + LINEAGE}))
        (tmp / "only.yaml").write_text(yaml.safe_dump({"rules": LINEAGE}))
        calls = with_outputs(make_calls(args.calls, rng))
        (tmp / "a.json").write_text(json.dumps({"trace_id": "a", "calls": calls}))
        m = side_by_side(
            {
                "50 rules": lambda: check(tmp / "base.yaml", tmp / "a.json"),
                "50 rules + 5 lineage": lambda: check(tmp / "lineage.yaml", tmp / "a.json"),
            },
            args.repeats,
        )
        ratio = m["50 rules + 5 lineage"] / m["50 rules"]
        print(f"(a) one trace of {args.calls:,} calls (median of {args.repeats}, CPU s):")
        for k, v in m.items():
            print(f"    {k:24} {v:7.2f} s")
        print(f"    ratio {ratio:.2f}x (target <= 1.3x) {'✔' if ratio <= 1.3 else '✘'}")

        for n in (args.traces // 10, args.traces):
            with (tmp / f"b{n}.jsonl").open("w") as f:
                for k in range(n):
                    f.write(
                        json.dumps({"trace_id": f"t{k}", "calls": with_outputs(make_calls(20, rng))}) + "\n"
                    )
        small, large = args.traces // 10, args.traces
        m = side_by_side(
            {
                f"{small:,} traces": lambda: check(tmp / "only.yaml", tmp / f"b{small}.jsonl"),
                f"{large:,} traces": lambda: check(tmp / "only.yaml", tmp / f"b{large}.jsonl"),
            },
            args.repeats,
        )
        t_small, t_large = m[f"{small:,} traces"], m[f"{large:,} traces"]
        print(f"(b) 5 lineage rules over traces of 20 calls (median of {args.repeats}, CPU s):")
        print(f"    {small:>9,} traces {t_small:7.2f} s ({small / t_small:,.0f} traces/s)")
        print(f"    {large:>9,} traces {t_large:7.2f} s ({large / t_large:,.0f} traces/s)")
        print(f"    ratio {t_large / t_small:.2f} for 10x the traces (10 is linear)")


if __name__ == "__main__":
    main()
