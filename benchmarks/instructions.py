"""Instructions a trace of `seqjudge check --format F`, counted by valgrind: a figure the machine's load does
not move, for comparing formats (and checkouts) when wall-clock ratios are too noisy to.

    python benchmarks/instructions.py [--formats jsonl,text,junit] [--workers 0] [--misses] [--src OLD/src]

The workload is benchmarks/engine.py's (b): traces of 20 calls against its 20 rules, as JSONL. Each format
runs `check RULES TRACES --format F --workers W -o FILE` under cachegrind (no cache simulation,
PYTHONHASHSEED=0) over a small and a large file; printed is the difference over the difference in traces,
so that start-up drops out: 1,000 and 3,000 traces with --workers 0 (one process), 2,000 and 4,000 with
workers (a file of 1,000 records or fewer is checked without them), the main process and the workers apart.
Each count takes about a minute; the formats run two at a time. --src puts an older checkout's src first on
PYTHONPATH, to count it the same way. --misses also models a cache of this machine's second level (its
size, ways and line from sysfs, as cachegrind's last level) and prints its data misses a trace: what a
process loses when what it kept was pushed out by the work between two uses (twice as slow a minute).

    python benchmarks/instructions.py --render [--traces 10000] [--formats jsonl,text,junit] [--src OLD/src]

--render counts each format's ``render`` alone, in one process, over the report data of the first N traces:
a fresh writer's first pass (its caches as cold as a worker's over its share of a run) and its second pass
(warm), each with the first-level data-cache misses of cachegrind's cache model, the memory traffic that
instruction counts leave out. Three counts a format (no pass, one, two), run at once.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engine as workload  # noqa: E402  (benchmarks/engine.py: the same traces and rules)
from outputs import write_traces  # noqa: E402


def counts(
    tmp: Path, fmt: str, n: int, workers: int, src: str | None, l2: str | None
) -> dict[int, dict[str, int]]:
    """Each process's (by pid) cachegrind events of one `check` over the first ``n`` traces: instructions,
    and with ``l2`` (cachegrind's --LL=size,ways,line) the data misses of a cache of that shape."""
    out = tmp / f"{fmt}-{n}"
    out.mkdir()
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    if src:
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    argv = ["valgrind", "--tool=cachegrind", f"--cachegrind-out-file={out}/cg.%p"]
    argv += ["--cache-sim=yes", f"--LL={l2}"] if l2 else ["--cache-sim=no"]
    argv += [sys.executable, "-c", "from seqjudge.cli import main; main()", "check"]
    argv += [str(tmp / "rules.yaml"), str(tmp / f"traces{n}.jsonl"), "--format", fmt]
    # Into a regular file, as benchmarks/outputs.py writes: junit writes its cases in place there, where a
    # device or a pipe makes it keep them in a temporary file and copy them at the end.
    argv += ["--workers", str(workers), "-o", str(out / "output")]
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"check --format {fmt} exited {proc.returncode}: {proc.stderr.decode()[-2000:]}")
    (out / "output").unlink()
    found = {}
    for path in out.glob("cg.*"):
        text = path.read_text()
        events = re.search(r"^events:(.*)$", text, re.MULTILINE)
        summary = re.search(r"^summary:(.*)$", text, re.MULTILINE)
        if events and summary:
            found[int(path.suffix[1:])] = dict(
                zip(events.group(1).split(), map(int, summary.group(1).split()), strict=True)
            )
    # A count that is missing would read as zero instructions: said, not printed as a figure.
    if not found:
        raise SystemExit(f"valgrind wrote no instruction count for check --format {fmt} over {n} traces")
    if workers and len(found) < 2:
        raise SystemExit(f"check --format {fmt} --workers {workers} over {n} traces started no worker")
    return found


def per_trace(tmp: Path, fmt: str, workers: int, src: str | None, l2: str | None) -> str:
    small, large = (1000, 3000) if workers == 0 else (2000, 4000)
    a, b = counts(tmp, fmt, small, workers, src, l2), counts(tmp, fmt, large, workers, src, l2)
    span = large - small

    def total(found: dict[int, dict[str, int]], *events: str) -> int:
        return sum(counted[e] for counted in found.values() for e in events)

    line = f"  {fmt:8s} {(total(b, 'Ir') - total(a, 'Ir')) / span / 1000:8.1f}k"
    if workers:
        # The command's process starts first: the lowest pid.
        main = (b[min(b)]["Ir"] - a[min(a)]["Ir"]) / span
        workers_ir = (total(b, "Ir") - total(a, "Ir")) / span - main
        line += f"   main process {main / 1000:.1f}k, workers {workers_ir / 1000:.1f}k"
    if l2:
        misses = (total(b, "DLmr", "DLmw") - total(a, "DLmr", "DLmw")) / span
        line += f"   {misses:5.0f} misses of the {l2.split(',')[0]}-byte cache"
    return line


def l2_shape() -> str:
    """This machine's second-level cache as cachegrind's --LL takes it (size,ways,line), from sysfs; 1 MB,
    8 ways and 64-byte lines (these machines') where it is not there."""
    index = Path("/sys/devices/system/cpu/cpu0/cache/index2")
    try:
        size = (index / "size").read_text().strip()
        ways = int((index / "ways_of_associativity").read_text())
        line = int((index / "coherency_line_size").read_text())
        factor = {"K": 1 << 10, "M": 1 << 20}.get(size[-1], 1)
        return f"{int(size.rstrip('KM')) * factor},{ways},{line}"
    except (OSError, ValueError):
        return f"{1 << 20},8,64"


