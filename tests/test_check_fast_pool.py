"""`seqjudge check --format jsonl|json` end to end: the worker path, the single-process path and the model
path write the same bytes, end with the same exit code and say the same thing about bad input.

The model path is what `check` did before the fast paths: ``load_traces``, ``Engine.check`` and
``model_dump_json`` per trace, an InputError ending the run with exit 2 after the reports before it. The
worker path is forced on small files (a few records checked inline, small chunks, two workers) so that
errors and duplicates land in worker chunks; one test uses the real thresholds.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import seqjudge.checkpool as checkpool
from seqjudge.checkpool import Checks
from seqjudge.cli import run
from seqjudge.errors import InputError, SeqjudgeError
from seqjudge.ingest import load_traces
from seqjudge.outputs.check import CheckOutput
from seqjudge.outputs.textview import Totals
from seqjudge.report import Explain
from seqjudge.rules.coverage import Coverage
from seqjudge.rules.engine import Engine
from seqjudge.rules.load import load_rules

try:  # as tests/test_engine_property.py imports tests/reference.py
    from test_check_fast import ANY_TRACE
    from test_engine_property import ALIASES, ANY_RULE, PROFILE, build_ruleset
except ImportError:  # pragma: no cover
    from tests.test_check_fast import ANY_TRACE
    from tests.test_engine_property import ALIASES, ANY_RULE, PROFILE, build_ruleset


def model_path(
    rules: Path, traces: Path, fmt: str, pattern: str | None = None, explain: Explain = "not-passed"
) -> tuple[int, bytes, str]:
    """(exit code, output bytes, stderr) as `check` gave them before the fast paths (lean by default, as
    `check` is: the models of a lean report dump back to it with exclude_unset)."""
    engine = Engine(load_rules(rules))
    totals = Totals()
    totals.coverage = Coverage.of(engine.ruleset)
    lines: list[str] = []
    try:
        for trace in load_traces(str(traces), error_pattern=pattern):
            report = engine.check(trace, explain=explain)
            totals.add(report)
            totals.coverage.add_trace(trace, report.model_dump(mode="json")["rules"])
            lines.append(report.model_dump_json(exclude_unset=True) + "\n")
    except InputError as exc:
        if fmt == "json":  # the document streams: the reports before the error, never closed
            return 2, as_json(lines, None), f"error: {exc}\n"
        return 2, "".join(lines).encode(), f"error: {exc}\n"
    out = as_json(lines, totals.as_dict()) if fmt == "json" else "".join(lines).encode()
    return (0 if totals.verdicts["pass"] == totals.n else 1), out, ""


def as_json(reports: list[str], summary: dict[str, Any] | None) -> bytes:
    """`check --format json`'s bytes: the reports one a line, then the summary; without a summary (bad
    input stopped the run), the reports written before the error and nothing after them."""
    if summary is None and not reports:
        return b""  # bad from its first record: nothing was started
    items = ",".join("\n    " + line.rstrip("\n") for line in reports)  # each as model_dump_json writes it
    out = '{\n  "reports": [' + items
    if summary is not None:
        closing = json.dumps(summary, ensure_ascii=False, indent=2).replace("\n", "\n  ")
        out += ("\n  ]," if reports else "],") + '\n  "summary": ' + closing + "\n}\n"
    return out.encode()


def command(
    rules: Path, traces: Path, fmt: str, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, bytes, str]:
    # To stdout, which streams: a file (-o) is renamed into place only when the check got to the end, and
    # the reports written before a bad record are what is compared here.
    capsys.readouterr()
    code = run(["check", str(rules), str(traces), "--format", fmt, *extra])
    captured = capsys.readouterr()
    err = "".join(line for line in captured.err.splitlines(True) if not line.startswith("warning: "))
    return code, captured.out.encode(), err


@pytest.fixture
def workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers on any machine, after 3 records checked inline, chunks of about 3 records (of ``good``)."""
    monkeypatch.setattr(checkpool, "worker_count", lambda: 2)
    monkeypatch.setattr(checkpool, "INLINE", 3)
    monkeypatch.setattr(checkpool, "CHUNK", 3 * GOOD_SIZE)


def single(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpool, "worker_count", lambda: 0)


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


