"""seqjudge.spark against single-process `seqjudge check`, on the engine benchmark's many-traces workload.

    python benchmarks/spark.py [--traces 100000] [--repeats 3] [--masters local[1],local[2]]

The workload is benchmarks/engine.py's (b): N traces of 20 calls against its 20 rules, as JSONL. Printed, as
medians of --repeats runs measured in one process:
- parse-only: json.loads of every line (the floor every reader pays);
- `seqjudge check --format jsonl --workers 0`: the engine in this one process;
- seqjudge.spark.check in Spark's local mode with 1 and 2 cores, reading the same file and running every
  trace through the engine (a `noop` sink, so that no output format is timed), after a warm-up job; the
  session's start is reported apart, since a cluster pays it once.
Throughput per core is traces per second divided by the cores used: the scaling claim is that figure staying
flat from local[1] to local[2] (on a 2-core machine the second core is shared with the driver and the JVM).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engine as workload  # noqa: E402  (benchmarks/engine.py: the same traces and rules)


def timed(fn) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--masters", default="local[1],local[2]")
    args = ap.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable  # executors must run this interpreter, where seqjudge is
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from seqjudge import spark as sj
    from seqjudge.cli import run

    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        rng = random.Random(11)
        path = tmp / "many.jsonl"
        with path.open("w") as out:
            for k in range(args.traces):
                out.write(json.dumps({"trace_id": f"t{k}", "calls": workload.make_calls(20, rng)}) + "\n")
        rules = tmp / "rules20.yaml"
        rules.write_text(yaml.safe_dump(workload.rules_20()))
        size_mb = path.stat().st_size / 1e6

        def parse_only() -> None:
            with path.open("rb") as f:
                for line in f:
                    json.loads(line)

        def one_process() -> None:
            code = run(
                [
                    "check",
                    str(rules),
                    str(path),
                    "--format",
                    "jsonl",
                    "--workers",
                    "0",
                    "--output",
                    str(tmp / "out.jsonl"),
                ]
            )
            assert code in (0, 1), code

        parse = statistics.median(timed(parse_only) for _ in range(args.repeats))
        single = statistics.median(timed(one_process) for _ in range(args.repeats))
        print(
            f"workload: {args.traces:,} traces x 20 calls, 20 rules, {size_mb:.0f} MB JSONL; "
            f"medians of {args.repeats} (machine load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
        )
        print(f"{'':34} {'seconds':>8} {'x parse':>8} {'traces/s':>10} {'per core':>10}")

        def row(name: str, seconds: float, cores: int) -> None:
            rate = args.traces / seconds
            print(f"{name:34} {seconds:8.2f} {seconds / parse:7.2f}x {rate:10,.0f} {rate / cores:10,.0f}")

        row("json.loads, every line", parse, 1)
        row("seqjudge check, one process", single, 1)

        for master in args.masters.split(","):
            cores = int(master.split("[")[1].rstrip("]")) if "[" in master else 1
            start = time.perf_counter()
            session = (
                SparkSession.builder.master(master)
                .appName("seqjudge-bench")
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.driver.host", "127.0.0.1")
                .config("spark.driver.bindAddress", "127.0.0.1")
                .config("spark.sql.files.maxPartitionBytes", str(8 << 20))  # several tasks per core
                .getOrCreate()
            )
            session.sparkContext.setLogLevel("ERROR")
            started = time.perf_counter() - start

            def spark_check(session: SparkSession = session) -> None:
                df = session.read.text(str(path)).withColumnRenamed("value", "trace")
                sj.check(df, rules).write.format("noop").mode("overwrite").save()

            spark_check()  # warm-up: Python workers start, the rules compile once per worker
            seconds = statistics.median(timed(spark_check) for _ in range(args.repeats))
            row(f"seqjudge.spark.check, {master}", seconds, cores)
            print(f"{'':34} (session start {started:.1f} s, not counted)")
            session.stop()


if __name__ == "__main__":
    main()
