"""Check traces held in a Spark DataFrame with the deterministic engine, on Spark's executors.

``check(df, rules)`` returns a DataFrame with one row per input row: ``trace_id``, ``verdict``, ``score``,
``rules_failed`` and ``report`` (the trace's report as ``seqjudge check --format jsonl`` writes it, without
the newline). It is the same code as ``seqjudge check`` on one machine: every row is read by the native
importer and checked by ``checkpool.Checker``, so a row's report is byte for byte the line ``check`` writes
for the same trace (tests/test_spark.py holds the two to that).

Why this shape:
- The rule set is loaded and validated on the driver, so a bad rule file fails before any job starts, with
  the usual message. It travels to the executors once, as a broadcast of its JSON, and each Python worker
  compiles it once (``_ENGINES``), not once per row or per batch.
- Rows travel as Arrow batches (``mapInArrow``): no per-row Python<->JVM round trip, and the trace text is
  handed to the parser as the bytes Arrow already holds.
- A row that is not a valid trace raises by default (fail closed: a lake with a broken writer should not
  look clean). ``on_error="column"`` keeps going and puts the message in an ``error`` column, with
  ``verdict`` ``"error"``, so such rows can be counted and inspected instead.
- The Python workers must import seqjudge. In local mode with no worker interpreter named
  (``PYSPARK_PYTHON``, ``spark.pyspark.python``), they run the driver's (``sys.executable``), not whatever
  ``python3`` is first on PATH: from a virtual environment that one has no seqjudge. Before the first job of
  a session (and interpreter) a one-task job asks the workers to import what the check needs; one that
  cannot fails at once with one sentence saying what to set or install, not a worker's long traceback
  after a minute of retries (``_workers``).

pyspark and pyarrow are imported only here and only when a function runs: the rest of seqjudge never needs
them (``pip install 'seqjudge[spark]'``).
"""

from __future__ import annotations

import builtins
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from seqjudge.errors import InfrastructureError, InputError, SeqjudgeError
from seqjudge.report import DEFAULT_THRESHOLD, EXPLAIN_CHOICES, Explain, RiskLevel

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from seqjudge.checkpool import Checker
    from seqjudge.rules.model import RuleSet

__all__ = ["OUTPUT_FIELDS", "check", "rule_failure_counts"]

OUTPUT_FIELDS = ("trace_id", "verdict", "score", "rules_failed", "report")
# Columns of the struct form that make up a native trace; any other column is the caller's and stays out.
TRACE_FIELDS = ("trace_id", "calls", "messages", "context", "metadata")

OnError = Literal["raise", "column"]

# One compiled engine per Python worker process and rule set (keyed by the broadcast's JSON), so that the
# rules are compiled once per worker rather than once per task or batch.
_ENGINES: dict[tuple[str, float, str, str], Checker] = {}

# (application id, worker interpreter) whose workers were seen to import seqjudge: probed once, not per call.
_READY: set[tuple[str, str]] = set()
# Run on a worker: what it cannot import of what a check needs. Compiled from text (``_probe``) so that it
# travels by value and needs nothing of seqjudge to arrive: it must run where seqjudge is missing.
_PROBE = """
def probe(_):
    import sys
    missing = []
    for name in ("seqjudge.spark", "pyarrow"):
        try:
            __import__(name)
        except ImportError as exc:
            top = name.split(".")[0]
            missing.append(top if exc.name in (None, name, top) else f"{top} (it needs {exc.name})")
    return sys.executable, missing
"""


def _require_spark() -> Any:
    try:
        import pyarrow  # noqa: F401
        import pyspark
    except ImportError as exc:  # the extra is optional: say how to get it rather than a bare traceback
        raise InputError(
            f"seqjudge.spark needs pyspark and pyarrow, which are not installed ({exc.name} is missing)",
            hint="Install them with: pip install 'seqjudge[spark]'",
        ) from None
    return pyspark


def _probe() -> Callable[[Any], tuple[str, list[str]]]:
    namespace: dict[str, Any] = {"__builtins__": builtins, "__name__": "seqjudge_worker_probe"}
    exec(compile(_PROBE, "<seqjudge worker probe>", "exec"), namespace)  # noqa: S102 - our own constant
    return namespace["probe"]  # type: ignore[no-any-return]