@settings(
    PROFILE,
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    rules=st.lists(ANY_RULE, min_size=1, max_size=8),
    aliases=ALIASES,
    records=st.lists(ANY_TRACE, min_size=0, max_size=30),
    pattern=st.sampled_from([None, "^Error"]),
)
def test_workers_single_process_and_models_write_the_same_bytes(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    rules: list[dict[str, Any]],
    aliases: dict[str, list[str]],
    records: list[dict[str, Any]],
    pattern: str | None,
) -> None:
    tmp = tmp_path_factory.mktemp("same")
    build_ruleset(rules, aliases)  # rejects an invalid draw
    rules_path = tmp / "rules.json"
    rules_path.write_text(
        json.dumps({"rules": [{"id": f"r{n}", **rule} for n, rule in enumerate(rules)], "aliases": aliases}),
        encoding="utf-8",
    )
    try:
        load_rules(rules_path)
    except SeqjudgeError:  # the file loader is stricter than the model (an alias naming itself)
        assume(False)
    # Distinct ids, so that most examples run to the end; the records without one get file:line.
    for n, record in enumerate(records):
        if isinstance(record, dict) and record.get("trace_id") == "t":
            record["trace_id"] = f"t{n}"
    traces = write_jsonl(tmp / "traces.jsonl", records)
    extra = () if pattern is None else ("--error-pattern", pattern)
    with monkeypatch.context() as m:
        m.setattr(checkpool, "worker_count", lambda: 2)
        m.setattr(checkpool, "INLINE", 2)
        m.setattr(checkpool, "CHUNK", 200)  # bytes: one to a few records a chunk
        pooled = command(rules_path, traces, "jsonl", capsys, *extra)
    with monkeypatch.context() as m:
        single(m)
        alone = command(rules_path, traces, "jsonl", capsys, *extra)
    assert pooled == alone == model_path(rules_path, traces, "jsonl", pattern)
    assert command(rules_path, traces, "json", capsys, *extra) == model_path(
        rules_path, traces, "json", pattern
    )
    assert command(rules_path, traces, "jsonl", capsys, "--explain", "all", *extra) == model_path(
        rules_path, traces, "jsonl", pattern, "all"
    )


RULES = {
    "rules": [
        {"type": "before", "first": "auth", "then": "cancel_order", "same": ["order_id"]},
        {"type": "sequence", "tools": ["auth", "get_order", "cancel_order"]},
        {"type": "trajectory", "expected": ["auth", "get_order"], "mode": "in_order"},
        {"type": "judge", "description": "polite"},
    ]
}


def good(n: int) -> dict[str, Any]:
    calls = [
        {"tool_name": "auth"},
        {"tool_name": "get_order", "arguments": {"order_id": n % 3}},
        {"tool_name": "cancel_order", "arguments": {"order_id": n % 5}, "status": "error" if n % 7 else "ok"},
    ]
    return {"trace_id": f"t{n}", "calls": calls}


GOOD_SIZE = len(json.dumps(good(10))) + 1  # bytes of a line of ``good``


@pytest.fixture
def rules_path(tmp_path: Path) -> Path:
    path = tmp_path / "rules.json"
    path.write_text(json.dumps(RULES), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "bad",
    [
        '{"trace_id": "x", "calls": [{"tool_name": ""}]}',  # the model's error
        '{"trace_id": "x", "calls": [',  # bad JSON
        '{"trace_id": "t5", "calls": []}',  # a duplicate of an id in an earlier chunk
        '{"messages": [{"role": "user"}]}',  # not a native trace at all
    ],
)
def test_bad_input_in_a_worker_chunk_ends_as_without_workers(
    tmp_path: Path,
    rules_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    workers: None,
    bad: str,
) -> None:
    lines = [json.dumps(good(n)) for n in range(40)]
    lines.insert(29, bad)  # line 30: in the 7th worker chunk, after reports from chunks before and its own
    traces = tmp_path / "traces.jsonl"
    traces.write_text("\n".join(lines) + "\n", encoding="utf-8")
    pooled = command(rules_path, traces, "jsonl", capsys)
    single(monkeypatch)
    alone = command(rules_path, traces, "jsonl", capsys)
    assert pooled == alone == model_path(rules_path, traces, "jsonl")
    code, out, err = pooled
    assert code == 2
    assert out.count(b"\n") == 29  # every report before the bad record, none after it
    assert err.startswith(f"error: {traces}, line 3") and err.count("\n") == 1


