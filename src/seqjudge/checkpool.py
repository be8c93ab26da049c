"""`seqjudge check` over many traces on every core: workers parse, check and render each trace's output.

The loader still reads the file, picks its format and checks trace ids for duplicates in this process; for
a native JSONL file it hands the records to ``check_lines`` (an ``Options.native_lines`` hook), which checks
the first ``INLINE`` records here and, when more follow, sends the rest in chunks to worker processes and
yields their results in input order. Behaviour is the single-process path's by construction:

- each record is read by ``native.parse`` and checked by ``Checker`` in either process, the same code;
- a worker that meets any error in a record stops its chunk there and says where; this process then reads
  that record itself, so the error (message, exit code, traceback for a bug) is raised here exactly as
  without workers, after the results before it and none after it;
- duplicate trace ids are caught by the loader, across chunks and files alike.

Workers are forked (cheap, and they inherit the compiled rules); where fork is not the platform's way (or
there is one core) everything runs here. Workers ignore Ctrl-C: this process gets it, stops taking results
and shuts the pool down before the interrupt ends the command, so no worker outlives it.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import sys
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from itertools import islice
from typing import TYPE_CHECKING, Any

from seqjudge.ingest import native
from seqjudge.ingest.base import Done, Options, Record, Source
from seqjudge.redact import may_need_redaction, redact_text, redact_value
from seqjudge.report import Explain, RiskLevel, report_line
from seqjudge.rules.coverage import called, exercised_ids
from seqjudge.rules.engine import Engine
from seqjudge.trace import PlainTrace, Trace

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

INLINE = 1000  # records checked here before workers pay for their start (tens of ms for two forks)
CHUNK = 200  # records a task: large enough that a task's overhead is small, small enough to stream
AHEAD = 4  # chunks in flight per worker: keeps workers busy while this process writes


# Where a trace was read: its file (as the loader names it) and the line its record starts on.
Origin = tuple[str, int]
# A trace's part of an output format, rendered from its report data in whichever process checked it (so the
# workers do the formatting too): what the format's writer puts in the output for that trace.
Render = Callable[[Trace | PlainTrace, dict[str, Any], Origin | None], bytes]


def jsonl_render(trace: Trace | PlainTrace, data: dict[str, Any], origin: Origin | None) -> bytes:
    return report_line(data)


@dataclass(slots=True)
class Checked:
    """One trace's rendered output (by default the JSONL line), and what the totals count."""

    line: bytes  # the trace's part of the output, UTF-8 (``Checker.render``'s)
    verdict: str
    violated: list[str]  # rule id of every violation, in order
    deferred: list[str]  # rule ids of the deferred rules
    exercised: list[str]  # rule ids of the rules exercised (rules.coverage)
    tools: list[str]  # the distinct tool names the trace calls
    trace_id: str = ""


class Checker:
    """The engine with the command's options: one trace in, its ``Checked`` out."""

    def __init__(
        self,
        engine: Engine,
        threshold: float,
        risk_level: RiskLevel,
        render: Render = jsonl_render,
        explain: Explain = "not-passed",
    ) -> None:
        self.engine = engine
        self.threshold = threshold
        self.risk_level: RiskLevel = risk_level
        self.render = render
        self.explain: Explain = explain
        # Rules whose messages quote trace values: `same:` rules quote the arguments they group by, a
        # blocklist names the trace's tool. Every other message is made of the rule file's own words.
        self.quoting = frozenset(
            r.rule_id for r in engine.ruleset.rules if getattr(r, "same", None) or r.type == "blocklist"
        )

    def data(self, trace: Trace | PlainTrace) -> dict[str, Any]:
        """The trace's report data as it may be shown (redacted); views that need no JSON line use this."""
        return self._redacted(
            self.engine.check_data(
                trace, threshold=self.threshold, risk_level=self.risk_level, explain=self.explain
            )
        )

    def checked(self, trace: Trace | PlainTrace, origin: Origin | None = None) -> Checked:
        data = self.data(trace)
        return Checked(
            self.render(trace, data, origin),
            data["verdict"],
            [v["rule_id"] for v in data["violations"]],
            [r["rule_id"] for r in data["rules"] if r["outcome"] == "deferred"],
            exercised_ids(data["rules"]),
            called(trace),
            str(data["trace_id"]),
        )

    def _redacted(self, data: dict[str, Any]) -> dict[str, Any]:
        """A report as it may be shown, redacted by ``seqjudge.redact``'s policy.

        Trace values reach a report only as the trace id and in what the quoting rules (``self.quoting``)
        say: those texts are screened, not the whole line (a whole-line screen cost 0.5 ms a trace)."""
        texts = [str(data.get("trace_id"))]
        if self.quoting:
            for item in (*data["rules"], *data["violations"]):
                if item["rule_id"] in self.quoting:
                    texts += [item.get("explanation") or "", item.get("actual_order") or ""]
                    if item.get("details"):
                        texts.append(json.dumps(item["details"], ensure_ascii=False, default=str))
        joined = "\n".join(texts)  # one screen for all: a few plain finds, not one per text
        if may_need_redaction(joined) and any(redact_text(t) != t for t in texts):
            data = redact_value(data, keys=False)
        return data


def _check_record(checker: Checker, record: Record, source: Source, options: Options) -> Done:
    assert record.line is not None
    (trace,) = native.parse([record], source, options)  # a JSONL record is one trace
    assert not isinstance(trace, Done)
    trace_id = trace.trace_id if isinstance(trace.trace_id, str) else str(trace.trace_id)
    return Done(trace_id, record.line, checker.checked(trace, (source.name, record.line)))


