"""Large inputs through the CLI: a 1,000,000-call trace through `seqjudge run` (no model: the engine path,
the store, redaction and the input checks) and a ~200 MB JSONL file through `seqjudge check`.

The inputs are generated in a folder under /tmp (kept between runs; delete it to regenerate). Each command
runs in a fresh child process, and the figures printed are its wall time and its peak resident memory,
read with ``resource.getrusage(RUSAGE_CHILDREN)`` in an intermediate process that waits for nothing else.
``--repeat N`` runs each case N times and prints the median.

    python benchmarks/large_inputs.py                    # both cases, once
    python benchmarks/large_inputs.py --repeat 3 --only check --formats jsonl
    python benchmarks/large_inputs.py --repeat 3 --only memory   # json.load vs check vs run, 1M calls
    python benchmarks/large_inputs.py --only nul --nul-mb 1024    # 1 GB of NUL bytes, no newline (exit 2)
    PYTHONPATH=/path/to/other/src python benchmarks/large_inputs.py   # the same inputs, another seqjudge
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

FOLDER = Path("/tmp/seqjudge-large-inputs")
TOOLS = ["find_user", "get_order_details", "modify_order", "cancel_pending_order", "send_email", "lookup"]
RULES = """rules:
  - {id: auth-first, type: before, first: find_user, then: [modify_order, cancel_pending_order]}
  - {id: details-first, type: before, first: get_order_details, then: cancel_pending_order, same: [order_id]}
  - {id: few-emails, type: max_calls, tool: send_email, max: 1000000}
  - {id: no-admin, type: blocklist, pattern: admin_}
  - id: real-reason
    type: never_after
    trigger: cancel_pending_order
    forbidden: {tool: modify_order, args_match: {reason: '^(?!(no longer needed|ordered by mistake)$)'}}
"""


def call(i: int) -> dict[str, object]:
    tool = TOOLS[i % len(TOOLS)]
    return {"tool_name": tool, "arguments": {"order_id": f"#W{i % 9973}", "reason": "ordered by mistake"}}


def make_inputs(target_mb: int) -> None:
    FOLDER.mkdir(exist_ok=True)
    (FOLDER / "rules.yaml").write_text(RULES, encoding="utf-8")
    big_trace = FOLDER / "trace-1m-calls.jsonl"
    if not big_trace.exists():
        with big_trace.open("w", encoding="utf-8") as out:
            out.write('{"trace_id": "one-million", "calls": [')
            out.write(",".join(json.dumps(call(i)) for i in range(1_000_000)))
            out.write("]}\n")
    document = FOLDER / "trace-1m-calls.json"  # the same trace as one JSON document
    if not document.exists():
        document.write_bytes(big_trace.read_bytes().rstrip(b"\n"))
    many = FOLDER / f"traces-{target_mb}mb.jsonl"
    if not many.exists():
        written, n = 0, 0
        with many.open("w", encoding="utf-8") as out:
            while written < target_mb * 1_000_000:
                line = (
                    json.dumps({"trace_id": f"t{n}", "calls": [call(n * 20 + k) for k in range(20)]}) + "\n"
                )
                out.write(line)
                written += len(line.encode("utf-8"))
                n += 1


def measure(argv: list[str]) -> None:
    """In the intermediate process: run ``argv``, then print wall seconds and the child's peak RSS (MB)."""
    started = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - started
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # Linux: kilobytes
    print(
        json.dumps(
            {"wall_s": wall, "peak_mb": peak_kb / 1024, "rc": done.returncode, "err": done.stderr[-400:]}
        )
    )


def case(argv: list[str], repeat: int) -> dict[str, float]:
    walls, peaks = [], []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, __file__, "--measure", *argv], capture_output=True, text=True, check=True
        ).stdout
        figures = json.loads(out.strip().splitlines()[-1])
        if figures["rc"] not in (0, 1):
            raise SystemExit(f"{' '.join(argv)} failed (exit {figures['rc']}): {figures['err']}")
        walls.append(figures["wall_s"])
        peaks.append(figures["peak_mb"])
    return {"wall_s": statistics.median(walls), "peak_mb": statistics.median(peaks)}