def test_a_malformed_record_deep_in_a_large_file_with_the_real_thresholds(
    tmp_path: Path, rules_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    per_chunk = checkpool.CHUNK // GOOD_SIZE
    lines = [json.dumps(good(n)) for n in range(checkpool.INLINE + 40 * per_chunk)]
    at = checkpool.INLINE + 25 * per_chunk + 17
    lines[at] = lines[at][:-9]  # cut off: bad JSON
    traces = tmp_path / "big.jsonl"
    traces.write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setattr(checkpool, "worker_count", lambda: 2)
    pooled = command(rules_path, traces, "jsonl", capsys)
    single(monkeypatch)
    alone = command(rules_path, traces, "jsonl", capsys)
    assert pooled == alone
    code, out, err = pooled
    assert code == 2 and out.count(b"\n") == at
    assert err.startswith(f"error: {traces}, line {at + 1}, column") and "bad JSON" in err


def test_duplicate_ids_across_chunks_and_files(
    tmp_path: Path,
    rules_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    workers: None,
) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    write_jsonl(folder / "a.jsonl", [good(n) for n in range(20)])
    write_jsonl(folder / "b.jsonl", [good(n) for n in range(100, 130)] + [good(7)])
    code, out, err = command(rules_path, folder, "jsonl", capsys)
    assert code == 2 and out.count(b"\n") == 50
    assert "duplicate trace id 't7': it was already used at " in err
    assert (code, out, err) == model_path(rules_path, folder, "jsonl")


def test_valid_input_exit_codes_and_no_worker_left(
    tmp_path: Path, rules_path: Path, capsys: pytest.CaptureFixture[str], workers: None
) -> None:
    passing = write_jsonl(tmp_path / "pass.jsonl", [{"trace_id": f"p{n}", "calls": []} for n in range(30)])
    never = tmp_path / "never.json"
    never.write_text(json.dumps({"rules": [{"type": "blocklist", "pattern": "admin_"}]}), encoding="utf-8")
    assert command(never, passing, "jsonl", capsys)[0] == 0
    failing = write_jsonl(tmp_path / "fail.jsonl", [good(n) for n in range(30)])
    assert command(rules_path, failing, "jsonl", capsys)[0] == 1
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize("fmt", ["jsonl", "markdown"])  # chunks written joined / trace by trace
def test_ctrl_c_shuts_the_workers_down(
    tmp_path: Path,
    rules_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    workers: None,
    fmt: str,
) -> None:
    traces = write_jsonl(tmp_path / "traces.jsonl", [good(n) for n in range(200)])
    whole = command(rules_path, traces, "jsonl", capsys)[1]
    taken = 0
    take_all = CheckOutput.take_all

    def interrupted(self: CheckOutput, checks: Checks, failures_only: bool) -> None:
        # Where Ctrl-C lands: this process, writing the workers' results, with more chunks in flight.
        nonlocal taken
        taken += 1
        if taken == 5:
            raise KeyboardInterrupt
        take_all(self, checks, failures_only)

    monkeypatch.setattr(CheckOutput, "take_all", interrupted)
    code = run(["check", str(rules_path), str(traces), "--format", fmt])
    assert code == 130 and taken == 5
    if fmt == "jsonl":  # the reports of the first records and of 4 chunks, whole, and none after them
        written = capsys.readouterr().out.encode()
        assert written and whole.startswith(written) and written.endswith(b"\n")
        assert 3 + 4 < written.count(b"\n") < 200
    assert multiprocessing.active_children() == []
    # Into a file: it is renamed into place only when the check got to the end, so nothing is left.
    taken = 0
    out = tmp_path / "o"
    assert run(["check", str(rules_path), str(traces), "--format", fmt, "-o", str(out)]) == 130
    assert not out.exists() and [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []
    assert multiprocessing.active_children() == []


def test_no_workers_where_they_would_not_be_forked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpool.sys, "platform", "darwin")
    assert checkpool.worker_count() == 0


def _dies_on_line_10(raw: bytes, lines: int | list[int], slot: int) -> Any:
    held = range(lines + 1, lines + 1 + raw.count(b"\n")) if isinstance(lines, int) else lines
    if 10 in held:
        os._exit(1)  # a worker killed from outside (the OOM killer, say)
    return _work(raw, lines, slot)


_work = checkpool._work


def test_a_worker_that_dies_costs_time_not_output(
    tmp_path: Path,
    rules_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    workers: None,
) -> None:
    traces = write_jsonl(tmp_path / "traces.jsonl", [good(n) for n in range(60)])
    monkeypatch.setattr(checkpool, "_work", _dies_on_line_10)
    pooled = command(rules_path, traces, "jsonl", capsys)
    assert pooled == model_path(rules_path, traces, "jsonl")
    assert pooled[1].count(b"\n") == 60
    assert multiprocessing.active_children() == []


def test_workers_option_sets_the_pool_size(
    tmp_path: Path, rules_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[int] = []
    init = checkpool.LinePool.__init__

    def spy(self: checkpool.LinePool, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        seen.append(self.workers)

    monkeypatch.setattr(checkpool.LinePool, "__init__", spy)
    monkeypatch.setattr(checkpool, "INLINE", 3)
    monkeypatch.setattr(checkpool, "CHUNK", 3 * GOOD_SIZE)
    traces = write_jsonl(tmp_path / "traces.jsonl", [good(n) for n in range(30)])
    none = command(rules_path, traces, "jsonl", capsys, "--workers", "0")
    two = command(rules_path, traces, "jsonl", capsys, "--workers", "2")
    assert none == two == model_path(rules_path, traces, "jsonl")
    assert seen == [0, 2 if checkpool.forkable() else 0]
    assert multiprocessing.active_children() == []
    monkeypatch.setattr(checkpool, "forkable", lambda: False)
    assert (
        checkpool.LinePool(
            checkpool.Checker(Engine(load_rules(rules_path)), 0.85, "medium"), workers=4
        ).workers
        == 0
    )


def test_jsonl_to_stdout_is_the_files_bytes_with_or_without_a_byte_buffer(
    tmp_path: Path, rules_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """Reports go to a stream's byte buffer as they are; a text stream without one gets them decoded."""
    import contextlib
    import io

    records = [good(n) for n in range(5)]
    records[2]["trace_id"] = "naïve ✓"  # not ASCII: bytes and text must agree on the encoding
    traces = write_jsonl(tmp_path / "traces.jsonl", records)
    expected = model_path(rules_path, traces, "jsonl")
    assert run(["check", str(rules_path), str(traces), "--format", "jsonl"]) == expected[0]
    assert capsysbinary.readouterr().out == expected[1]
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        assert run(["check", str(rules_path), str(traces), "--format", "jsonl"]) == expected[0]
    assert text.getvalue().encode("utf-8") == expected[1]


def test_totals_counted_in_chunks_and_merged_are_the_totals_counted_one_by_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker counts its chunk in ``Totals.fresh()``; merged in input order, the chunks give the summary,
    the per-rule tally (first-seen order, first trace ids) and the coverage of counting every trace here."""
    import random

    import seqjudge.rules.coverage as coverage_module

    monkeypatch.setattr(coverage_module, "LISTED", 4)  # the out-of-catalog list fills up within the run
    rng = random.Random(7)
    rules = [f"r{n}" for n in range(8)]
    tools = ["a", "b", "c", "x", "y"]
    traces = [
        (
            f"t{k}",
            rng.choice(["pass", "fail", "review"]),
            rng.sample(rules, rng.randint(0, 3)) * rng.randint(1, 2),  # a rule may fail twice in a trace
            rng.sample(rules, rng.randint(0, 2)),
            rng.sample(rules, rng.randint(0, 4)),
            rng.sample(tools, rng.randint(0, 3)),
        )
        for k in range(120)
    ]

    def count(totals: Totals, part: list[Any]) -> None:
        for trace_id, verdict, violated, deferred, exercised, called in part:
            totals.count(verdict, violated, deferred, trace_id)
            assert totals.coverage is not None
            totals.coverage.add(trace_id, exercised, called)

    def new() -> Totals:
        totals = Totals()
        totals.coverage = Coverage(rules, {"a": ["r0"], "z": ["r1"]}, catalog=frozenset({"a", "b", "c"}))
        return totals

    one_by_one = new()
    count(one_by_one, traces)
    merged = new()
    count(merged, traces[:5])  # the first records are counted here, as a small file's would be
    for start in range(5, len(traces), 11):
        part = merged.fresh()
        assert part.n == 0 and part.coverage is not None and part.coverage.traces == 0
        count(part, traces[start : start + 11])
        merged.merge(part)
    assert merged.as_dict() == one_by_one.as_dict()
    assert merged.tally() == one_by_one.tally() and merged.first == one_by_one.first
    assert list(merged.violated) == list(one_by_one.violated)  # first-seen order, which breaks ties
    assert merged.coverage is not None and one_by_one.coverage is not None
    assert merged.coverage.out_of_catalog == one_by_one.coverage.out_of_catalog
    assert len(merged.coverage.out_of_catalog) == 4 and merged.coverage.outside > 4


def test_the_pool_unfreezes_what_it_froze_for_the_workers(
    tmp_path: Path,
    rules_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    workers: None,
) -> None:
    import gc

    frozen: list[int] = []
    submit = checkpool.LinePool._submit

    def spy(self: checkpool.LinePool, pool: Any, chunk: Any, slot: int) -> Any:
        frozen.append(gc.get_freeze_count())
        return submit(self, pool, chunk, slot)

    monkeypatch.setattr(checkpool.LinePool, "_submit", spy)
    traces = write_jsonl(tmp_path / "traces.jsonl", [good(n) for n in range(30)])
    assert command(rules_path, traces, "jsonl", capsys) == model_path(rules_path, traces, "jsonl")
    assert frozen and min(frozen) > 0  # the objects alive at the fork are out of the collector's way
    assert gc.get_freeze_count() == 0  # and back in it once the workers are gone
