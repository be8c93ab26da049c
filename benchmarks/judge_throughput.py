"""Judge throughput: `seqjudge run` over 2,000 traces against the loopback fake server answering with a fixed
delay, through the real OpenAI SDK.

    python benchmarks/judge_throughput.py [--traces 2000] [--delay 0.2] [--concurrency 64]
                                          [--rpm 600] [--rpm-scale 10] [--rpm-traces 1500] [--profile]

Prints:
(a) traces per second at --concurrency against the ideal of concurrency / delay (target >= 90%);
(b) CPU time per judged trace: the whole process's (harness, SDK and HTTP), and the harness's own (ingest,
    engine, redaction, rendering, validation, reconciliation, storage, response cache; target <= 2 ms),
    measured on the same traces against an in-process provider. The fake server runs in a child process,
    so its CPU is not counted;
(c) the achieved rate under an rpm limit against that limit, and the densest sliding window of starts. Time
    is scaled (--rpm-scale 10: a "minute" of 6 s) so that several windows pass in seconds; --rpm-scale 1
    measures in real minutes;
(d) the model calls made by a rerun of the unchanged suite (target 0: the response cache answers).

The traces are the customer-support golden suite repeated under new ids; the server answers every request
with a valid judgement after --delay seconds. --profile prints the top of a cProfile of run (a).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from bisect import bisect_left
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from seqjudge.config import ModelOptions, RunConfig  # noqa: E402
from seqjudge.ingest import load_traces  # noqa: E402
from seqjudge.limits import RateLimiter  # noqa: E402
from seqjudge.rules.load import load_rules  # noqa: E402
from seqjudge.runner import run_traces  # noqa: E402
from seqjudge.store import Store  # noqa: E402

SUITE = ROOT / "golden_traces" / "customer-support"

# The fake server, in its own process: a valid judgement for any trace after a fixed delay, and a request
# count at GET /stats.
SERVER = r"""
import json, sys, threading
sys.path.insert(0, sys.argv[1])
from fakes.server import FakeLLMServer, FakeReply, openai_chat

delay = float(sys.argv[2])
valid = {"sequence_correctness_score": 1.0, "total_rules_checked": 0, "rules_passed": 0, "rules_failed": 0,
         "violations": [], "missing_prerequisites": [], "summary": "No rule is violated."}
lock = threading.Lock()
count = [0]

def responder(request):
    if request.path == "/stats":
        with lock:
            return FakeReply(200, {"requests": count[0]})
    with lock:
        count[0] += 1
    return openai_chat(valid, prompt_tokens=3000, completion_tokens=120, delay=delay)

with FakeLLMServer(responder=responder) as srv:
    print(srv.openai_base_url, flush=True)
    sys.stdin.read()  # until the parent closes stdin
"""


class Server:
    def __init__(self, delay: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(ROOT / "tests"), str(delay)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()

    def requests(self) -> int:
        import urllib.request

        req = urllib.request.Request(
            self.url.removesuffix("/v1") + "/stats", headers={"Authorization": "Bearer test"}
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return int(json.loads(resp.read())["requests"])

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def write_traces(path: Path, n: int, prefix: str = "bench") -> None:
    """The golden traces, repeated under new ids until there are ``n``."""
    base = [json.loads(line) for line in (SUITE / "traces.jsonl").read_text().splitlines() if line.strip()]
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            record = dict(base[i % len(base)])
            record["trace_id"] = f"{prefix}-{i:05d}-{record['trace_id']}"
            # A distinct prompt per trace (the id is not in the prompt): else the response cache would
            # answer the repeats, and this would measure the cache.
            record["context"] = {**(record.get("context") or {}), "session": f"{prefix}-{i:05d}"}
            out.write(json.dumps(record) + "\n")


class RecordingLimiter(RateLimiter):
    """Keeps every admitted start, to find the densest window afterwards."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.log: list[float] = []

    async def acquire(self, tokens: int = 0) -> Any:
        permit = await super().acquire(tokens)
        self.log.append(permit.at)
        return permit


def densest(times: list[float], window: float) -> int:
    ts = sorted(times)
    return max((bisect_left(ts, t + window) - i for i, t in enumerate(ts)), default=0)


def run_once(
    cfg: RunConfig, traces: Path, *, limiter: RateLimiter | None = None, provider: Any = None
) -> tuple[Any, float, float]:
    """(summary, wall seconds, process CPU seconds) of one run over ``traces``."""
    ruleset = load_rules(cfg.rules)
    with Store(cfg.store) as db:
        wall, cpu = time.perf_counter(), time.process_time()
        summary = asyncio.run(
            run_traces(cfg, ruleset, load_traces(traces), db, limiter=limiter, provider=provider)
        )
        return summary, time.perf_counter() - wall, time.process_time() - cpu


class InstantProvider:
    """Answers at once, in-process: the same run without the SDK and HTTP, to see the harness's own share."""

    name = "instant"
    model = "instant-1"

    async def complete(self, request: Any) -> Any:
        from seqjudge.judge.providers.base import ProviderReply, Usage

        await asyncio.sleep(0)
        return ProviderReply(
            text=VALID_TEXT,
            model=self.model,
            finish_reason="stop",
            usage=Usage(input_tokens=3000, output_tokens=120),
        )