def _workers(session: Any) -> None:
    """Make sure the session's Python workers can run the check: pick the driver's interpreter in local mode
    when none is named, then ask the workers once (per application and interpreter) to import seqjudge."""
    try:
        context = session.sparkContext
    except Exception:  # Spark Connect: no SparkContext here; the server's workers are configured there
        return
    named = os.environ.get("PYSPARK_PYTHON") or context.getConf().get("spark.pyspark.python")
    if not named and str(context.master).startswith("local"):
        # Functions take the interpreter from the context when they are wrapped: the next job uses this one.
        context.pythonExec = sys.executable
    interpreter = str(context.pythonExec)
    key = (str(context.applicationId), interpreter)
    if key in _READY:
        return
    fix = (
        "set PYSPARK_PYTHON (or spark.pyspark.python) to a Python that has seqjudge[spark] installed (this "
        f"driver's is {sys.executable}), or install seqjudge[spark] into {interpreter}"
    )
    try:
        ((where, missing),) = context.parallelize([0], 1).map(_probe()).collect()
    except Exception as exc:  # the workers did not start or died: Spark's error is a page of JVM stack
        raise InfrastructureError(
            f"Spark's Python workers ({interpreter}) could not run a one-task job "
            f"({_first_line(exc)}): {fix}."
        ) from None
    if missing:
        raise InfrastructureError(
            f"Spark's Python workers ({where}) cannot import {', '.join(missing)}: {fix}."
        )
    _READY.add(key)


def _first_line(exc: BaseException) -> str:
    """The line of a Spark/JVM error that says what went wrong, shortened: not its stack."""
    lines = [line.strip().lstrip(": ") for line in str(exc).splitlines() if line.strip()]
    causes = [line.removeprefix("Caused by:").strip() for line in lines if line.startswith("Caused by:")]
    errors = [line for line in lines if "Error" in line or "Exception" in line]
    said = (causes or errors or [type(exc).__name__])[0]
    return said if len(said) <= 200 else said[:197] + "..."


def _ruleset(rules: str | Path | RuleSet, catalog: str | Path | None) -> RuleSet:
    from seqjudge.rules.model import RuleSet

    if isinstance(rules, RuleSet):
        if catalog is not None:
            raise InputError(
                "a catalog was given with an already loaded rule set",
                where="catalog=",
                hint="Pass the rule file's path with catalog=, or check the rule set against the catalog "
                "when you load it",
            )
        return rules
    from seqjudge.inputs import load_suite

    return load_suite(rules, catalog).ruleset  # the loader every command uses: same checks, same messages


def _checker(rules_json: str, threshold: float, risk_level: str, explain: str) -> Checker:
    key = (rules_json, threshold, risk_level, explain)
    checker = _ENGINES.get(key)
    if checker is None:
        from seqjudge.checkpool import Checker
        from seqjudge.rules.engine import Engine
        from seqjudge.rules.model import RuleSet

        ruleset = RuleSet.model_validate_json(rules_json)
        checker = _ENGINES[key] = Checker(
            Engine(ruleset),
            threshold,
            risk_level,  # type: ignore[arg-type]
            explain=explain,  # type: ignore[arg-type]
        )
    return checker


def _mode(df: DataFrame, trace_column: str) -> tuple[str, list[str]]:
    """Which input form ``df`` has: ``("text", [column])`` or ``("struct", [trace fields present])``."""
    from pyspark.sql.types import BinaryType, StringType

    fields = {f.name: f.dataType for f in df.schema.fields}
    if trace_column in fields:
        if not isinstance(fields[trace_column], StringType | BinaryType):
            raise InputError(
                f"column {trace_column!r} is {fields[trace_column].simpleString()}, not a string",
                source="DataFrame",
                hint="Give one native JSON trace per row as a string column, or pass trace_id and calls "
                "columns (calls an array of structs)",
            )
        return "text", [trace_column]
    if "calls" in fields:
        return "struct", [name for name in TRACE_FIELDS if name in fields]
    raise InputError(
        f"the DataFrame has neither a {trace_column!r} column nor a 'calls' column "
        f"(it has: {', '.join(fields) or 'no columns'})",
        source="DataFrame",
        hint=f"Give one native JSON trace per row in a string column {trace_column!r} (or name it with "
        "trace_column=), or the native trace fields as columns: trace_id and calls (an array of structs "
        "with tool_name, arguments, status, ...), optionally messages, context and metadata",
    )