def forkable() -> bool:
    import multiprocessing  # here, not at the top: `seqjudge check` of a small file starts no worker

    return sys.platform == "linux" and "fork" in multiprocessing.get_all_start_methods()


def worker_count() -> int:
    """Workers to start: the cores this process may use, or 0 where workers are not forked."""
    if not forkable():
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cores if cores > 1 else 0


class LinePool:
    """The ``Options.native_lines`` hook for one ``seqjudge check`` run (a pool per file, started lazily)."""

    def __init__(self, checker: Checker, *, workers: int | None = None, inline: int | None = None) -> None:
        self.checker = checker
        self.requested = workers
        self._workers: int | None = None
        self.inline = INLINE if inline is None else inline

    @property
    def workers(self) -> int:
        """Worker processes to start. Decided when first asked (it imports multiprocessing): a file with no
        more records than are checked inline loads none of it. An explicit count is honoured where workers
        can be forked; elsewhere everything runs here."""
        if self._workers is None:
            requested = self.requested
            self._workers = worker_count() if requested is None else (requested if forkable() else 0)
        return self._workers

    def __call__(self, records: Iterator[Record], source: Source, options: Options) -> Iterator[Done]:
        options = replace(options, native_lines=None)
        for record in islice(records, self.inline):
            yield _check_record(self.checker, record, source, options)
        following = next(records, None)
        if following is None:
            return  # everything was checked inline: no worker question asked
        records = itertools.chain([following], records)
        if self.workers < 1:
            for record in records:
                yield _check_record(self.checker, record, source, options)
            return
        yield from self._pooled(records, source, options)

    def _pooled(self, records: Iterator[Record], source: Source, options: Options) -> Iterator[Done]:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        global _STATE
        _STATE = (self.checker, source, options)  # inherited by the forked workers
        pool = ProcessPoolExecutor(
            self.workers, mp_context=multiprocessing.get_context("fork"), initializer=_ignore_interrupts
        )
        self.broken = False
        pending: deque[tuple[list[Record], Future[tuple[list[_Row], bool]] | None]] = deque()
        unread: Exception | None = None  # a reading error, raised where the single-process path meets it
        try:
            while True:
                while unread is None and len(pending) < self.workers * AHEAD:
                    chunk: list[Record] = []
                    try:
                        chunk.extend(islice(records, CHUNK))
                    except Exception as exc:
                        unread = exc
                    if chunk:
                        pending.append((chunk, self._submit(pool, chunk)))
                    if len(chunk) < CHUNK:
                        break
                if not pending:
                    if unread is not None:
                        raise unread
                    return
                chunk, future = pending.popleft()
                rows, stopped = self._result(future)
                for trace_id, line, report, verdict, violated, deferred, exercised, tools in rows:
                    checked = Checked(report, verdict, violated, deferred, exercised, tools, trace_id)
                    yield Done(trace_id, line, checked)
                if stopped:
                    # Read the record that stopped the worker (and the rest of its chunk) here, to raise
                    # its error exactly as the single-process path does; or the chunk no worker took.
                    for record in chunk[len(rows) :]:
                        yield _check_record(self.checker, record, source, options)
        finally:
            # Tasks not started are dropped; a running one finishes its chunk (milliseconds), then every
            # worker exits before this returns, whether the run ended, failed or was interrupted.
            pool.shutdown(wait=True, cancel_futures=True)
            _STATE = None

    def _submit(
        self, pool: ProcessPoolExecutor, chunk: list[Record]
    ) -> Future[tuple[list[_Row], bool]] | None:
        """The chunk's task, or None once the pool cannot take one (this process reads it instead)."""
        if not self.broken:
            lines = [(r.line or 0, r.raw) for r in chunk]  # JSONL: every line is set
            try:
                return pool.submit(_work, lines)
            except (OSError, RuntimeError):  # no fork (process limit), or a pool already broken
                self.broken = True
        return None

    def _result(self, future: Future[tuple[list[_Row], bool]] | None) -> tuple[list[_Row], bool]:
        """A task's rows and whether it stopped early; a chunk no worker finished counts as stopped at its
        start, so that this process reads all of it: a worker killed from outside costs time, not output."""
        from concurrent.futures.process import BrokenProcessPool

        if future is not None:
            try:
                return future.result()
            except BrokenProcessPool:
                self.broken = True
        return [], True


_STATE: tuple[Checker, Source, Options] | None = None


def _ignore_interrupts() -> None:
    # Ctrl-C goes to the whole process group: the main process handles it and shuts the pool down.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _work(lines: list[tuple[int, bytes]]) -> tuple[list[_Row], bool]:
    """Check a chunk of records in a worker: the results, and whether a record stopped it early."""
    assert _STATE is not None
    checker, source, options = _STATE
    rows: list[_Row] = []
    for line, raw in lines:
        try:
            done = _check_record(checker, Record(source, line, raw), source, options)
        except Exception:  # the main process reads this record again and raises the error itself
            return rows, True
        c = done.result
        rows.append((done.trace_id, line, c.line, c.verdict, c.violated, c.deferred, c.exercised, c.tools))
    return rows, False


# A Done as a tuple of builtins: it crosses the pipe several times faster than the objects.
_Row = tuple[str, int, bytes, str, list[str], list[str], list[str], list[str]]
