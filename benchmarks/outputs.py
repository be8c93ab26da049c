"""Every `seqjudge check` output format side by side: wall time and peak memory, at two trace counts.

    python benchmarks/outputs.py [--traces 20000,100000] [--repeats 3] [--formats jsonl,json,text,...]
                                 [--workers N]

The workload is benchmarks/engine.py's (b): N traces of 20 calls against its 20 rules, as JSONL. Each format
runs as its own `seqjudge check RULES TRACES --format F -o FILE` process, so that its peak
resident memory (the largest process of the run: the command or one of its workers, from wait4) is its own.
Printed per trace count: the median wall time of --repeats runs, the ratio to `jsonl` measured in the same
rounds (formats alternate within a round), the median CPU time (the command and its workers: user and system)
and its ratio to `jsonl`'s, the median peak RSS and the output size. Memory that does not grow from the small
count to the large one is what "streams" means here. On a machine shared with other work the CPU ratio is
the steadier figure: wall time also counts the time the processes waited for a core.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engine as workload  # noqa: E402  (benchmarks/engine.py: the same traces and rules)

FORMATS = ["jsonl", "json", "text", "sarif", "junit", "markdown", "html"]


def write_traces(path: Path, n: int) -> None:
    rng = random.Random(11)
    with path.open("w") as out:
        for k in range(n):
            out.write(json.dumps({"trace_id": f"t{k}", "calls": workload.make_calls(20, rng)}) + "\n")


def run_once(rules: Path, traces: Path, fmt: str, out: Path, workers: int | None) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user and system, of the command and the workers it waited for) and peak
    RSS in bytes (its largest process, workers included) of one `check` process."""
    argv = [sys.executable, "-c", "from seqjudge.cli import main; main()"]
    argv += ["check", str(rules), str(traces), "--format", fmt]
    argv += ["-o", str(out)] + ([] if workers is None else ["--workers", str(workers)])
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode not in (0, 1):
        raise SystemExit(f"check --format {fmt} exited {proc.returncode}: {err}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024  # Linux reports kilobytes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", default="20000,100000", help="comma-separated trace counts")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--workers", type=int, default=None, help="check --workers N (default: its own)")
    args = ap.parse_args()
    formats = args.formats.split(",")
    if "jsonl" not in formats:
        formats.insert(0, "jsonl")  # the reference every ratio is taken against
    counts = [int(n) for n in args.traces.split(",")]
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        rules = tmp / "rules20.yaml"
        rules.write_text(yaml.safe_dump(workload.rules_20()))
        table: dict[int, dict[str, tuple[float, float, float, float, int, int]]] = {}
        for n in counts:
            traces = tmp / f"traces_{n}.jsonl"
            write_traces(traces, n)
            walls: dict[str, list[float]] = {f: [] for f in formats}
            cpus: dict[str, list[float]] = {f: [] for f in formats}
            rss: dict[str, list[int]] = {f: [] for f in formats}
            sizes: dict[str, int] = {}
            for r in range(args.repeats):
                # Alternate the order: a neighbour's load then lands on every format alike.
                for fmt in formats if r % 2 == 0 else list(reversed(formats)):
                    out = tmp / f"out.{fmt}"
                    wall, cpu, peak = run_once(rules, traces, fmt, out, args.workers)
                    walls[fmt].append(wall)
                    cpus[fmt].append(cpu)
                    rss[fmt].append(peak)
                    sizes[fmt] = out.stat().st_size
                    out.unlink()
            base = statistics.median(walls["jsonl"])
            cpu_base = statistics.median(cpus["jsonl"])
            table[n] = {
                f: (
                    statistics.median(walls[f]),
                    statistics.median(walls[f]) / base,
                    statistics.median(cpus[f]),
                    statistics.median(cpus[f]) / cpu_base,
                    int(statistics.median(rss[f])),
                    sizes[f],
                )
                for f in formats
            }
            traces.unlink()
            # Each count's figures as soon as they are measured (a long run on a busy machine).
            print(
                f"{n:,} traces: "
                + ", ".join(
                    f"{f} {table[n][f][0]:.2f} s ({table[n][f][1]:.2f}x; CPU {table[n][f][2]:.2f} s, "
                    f"{table[n][f][3]:.2f}x) {table[n][f][4] / 2**20:.0f} MB"
                    for f in formats
                ),
                flush=True,
            )
        print(
            f"`seqjudge check` over N traces x 20 calls, 20 rules; medians of {args.repeats} runs "
            f"(workers: {'its own' if args.workers is None else args.workers})"
        )
        head = f"{'format':10s}" + "".join(
            f" | {f'{n:,} traces: time, x jsonl, CPU, x jsonl, peak RSS, output':>66s}" for n in counts
        )
        print(head)
        for f in formats:
            cells = []
            for n in counts:
                wall, ratio, cpu, cpu_ratio, peak, size = table[n][f]
                cells.append(
                    f"{wall:7.2f} s {ratio:5.2f}x {cpu:7.2f} s {cpu_ratio:5.2f}x "
                    f"{peak / 2**20:7.0f} MB {size / 2**20:8.1f} MB out"
                )
            print(f"{f:10s}" + "".join(f" | {c:>66s}" for c in cells))
        if len(counts) > 1:
            lo, hi = counts[0], counts[-1]
            print(f"peak RSS at {hi:,} traces over peak RSS at {lo:,} (1.00 = independent of the count):")
            print("    " + ", ".join(f"{f} {table[hi][f][4] / table[lo][f][4]:.2f}" for f in formats))


if __name__ == "__main__":
    main()