def memory(seqjudge: list[str], repeat: int) -> None:
    """Peak memory on one trace of 1,000,000 calls (a JSON document), side by side: json.load of the file,
    `check --format jsonl` and `run` without a model (issue 19's target for check: <= 1.5x json.load)."""
    document = FOLDER / "trace-1m-calls.json"
    rules = str(FOLDER / "rules.yaml")
    store = FOLDER / "memory.db"
    load = "import json, sys; json.load(open(sys.argv[1], encoding='utf-8'))"  # text, as a user's script
    cases = {
        "json.load": [sys.executable, "-c", load],
        "check --format jsonl": [*seqjudge, "check", rules, "--format", "jsonl", "-o", os.devnull],
        "run (no model)": [*seqjudge, "run", rules, "--store", str(store)],
    }
    figures: dict[str, dict[str, float]] = {}
    for name, argv in cases.items():
        for leftover in FOLDER.glob("memory.db*"):
            leftover.unlink()
        # The trace goes where each command takes it: json.load's argument, seqjudge's TRACES.
        at = 3 if name == "json.load" else len(seqjudge) + 2
        figures[name] = case([*argv[:at], str(document), *argv[at:]], repeat)
    base = figures["json.load"]["peak_mb"]
    size = document.stat().st_size / 1e6
    print(f"memory, 1 trace x 1,000,000 calls ({size:.0f} MB JSON document), peak RSS (median of {repeat}):")
    for name, fig in figures.items():
        ratio = fig["peak_mb"] / base
        goal = f"  target <= 1.5x {'✔' if ratio <= 1.5 else '✘'}" if name.startswith("check") else ""
        print(f"    {name:22s}{fig['peak_mb']:7.0f} MB  {ratio:4.2f}x   {fig['wall_s']:6.1f} s wall{goal}")


def nul_line(seqjudge: list[str], mb: int, repeat: int) -> None:
    """Issue 38.6: a file of ``mb`` MB of NUL bytes without a newline reached 2.2 GB RSS before its error.
    Lines are read at most SEQJUDGE_MAX_RECORD_BYTES (256 MiB by default) at a time: the peak is about the
    limit, whatever the file's size, and the command ends with exit 2 naming the limit."""
    path = FOLDER / f"nul-{mb}mb.json"
    if not path.exists() or path.stat().st_size != mb << 20:
        FOLDER.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as out:
            for _ in range(mb):
                out.write(bytes(1 << 20))
    argv = [*seqjudge, "check", str(FOLDER / "rules.yaml"), str(path), "-o", os.devnull]
    walls, peaks = [], []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, __file__, "--measure", *argv], capture_output=True, text=True, check=True
        ).stdout
        figures = json.loads(out.strip().splitlines()[-1])
        if figures["rc"] != 2:
            raise SystemExit(f"expected exit 2, got {figures['rc']}: {figures['err']}")
        walls.append(figures["wall_s"])
        peaks.append(figures["peak_mb"])
    print(
        f"check {mb} MB of NUL bytes, no newline: exit 2, {statistics.median(walls):.1f} s wall, "
        f"{statistics.median(peaks):.0f} MB peak RSS (median of {repeat}; "
        f"limit {os.environ.get('SEQJUDGE_MAX_RECORD_BYTES', '268435456')} bytes)"
    )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--measure":
        measure(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--mb", type=int, default=200, help="size of the JSONL file for check")
    parser.add_argument("--only", choices=["run", "check", "memory", "nul"])
    parser.add_argument("--nul-mb", type=int, default=1024, help="size of the NUL-byte file (--only nul)")
    parser.add_argument("--formats", default="jsonl,text", help="check's output formats to measure")
    args = parser.parse_args()
    seqjudge = [
        sys.executable,
        "-c",
        "import sys; from seqjudge.cli import main; sys.argv[0] = 'seqjudge'; main()",
    ]
    if args.only == "nul":  # needs only the rules of the other cases
        FOLDER.mkdir(parents=True, exist_ok=True)
        (FOLDER / "rules.yaml").write_text(RULES, encoding="utf-8")
        nul_line(seqjudge, args.nul_mb, args.repeat)
        return
    make_inputs(args.mb)
    store = FOLDER / "store.db"
    print(f"inputs in {FOLDER}; seqjudge from {os.environ.get('PYTHONPATH') or 'the installed package'}")
    if args.only in (None, "run"):
        for leftover in FOLDER.glob("store.db*"):
            leftover.unlink()
        figures = case(
            [
                *seqjudge,
                "run",
                str(FOLDER / "rules.yaml"),
                str(FOLDER / "trace-1m-calls.jsonl"),
                "--store",
                str(store),
            ],
            args.repeat,
        )
        size = (FOLDER / "trace-1m-calls.jsonl").stat().st_size / 1e6
        print(
            f"run   1 trace x 1,000,000 calls ({size:.0f} MB), no model: "
            f"{figures['wall_s']:.1f} s wall, {figures['peak_mb']:.0f} MB peak RSS (median of {args.repeat})"
        )
    if args.only in (None, "memory"):
        memory(seqjudge, args.repeat)
    if args.only in (None, "check"):
        path = FOLDER / f"traces-{args.mb}mb.jsonl"
        for fmt in args.formats.split(","):
            figures = case(
                [
                    *seqjudge,
                    "check",
                    str(FOLDER / "rules.yaml"),
                    str(path),
                    "--format",
                    fmt,
                    "-o",
                    os.devnull,
                ],
                args.repeat,
            )
            print(
                f"check {path.stat().st_size / 1e6:.0f} MB JSONL, --format {fmt}: "
                f"{figures['wall_s']:.1f} s wall, {figures['peak_mb']:.0f} MB peak RSS "
                f"(median of {args.repeat})"
            )


if __name__ == "__main__":
    main()
