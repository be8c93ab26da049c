"""seqjudge.spark in Spark's local mode: the same reports as `seqjudge check`, byte for byte.

One Spark session serves the whole module (a JVM start costs tens of seconds on these machines).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.errors import PythonException  # pyspark is part of the test extras
from pyspark.sql import SparkSession

from seqjudge import spark as sj
from seqjudge.errors import InfrastructureError, InputError

ROOT = Path(__file__).resolve().parents[1]
SUITES = ["customer-support", "tau-retail", "tau-airline"]
SEQJUDGE = str(Path(sys.executable).with_name("seqjudge"))  # the console script of this environment


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    # The Python workers must be this interpreter (the one seqjudge is installed in), not whatever
    # `python3` is first on PATH; and nothing may listen beyond loopback.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("seqjudge-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def check_lines(suite: str, *extra: str) -> list[bytes]:
    """What `seqjudge check --format jsonl` writes for a suite, one report per line."""
    result = subprocess.run(
        [
            SEQJUDGE,
            "check",
            f"golden_traces/{suite}/rules.yaml",
            f"golden_traces/{suite}/traces.jsonl",
            "--format",
            "jsonl",
            "--workers",
            "0",
            *extra,
        ],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    assert result.returncode in (0, 1), result.stderr.decode()
    return result.stdout.splitlines()


def text_frame(spark: SparkSession, path: Path, partitions: int = 3):  # type: ignore[no-untyped-def]
    return spark.read.text(str(path)).withColumnRenamed("value", "trace").repartition(partitions)


@pytest.mark.parametrize("suite", SUITES)
def test_reports_are_byte_identical_to_check(spark: SparkSession, suite: str) -> None:
    expected = check_lines(suite)
    rows = sj.check(
        text_frame(spark, ROOT / "golden_traces" / suite / "traces.jsonl"),
        ROOT / "golden_traces" / suite / "rules.yaml",
    ).collect()
    got = {row.trace_id: row for row in rows}
    assert len(rows) == len(expected) == len(got)  # one row per trace, none lost or doubled
    for line in expected:
        report = json.loads(line)
        row = got[report["trace_id"]]
        assert row.report.encode("utf-8") == line  # the very bytes check writes
        assert row.verdict == report["verdict"]
        assert row.score == report["sequence_correctness_score"]
        assert row.rules_failed == [r["rule_id"] for r in report["rules"] if r["outcome"] == "failed"]


def test_threshold_risk_level_and_explain_reach_the_executors(spark: SparkSession) -> None:
    suite = "tau-retail"
    expected = check_lines(suite, "--risk-level", "high", "--threshold", "0.95", "--explain", "all")
    assert sorted(expected) != sorted(check_lines(suite, "--risk-level", "high", "--threshold", "0.95"))
    rows = sj.check(
        text_frame(spark, ROOT / "golden_traces" / suite / "traces.jsonl"),
        ROOT / "golden_traces" / suite / "rules.yaml",
        risk_level="high",
        threshold=0.95,
        explain="all",
    ).collect()
    assert sorted(row.report.encode() for row in rows) == sorted(expected)


def test_an_unknown_explain_is_refused_before_any_job(spark: SparkSession) -> None:
    df = spark.createDataFrame([('{"calls": []}',)], "trace string")
    with pytest.raises(InputError, match="explain must be not-passed or all"):
        sj.check(df, ROOT / "golden_traces" / "customer-support" / "rules.yaml", explain="some")  # type: ignore[arg-type]


@pytest.mark.parametrize("suite", SUITES)
def test_struct_columns_give_the_same_reports(spark: SparkSession, suite: str) -> None:
    # The traces as a lake table holds them: Spark's own JSON reader makes trace_id, calls (an array of
    # structs), messages, context and metadata columns. Absent struct fields come back as nulls, which
    # check() reads as absent keys, so the reports are the ones check writes for the JSONL file.
    path = ROOT / "golden_traces" / suite / "traces.jsonl"
    df = spark.read.json(str(path))
    assert "calls" in df.columns and "trace" not in df.columns
    got = sorted(row.report.encode() for row in sj.check(df, path.parent / "rules.yaml").collect())
    assert got == sorted(check_lines(suite))


def test_a_bad_row_fails_the_job_with_its_place(spark: SparkSession) -> None:
    df = spark.createDataFrame(
        [('{"trace_id": "ok", "calls": []}',), ('{"trace_id": "bad", "calls": 7}',)], "trace string"
    ).coalesce(1)
    with pytest.raises(PythonException) as info:
        sj.check(df, ROOT / "golden_traces" / "customer-support" / "rules.yaml").collect()
    text = str(info.value)
    assert "DataFrame partition 0, line 2" in text and "calls" in text


def test_on_error_column_keeps_every_row(spark: SparkSession) -> None:
    df = spark.createDataFrame(
        [('{"trace_id": "a", "calls": [{"tool_name": "VerifyIdentity"}]}',), ("{not json",), (None,)],
        "trace string",
    ).coalesce(1)
    rows = sj.check(
        df, ROOT / "golden_traces" / "customer-support" / "rules.yaml", on_error="column"
    ).collect()
    assert [r.verdict for r in rows] == ["pass", "error", "error"]
    assert rows[0].error is None and rows[0].trace_id == "a"
    assert "line 2" in rows[1].error and "JSON" in rows[1].error
    assert "null" in rows[2].error


def test_frames_without_traces_are_refused_before_any_job(spark: SparkSession) -> None:
    df = spark.createDataFrame([(1,)], "n int")
    with pytest.raises(InputError, match="neither a 'trace' column nor a 'calls' column"):
        sj.check(df, ROOT / "golden_traces" / "customer-support" / "rules.yaml")
    with pytest.raises(InputError, match="not a string"):
        sj.check(
            df.withColumnRenamed("n", "trace"), ROOT / "golden_traces" / "customer-support" / "rules.yaml"
        )


def test_a_bad_rule_file_fails_on_the_driver(spark: SparkSession, tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - id: r\n    type: before\n    first: A\n    then: B\n    typo: 1\n")
    df = spark.createDataFrame([('{"calls": []}',)], "trace string")
    with pytest.raises(InputError, match="typo"):
        sj.check(df, rules)


def test_rule_failure_counts_match_check(spark: SparkSession) -> None:
    suite = "tau-airline"
    expected: Counter[str] = Counter()
    for line in check_lines(suite):
        expected.update(r["rule_id"] for r in json.loads(line)["rules"] if r["outcome"] == "failed")
    results = sj.check(
        text_frame(spark, ROOT / "golden_traces" / suite / "traces.jsonl"),
        ROOT / "golden_traces" / suite / "rules.yaml",
    )
    counts = {row.rule_id: row.traces_failed for row in sj.rule_failure_counts(results).collect()}
    assert counts == dict(expected) and counts


def test_local_mode_without_a_worker_python_runs_the_drivers(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As a session started from a virtual environment without PYSPARK_PYTHON: Spark would run `python3`.
    monkeypatch.delenv("PYSPARK_PYTHON")
    monkeypatch.setattr(spark.sparkContext, "pythonExec", "python3")
    monkeypatch.setattr(sj, "_READY", set())
    frame = text_frame(spark, ROOT / "golden_traces" / "tau-retail" / "traces.jsonl", partitions=1)
    assert sj.check(frame, ROOT / "golden_traces" / "tau-retail" / "rules.yaml").count() == 72
    assert spark.sparkContext.pythonExec == sys.executable


SYSTEM_PYTHON = Path("/root/.pyenv/versions/3.11.7/bin/python3")


@pytest.mark.skipif(
    not SYSTEM_PYTHON.is_file()
    or subprocess.run([SYSTEM_PYTHON, "-c", "import pyarrow"], capture_output=True).returncode == 0,
    reason="needs a Python without pyarrow (or seqjudge) to be the workers'",
)
def test_workers_that_cannot_import_seqjudge_fail_at_once_in_one_sentence(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", str(SYSTEM_PYTHON))
    monkeypatch.setattr(spark.sparkContext, "pythonExec", str(SYSTEM_PYTHON))
    monkeypatch.setattr(sj, "_READY", set())
    tracker = spark.sparkContext.statusTracker()
    jobs = len(tracker.getJobIdsForGroup())
    frame = text_frame(spark, ROOT / "golden_traces" / "tau-retail" / "traces.jsonl", partitions=1)
    with pytest.raises(InfrastructureError) as raised:
        sj.check(frame, ROOT / "golden_traces" / "tau-retail" / "rules.yaml")
    message = str(raised.value)
    assert message.startswith(f"Spark's Python workers ({SYSTEM_PYTHON}) cannot import ")
    assert "pyarrow" in message and "set PYSPARK_PYTHON" in message and sys.executable in message
    assert "\n" not in message and raised.value.exit_code == 3
    # at once: the one-task probe was the only job, the check itself never started
    assert len(tracker.getJobIdsForGroup()) == jobs + 1


def test_the_documented_example_runs(spark: SparkSession, tmp_path: Path) -> None:
    # as written: no PYSPARK_PYTHON (local mode then runs this interpreter's workers)
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    out = tmp_path / "out"
    result = subprocess.run(
        [
            sys.executable,
            "examples/spark/check_lake.py",
            "golden_traces/tau-retail/rules.yaml",
            "golden_traces/tau-retail/traces.jsonl",
            str(out),
            "--master",
            "local[1]",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 1, result.stderr[-2000:]  # some tau-retail traces fail their rules
    assert "72 traces checked" in result.stdout
    results = list((out / "results").glob("*.parquet"))
    counts = (out / "rule_failures.csv").read_text().splitlines()
    assert results and counts[0] == "rule_id,traces_failed" and len(counts) > 1