def _plain(value: Any) -> Any:
    """An Arrow value as the JSON of a native trace: a struct's nulls are absent keys, maps are objects."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        if value and all(isinstance(item, tuple) and len(item) == 2 for item in value):
            return {str(k): _plain(v) for k, v in value}  # a MapType column arrives as (key, value) pairs
        return [_plain(item) for item in value]
    return value


def _evaluate(
    rules_json: Any,
    threshold: float,
    risk_level: str,
    explain: str,
    mode: str,
    columns: list[str],
    on_error: OnError,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark import TaskContext

        from seqjudge.ingest import native
        from seqjudge.ingest.base import Options, Record, Source
        from seqjudge.report import report_line

        text = rules_json if isinstance(rules_json, str) else rules_json.value  # a broadcast, or the text
        checker = _checker(text, threshold, risk_level, explain)
        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        source = Source(f"DataFrame partition {partition}", f"partition-{partition}")
        options = Options(plain=True)
        schema = _arrow_schema(pa, on_error)
        row = 0
        for batch in batches:
            if mode == "text":
                raws = [
                    v if v is None or isinstance(v, bytes) else v.encode("utf-8", "surrogatepass")
                    for v in batch.column(0).to_pylist()
                ]
            else:
                raws = [
                    None if r is None else json.dumps(_plain(r), ensure_ascii=False).encode()
                    for r in batch.select(columns).to_pylist()
                ]
            out: dict[str, list[Any]] = {name: [] for name in schema.names}
            for raw in raws:
                row += 1
                try:
                    if raw is None:
                        raise InputError(
                            "the row holds no trace (null)", source=source.name, where=f"row {row}"
                        )
                    (trace,) = native.parse([Record(source, row, raw)], source, options)
                    data = checker.data(trace)
                except SeqjudgeError as exc:
                    if on_error == "raise":
                        raise
                    for name, value in (
                        ("trace_id", None),
                        ("verdict", "error"),
                        ("score", None),
                        ("rules_failed", None),
                        ("report", None),
                        ("error", str(exc)),
                    ):
                        out[name].append(value)
                    continue
                out["trace_id"].append(str(data["trace_id"]))
                out["verdict"].append(data["verdict"])
                out["score"].append(data["sequence_correctness_score"])
                out["rules_failed"].append([r["rule_id"] for r in data["rules"] if r["outcome"] == "failed"])
                out["report"].append(report_line(data)[:-1].decode("utf-8", "surrogatepass"))
                if on_error == "column":
                    out["error"].append(None)
            yield pa.RecordBatch.from_pydict(out, schema=schema)

    return run


def _arrow_schema(pa: Any, on_error: OnError) -> Any:
    fields = [
        pa.field("trace_id", pa.string()),
        pa.field("verdict", pa.string(), nullable=False),
        pa.field("score", pa.float64()),
        pa.field("rules_failed", pa.list_(pa.string())),
        pa.field("report", pa.string()),
    ]
    if on_error == "column":
        fields.append(pa.field("error", pa.string()))
    return pa.schema(fields)


def _spark_schema(on_error: OnError) -> str:
    ddl = "trace_id string, verdict string, score double, rules_failed array<string>, report string"
    return ddl + (", error string" if on_error == "column" else "")


def check(
    df: DataFrame,
    rules: str | Path | RuleSet,
    *,
    catalog: str | Path | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    risk_level: RiskLevel = "medium",
    trace_column: str = "trace",
    on_error: OnError = "raise",
    explain: Explain = "not-passed",
) -> DataFrame:
    """Check every trace of ``df`` against ``rules``; a lazy DataFrame of ``OUTPUT_FIELDS`` (+ ``error``).

    ``df`` holds one native JSON trace per row in the string column ``trace_column``, or the native trace
    fields as columns (``trace_id`` and ``calls``, an array of structs; optionally ``messages``, ``context``,
    ``metadata``). Rows keep their order within a partition; the output has one row per input row.
    ``explain``: the report's form, as ``check --explain`` (lean by default: see ``report.Explain``).
    """
    _require_spark()
    if on_error not in ("raise", "column"):
        raise InputError(f"on_error must be 'raise' or 'column', not {on_error!r}", where="on_error=")
    if risk_level not in ("low", "medium", "high"):
        raise InputError(f"risk_level must be low, medium or high, not {risk_level!r}", where="risk_level=")
    if explain not in EXPLAIN_CHOICES:
        raise InputError(f"explain must be {' or '.join(EXPLAIN_CHOICES)}, not {explain!r}", where="explain=")
    ruleset = _ruleset(rules, catalog)
    mode, columns = _mode(df, trace_column)
    rules_json = ruleset.model_dump_json()
    session = df.sparkSession
    _workers(session)
    try:
        payload: Any = session.sparkContext.broadcast(rules_json)
    except Exception:  # Spark Connect has no SparkContext: the text then travels inside the function
        payload = rules_json
    return df.select(*columns).mapInArrow(
        _evaluate(payload, threshold, risk_level, explain, mode, columns, on_error), _spark_schema(on_error)
    )


def rule_failure_counts(results: DataFrame) -> DataFrame:
    """Per rule id, how many traces failed it: ``rule_id``, ``traces_failed``, sorted by count then id."""
    from pyspark.sql import functions as F

    return (
        results.select(F.explode("rules_failed").alias("rule_id"))
        .groupBy("rule_id")
        .agg(F.count(F.lit(1)).alias("traces_failed"))
        .orderBy(F.desc("traces_failed"), "rule_id")
    )
