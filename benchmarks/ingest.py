"""Ingest speed and memory, per trace format.

For each format (native, openai, anthropic, otel, assay) this writes a JSONL file of generated records to a
temporary directory, then reads it with ``seqjudge.ingest.load_traces`` in a fresh child process and prints
records per second, traces and calls per second, the ratio to merely ``json.loads``-ing every line, and the
child's peak resident memory (``ru_maxrss``). It does this at two sizes (``--records`` and a quarter of it):
streaming holds memory flat when the peak barely moves while the input grows fourfold; what does grow is the
duplicate-id index (about a hundred bytes a trace), which the benchmark reports per trace.

    python benchmarks/ingest.py                 # 50,000 records per format
    python benchmarks/ingest.py --records 5000  # quicker
    python benchmarks/ingest.py --formats native,otel
    python benchmarks/ingest.py --detect        # let the loader detect each format (whole-input detection)
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

CALLS = 10  # tool calls per generated conversation / trace
TOOLS = ["get_user", "get_order", "search_flights", "book_flight", "cancel_order", "send_email"]


# --- generators: one record (a JSONL line) at a time ------------------------------------------------------


def _args(i: int, k: int) -> dict[str, Any]:
    return {"order_id": f"#W{i % 997}{k}", "reason": "customer asked", "amount": (i * 7 + k) % 500}


def native(n: int) -> Iterator[dict[str, Any]]:
    for i in range(n):
        calls = [
            {
                "tool_name": TOOLS[(i + k) % len(TOOLS)],
                "arguments": _args(i, k),
                "status": "ok",
                "output": "done",
            }
            for k in range(CALLS)
        ]
        yield {"trace_id": f"t{i}", "calls": calls, "metadata": {"n": i}}


def openai(n: int) -> Iterator[dict[str, Any]]:
    for i in range(n):
        messages: list[dict[str, Any]] = [{"role": "user", "content": f"Help with order {i}."}]
        for k in range(CALLS):
            call_id = f"call_{i}_{k}"
            function = {"name": TOOLS[(i + k) % len(TOOLS)], "arguments": json.dumps(_args(i, k))}
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": call_id, "type": "function", "function": function}],
                }
            )
            messages.append(
                {"role": "tool", "tool_call_id": call_id, "content": "Error: no" if k == 3 else "ok"}
            )
        messages.append({"role": "assistant", "content": "All done."})
        yield {"trace_id": f"c{i}", "messages": messages}


def anthropic(n: int) -> Iterator[dict[str, Any]]:
    for i in range(n):
        messages: list[dict[str, Any]] = [{"role": "user", "content": f"Help with order {i}."}]
        for k in range(CALLS):
            use_id = f"toolu_{i}_{k}"
            messages.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Checking."},
                        {
                            "type": "tool_use",
                            "id": use_id,
                            "name": TOOLS[(i + k) % len(TOOLS)],
                            "input": _args(i, k),
                        },
                    ],
                }
            )
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": use_id, "content": "ok", "is_error": k == 3},
                    ],
                }
            )
        yield {"trace_id": f"a{i}", "messages": messages}


def _attr(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def otel(n: int) -> Iterator[dict[str, Any]]:
    """One OTLP/JSON export request a line, each holding one whole agent run (root span + tool spans)."""
    base = 1_700_000_000_000_000_000
    for i in range(n):
        trace_id = f"{i:032x}"
        start = base + i * 100_000_000_000
        spans = []
        for k in range(CALLS):
            spans.append(
                {
                    "traceId": trace_id,
                    "spanId": f"{k + 2:016x}",
                    "parentSpanId": f"{1:016x}",
                    "name": f"execute_tool {TOOLS[(i + k) % len(TOOLS)]}",
                    "kind": 1,
                    "startTimeUnixNano": str(start + k * 1_000_000_000),
                    "endTimeUnixNano": str(start + k * 1_000_000_000 + 500_000_000),
                    "attributes": [
                        _attr("gen_ai.operation.name", "execute_tool"),
                        _attr("gen_ai.tool.name", TOOLS[(i + k) % len(TOOLS)]),
                        _attr("gen_ai.tool.call.arguments", json.dumps(_args(i, k))),
                    ],
                    "status": {"code": 2, "message": "failed"} if k == 3 else {},
                }
            )
        spans.append(
            {
                "traceId": trace_id,
                "spanId": f"{1:016x}",
                "parentSpanId": "",
                "name": "invoke_agent",
                "kind": 1,
                "startTimeUnixNano": str(start),
                "endTimeUnixNano": str(start + 20_000_000_000),
                "attributes": [_attr("gen_ai.operation.name", "invoke_agent")],
                "status": {},
            }
        )
        yield {
            "resourceSpans": [
                {
                    "resource": {"attributes": [_attr("service.name", "agent")]},
                    "scopeSpans": [{"scope": {"name": "bench"}, "spans": spans}],
                }
            ]
        }


def assay(n: int) -> Iterator[dict[str, Any]]:
    """Assay V2 events: an episode is episode_start, CALLS tool_call events and episode_end (one a line)."""
    episodes = max(1, n // (CALLS + 2))
    for i in range(episodes):
        episode = f"ep{i}"
        ts = 1_700_000_000_000 + i * 100_000
        yield {
            "type": "episode_start",
            "episode_id": episode,
            "timestamp": ts,
            "input": {"prompt": f"task {i}"},
        }
        for k in range(CALLS):
            event: dict[str, Any] = {
                "type": "tool_call",
                "episode_id": episode,
                "step_id": f"s{k}",
                "timestamp": ts + 10 * (k + 1),
                "tool_name": TOOLS[(i + k) % len(TOOLS)],
                "call_index": 0,
                "args": _args(i, k),
                "result": "ok",
            }
            if k == 3:
                event["error"] = "failed"
            yield event
        yield {"type": "episode_end", "episode_id": episode, "timestamp": ts + 999, "outcome": "pass"}


GENERATORS: dict[str, Callable[[int], Iterator[dict[str, Any]]]] = {
    "native": native,
    "openai": openai,
    "anthropic": anthropic,
    "otel": otel,
    "assay": assay,
}


# --- measuring --------------------------------------------------------------------------------------------


def write(path: Path, records: Iterator[dict[str, Any]]) -> int:
    count = 0
    with path.open("w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record, separators=(",", ":")))
            out.write("\n")
            count += 1
    return count


def child(path: str, trace_format: str) -> None:
    """Run in a fresh process: read every trace, print JSON figures (ru_maxrss is this process's own peak)."""
    from seqjudge.ingest import load_traces

    started = time.perf_counter()
    traces = calls = 0
    forced = None if trace_format == "auto" else trace_format
    for trace in load_traces(path, format=forced, error_pattern="^Error"):
        traces += 1
        calls += len(trace.calls)
    seconds = time.perf_counter() - started
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({"seconds": seconds, "traces": traces, "calls": calls, "peak_mb": peak_kb / 1024}))


