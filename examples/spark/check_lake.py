"""Check agent traces kept in a data lake with Spark, and write per-rule failure counts.

    python examples/spark/check_lake.py RULES INPUT OUT [--master local[2]] [--catalog tools.json]

INPUT is JSONL (one native trace per line; a file or a folder of *.jsonl) or Parquet (a `trace` string column,
or `trace_id` + `calls` columns). OUT gets:
- results/        Parquet: trace_id, verdict, score, rules_failed, report (the report as `seqjudge check
                  --format jsonl` writes it), partitioned by Spark as it likes;
- rule_failures.csv  rule_id,traces_failed — how many traces failed each rule, most first.

Exit codes follow `seqjudge check`: 0 every trace passed, 1 some failed, 2 bad input (including an input
with no trace at all: nothing checked is not a pass), 3 when Spark's Python workers cannot run seqjudge (in
local mode they run this interpreter unless PYSPARK_PYTHON names another).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from seqjudge import spark as sj
from seqjudge.errors import SeqjudgeError


def read(session: SparkSession, path: str):  # type: ignore[no-untyped-def]
    if path.endswith(".parquet") or (Path(path).is_dir() and any(Path(path).glob("*.parquet"))):
        return session.read.parquet(path)
    return session.read.text(path).withColumnRenamed("value", "trace").where(F.trim("trace") != "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rules")
    parser.add_argument("input")
    parser.add_argument("out")
    parser.add_argument("--master", default=None, help="Spark master (default: the session's own)")
    parser.add_argument("--catalog", default=None)
    args = parser.parse_args()

    builder = SparkSession.builder.appName("seqjudge-check")
    if args.master:
        builder = builder.master(args.master)
    session = builder.getOrCreate()
    try:
        results = sj.check(read(session, args.input), args.rules, catalog=args.catalog).cache()
        totals = {row.verdict: row["count"] for row in results.groupBy("verdict").count().collect()}
        n = sum(totals.values())
        if n == 0:
            print(f"no traces in {args.input}: nothing was checked", file=sys.stderr)
            return 2
        out = Path(args.out)
        results.write.mode("overwrite").parquet(str(out / "results"))
        counts = sj.rule_failure_counts(results).collect()
        with (out / "rule_failures.csv").open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["rule_id", "traces_failed"])
            writer.writerows((row.rule_id, row.traces_failed) for row in counts)
        failed = n - totals.get("pass", 0)
        print(
            f"{n} traces checked: {totals.get('pass', 0)} passed, {failed} did not; "
            f"per-rule counts in {out / 'rule_failures.csv'}"
        )
        return 0 if failed == 0 else 1
    except SeqjudgeError as exc:  # bad input (2), or workers that cannot import seqjudge (3): one sentence
        print(exc, file=sys.stderr)
        return exc.exit_code
    finally:
        session.stop()


if __name__ == "__main__":
    sys.exit(main())