VALID_TEXT = json.dumps(
    {
        "sequence_correctness_score": 1.0,
        "total_rules_checked": 0,
        "rules_passed": 0,
        "rules_failed": 0,
        "violations": [],
        "missing_prerequisites": [],
        "summary": "No rule is violated.",
    }
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=int, default=2000)
    ap.add_argument("--delay", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--rpm", type=int, default=600)
    ap.add_argument("--rpm-scale", type=float, default=10.0, help="time compression of the rpm check")
    ap.add_argument("--rpm-traces", type=int, default=1500)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()

    os.environ.setdefault("OPENAI_API_KEY", "test")
    server = Server(args.delay)
    work = Path(tempfile.mkdtemp(prefix="seqjudge-bench-"))
    traces = work / "traces.jsonl"
    write_traces(traces, args.traces)
    cfg = RunConfig(
        rules=str(SUITE / "rules.yaml"),
        traces=str(traces),
        model="openai:gpt-4o",
        model_options=ModelOptions(base_url=server.url),
        store=str(work / "seqjudge.db"),
        concurrency=args.concurrency,
        rpm=0,
        tpm=0,
    )
    try:
        print(f"judge throughput: {args.traces} traces, fake server delay {args.delay * 1000:.0f} ms")
        # Warm-up, not measured: imports (the SDK's alone is ~0.3 s of CPU), the template, connections.
        warm = work / "warm.jsonl"
        write_traces(warm, 2 * args.concurrency, prefix="warm")
        run_once(cfg.model_copy(update={"traces": str(warm), "cache": False}), warm)

        # (a) and (b): throughput and the harness's CPU per trace
        profiler = cProfile.Profile() if args.profile else None
        if profiler:
            profiler.enable()
        before = server.requests()
        summary, wall, cpu = run_once(cfg, traces)
        if profiler:
            profiler.disable()
        calls = server.requests() - before
        ideal = args.concurrency / args.delay
        rate = summary.traces / wall
        print(
            f"(a) concurrency {args.concurrency}: {rate:.1f} traces/s against an ideal of {ideal:.0f}/s "
            f"= {rate / ideal:.1%} (target >= 90%); {summary.traces} traces, {calls} calls, {wall:.2f} s"
        )
        print(
            f"(b) CPU: {cpu * 1000 / summary.traces:.2f} ms per judged trace, the whole process "
            f"(harness, SDK, HTTP); {cpu:.2f} s CPU in {wall:.2f} s"
        )
        alone = work / "alone.jsonl"
        write_traces(alone, args.traces, prefix="alone")
        plain = cfg.model_copy(update={"traces": str(alone), "model": "instant:instant-1"})
        bare, _, bare_cpu = run_once(plain, alone, provider=InstantProvider())
        print(
            f"    of which the harness (ingest, engine, redaction, rendering, validation, reconciliation, "
            f"storage, response cache): {bare_cpu * 1000 / bare.traces:.2f} ms (target <= 2 ms), measured on "
            f"the same traces against an in-process provider; the rest is the OpenAI SDK and its HTTP stack"
        )
        if profiler:
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats(
                os.environ.get("BENCH_SORT", "tottime")
            ).print_stats(40)
            print(out.getvalue())

        # (d) a rerun of the unchanged suite: every request is answered by the response cache
        before = server.requests()
        rerun, rerun_wall, _ = run_once(cfg, traces)
        print(
            f"(d) cached rerun: {server.requests() - before} model calls (target 0); "
            f"{rerun.cache_hits} cache hits, {rerun.traces} traces in {rerun_wall:.2f} s"
        )

        # (c) the rpm limit: a fresh cache, time scaled by --rpm-scale
        window = 60.0 / args.rpm_scale
        limiter = RecordingLimiter(rpm=args.rpm, window=window)
        rpm_traces = work / "rpm.jsonl"
        write_traces(rpm_traces, args.rpm_traces, prefix="rpm")
        rpm_cfg = cfg.model_copy(update={"cache": False, "traces": str(rpm_traces)})
        summary, wall, _ = run_once(rpm_cfg, rpm_traces, limiter=limiter)
        starts = limiter.log
        span = max(starts) - min(starts)
        # Rate over the run: n starts span (n - 1) gaps; a window of the limit holds rpm starts.
        achieved = (len(starts) - 1) / span * window if span else float("nan")
        scaled = f" (time scaled {args.rpm_scale:g}x: a {window:g}-s window)" if args.rpm_scale != 1 else ""
        print(
            f"(c) --rpm {args.rpm}{scaled}: {achieved:.0f} starts per window achieved = "
            f"{achieved / args.rpm:.1%} of the limit; densest sliding window {densest(starts, window)} "
            f"<= {args.rpm}; {len(starts)} calls in {wall:.2f} s"
        )
    finally:
        server.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