def loads_seconds(path: Path) -> float:
    started = time.perf_counter()
    with path.open("rb") as lines:
        for line in lines:
            json.loads(line)
    return time.perf_counter() - started


def measure(path: Path, trace_format: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(path), trace_format],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=50_000, help="records (JSONL lines) per format")
    parser.add_argument("--formats", default=",".join(GENERATORS), help="comma-separated formats to measure")
    parser.add_argument("--detect", action="store_true", help="detect each format instead of naming it")
    parser.add_argument("--child", nargs=2, metavar=("PATH", "FORMAT"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        child(*options.child)
        return
    formats = [f.strip() for f in options.formats.split(",") if f.strip()]
    sizes = [max(1, options.records // 4), options.records]
    print(
        f"ingest benchmark: {CALLS} calls per trace; sizes {sizes[0]:,} and {sizes[1]:,} records per format"
    )
    header = (
        f"{'format':<10}{'records':>9}{'MB':>8}{'traces':>9}{'records/s':>11}{'calls/s':>11}"
        f"{'x loads':>9}{'peak MB':>9}"
    )
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory(prefix="seqjudge-bench-") as folder:
        for name in formats:
            peaks, traces, sizes_mb = [], [], []
            for size in sizes:
                path = Path(folder) / f"{name}-{size}.jsonl"
                records = write(path, GENERATORS[name](size))
                figures = measure(path, "auto" if options.detect else name)
                baseline = loads_seconds(path)
                seconds = figures["seconds"]
                megabytes = path.stat().st_size / 1e6
                peaks.append(figures["peak_mb"])
                traces.append(figures["traces"])
                sizes_mb.append(megabytes)
                print(
                    f"{name:<10}{records:>9,}{megabytes:>8.1f}{figures['traces']:>9,}"
                    f"{records / seconds:>11,.0f}{figures['calls'] / seconds:>11,.0f}"
                    f"{seconds / baseline:>9.2f}{figures['peak_mb']:>9.1f}"
                )
                path.unlink()
            # What remains per trace is the duplicate-id index (an id and a packed place, ~100-200 bytes); a
            # reader that kept records would grow by at least a record's size per record read.
            grown = max(0.0, peaks[1] - peaks[0])
            per_trace = grown * 1e6 / max(1, traces[1] - traces[0])
            per_record = (sizes_mb[1] - sizes_mb[0]) * 1e6 / max(1, traces[1] - traces[0])
            verdict = "flat, no record kept" if per_trace < per_record / 2 else "GROWS: records are kept"
            print(
                f"{'':<10}memory {verdict}: peak {peaks[0]:.1f} -> {peaks[1]:.1f} MB for "
                f"+{sizes_mb[1] - sizes_mb[0]:.0f} MB of input (~{per_trace:.0f} bytes a trace, "
                f"{per_record:,.0f} bytes of input a trace)"
            )


if __name__ == "__main__":
    main()