def render_child(fmt: str, rules: str, traces: str, passes: int) -> None:
    """(--render's child, under valgrind) ``traces`` read twice and checked, then ``passes`` passes of a
    fresh ``fmt`` writer's render, each over a set of its own."""
    import io

    from seqjudge.checkpool import Checker
    from seqjudge.ingest.plain import plain_trace
    from seqjudge.outputs.registry import writer
    from seqjudge.rules.engine import Engine
    from seqjudge.rules.load import load_rules

    ruleset = load_rules(Path(rules))
    checker = Checker(Engine(ruleset), 0.85, "medium")
    with open(traces, encoding="utf-8") as file:
        lines = file.readlines()
    # Each pass renders traces and reports of its own, read and made afresh as a worker's are: a text looked
    # up before keeps its hash, and a writer that looks texts up would find them free the second time. Both
    # sets are made in every count, so the differences hold the renders alone.
    sets = []
    for _ in range(2):
        traces_read = [plain_trace(json.loads(line), None) for line in lines]
        sets.append([(trace, checker.data(trace)) for trace in traces_read])
    # The reports stay alive here, where a worker drops each one once rendered: frozen, no collection walks
    # them. Without this, the full collections that a writer's growing caches set off walk every report kept
    # here and count as the render's (about 19k instructions a trace of junit's first pass over 3,000).
    gc.freeze()
    shown = writer("check", fmt)(io.StringIO(), source=traces, ruleset=ruleset)
    for pairs in sets[:passes]:
        for trace, data in pairs:
            shown.render(trace, data, None)


def render_counts(tmp: Path, fmt: str, n: int, src: str | None) -> str:
    """--render's line for ``fmt``: instructions and D1 misses a trace of a first and a second pass."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    if src:
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    runs = {}
    for passes in (0, 1, 2):
        out = tmp / f"render-{fmt}-{passes}"
        argv = ["valgrind", "--tool=cachegrind", "--cache-sim=yes", f"--cachegrind-out-file={out}"]
        argv += [sys.executable, __file__, "--render-child", fmt, str(tmp / "rules.yaml")]
        argv += [str(tmp / f"traces{n}.jsonl"), str(passes)]
        runs[passes] = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    found = {}
    for passes, proc in runs.items():
        _, err = proc.communicate()
        text = (tmp / f"render-{fmt}-{passes}").read_text() if proc.returncode == 0 else ""
        events = re.search(r"^events:(.*)$", text, re.MULTILINE)
        summary = re.search(r"^summary:(.*)$", text, re.MULTILINE)
        if not (events and summary):
            raise SystemExit(f"no count for the render of {fmt}: {err.decode()[-2000:]}")
        found[passes] = dict(zip(events.group(1).split(), map(int, summary.group(1).split()), strict=True))

    def per(a: dict[str, int], b: dict[str, int]) -> str:
        misses = b["D1mr"] + b["D1mw"] - a["D1mr"] - a["D1mw"]
        return f"{(b['Ir'] - a['Ir']) / n / 1000:7.1f}k instructions, {misses / n:6.0f} D1 misses"

    return f"  {fmt:8s} first pass {per(found[0], found[1])};  second {per(found[1], found[2])}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--formats", default="jsonl,text,junit")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--src", help="an older checkout's src, put first on PYTHONPATH")
    parser.add_argument("--render", action="store_true", help="count each format's render alone")
    parser.add_argument("--misses", action="store_true", help="also count second-level cache misses")
    parser.add_argument("--traces", type=int, default=10000, help="--render's traces")
    parser.add_argument("--render-child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.render_child:
        fmt, rules, traces, passes = args.render_child
        render_child(fmt, rules, traces, int(passes))
        return
    if args.render and args.traces < 1:  # a count a trace over no trace would be a division by zero
        raise SystemExit(f"--traces must be at least 1 (got {args.traces})")
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install -y valgrind)")
    formats = args.formats.split(",")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "rules.yaml").write_text(yaml.safe_dump(workload.rules_20()))
        if args.render:
            write_traces(tmp / f"traces{args.traces}.jsonl", args.traces)
            rows = [render_counts(tmp, fmt, args.traces, args.src) for fmt in formats]
            where = f" (PYTHONPATH={args.src})" if args.src else ""
            print(
                f"a fresh writer's render over {args.traces:,} traces' reports, a trace, cachegrind{where}:"
            )
            print("\n".join(rows))
            return
        write_traces(tmp / "traces4000.jsonl", 4000)
        lines = (tmp / "traces4000.jsonl").read_bytes().splitlines(keepends=True)
        for n in (1000, 2000, 3000):  # the first n of the same traces
            (tmp / f"traces{n}.jsonl").write_bytes(b"".join(lines[:n]))
        with ThreadPoolExecutor(2) as pool:
            l2 = l2_shape() if args.misses else None
            rows = list(pool.map(lambda fmt: per_trace(tmp, fmt, args.workers, args.src, l2), formats))
    where = f" (PYTHONPATH={args.src})" if args.src else ""
    print(f"instructions a trace, `check --format F --workers {args.workers}`, valgrind cachegrind{where}:")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
