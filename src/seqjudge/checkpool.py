"""`seqjudge check` over many traces on every core: workers parse, check and render each trace's output.

The loader still reads the file, picks its format and checks trace ids for duplicates in this process; for
a native JSONL file it hands the records to ``LinePool`` (an ``Options.native_lines`` hook), which reads
ahead: a file of at most ``INLINE`` records is checked here, without starting a worker; a larger one is sent
in chunks to worker processes from its first record, and their results come back in input order. Past the
records read ahead, the file is read in blocks of whole lines (``files.Reader.blocks``) that go to a worker
unsplit: this process does nothing a line. Behaviour is the single-process path's by construction:

- each record is read by ``native.parse`` and checked by ``Checker`` in either process, the same code;
- a worker that meets any error in a record stops its chunk there and says where; this process then reads
  that record itself, so the error (message, exit code, traceback for a bug) is raised here exactly as
  without workers, after the results before it and none after it;
- duplicate trace ids are caught by the loader, across chunks and files alike: a chunk comes back as one
  ``Batch`` of its ids and lines, checked at once (one by one when an id repeats, for the same message);
- the run's totals (and coverage) are counted where a trace is checked: a worker counts its chunk in a
  ``Totals.fresh`` copy that comes back with the chunk's rendered parts and is merged here in input order;
- for a writer that only writes each trace's part (``CheckOutput.joins``: jsonl, json, text) a worker joins
  its chunk's parts (those ``--failures-only`` keeps) into its slot of a ring of memory shared with this
  process, which writes them with one call; other writers get each part. So this process handles a few
  builtins a trace (its id, line and verdict), not its report nor its bytes.

Workers are forked (cheap, and they inherit the compiled rules); where fork is not the platform's way (or
there is one core) everything runs here. The objects alive at the fork are frozen out of the garbage
collector (``gc.freeze``) so that no collection walks them again, in a worker or here. Workers ignore Ctrl-C:
this process gets it, stops taking results and shuts the pool down before the interrupt ends the command, so
no worker outlives it.
"""

from __future__ import annotations

import copy
import gc
import io
import itertools
import json
import mmap
import os
import signal
import sys
from array import array
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from itertools import islice
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from seqjudge.ingest import files, native
from seqjudge.ingest.base import Batch, Blocks, Done, Options, Record, Source
from seqjudge.redact import may_need_redaction, redact_text, redact_value
from seqjudge.report import Explain, RiskLevel, report_line
from seqjudge.rules.engine import FINITE, Engine
from seqjudge.trace import PlainTrace, Trace

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

    from seqjudge.outputs.textview import Totals

INLINE = 1000  # a file of at most this many records is checked here: workers cost tens of ms to start
READ_AHEAD = 16 << 20  # bytes read ahead to tell: past them, INLINE records are checked here as they come
CHUNK = 1 << 19  # bytes of records a task: a task's overhead is then small, and output still streams
AHEAD = 4  # chunks in flight per worker: keeps workers busy while this process writes
SLOT = 8 << 20  # bytes of a chunk's joined output in shared memory (more comes back through the pipe)


# Where a trace was read: its file (as the loader names it) and the line its record starts on.
Origin = tuple[str, int]
# A trace's part of an output format, rendered from its report data in whichever process checked it (so the
# workers do the formatting too): what the format's writer puts in the output for that trace.
Render = Callable[[Trace | PlainTrace, dict[str, Any], Origin | None], bytes]


def jsonl_render(trace: Trace | PlainTrace, data: dict[str, Any], origin: Origin | None) -> bytes:
    return report_line(data, finite=FINITE)  # the engine's data


@dataclass(slots=True)
class Checked:
    """One trace's rendered output (by default the JSONL line) and its verdict: what a format writes. What
    the totals count was counted where the trace was checked (``Checker.totals``)."""

    line: bytes  # the trace's part of the output, UTF-8 (``Checker.render``'s)
    verdict: str


class Checker:
    """The engine with the command's options: one trace in, its ``Checked`` out, counted in ``totals``."""

    def __init__(
        self,
        engine: Engine,
        threshold: float,
        risk_level: RiskLevel,
        render: Render = jsonl_render,
        explain: Explain = "not-passed",
        *,
        totals: Totals | None = None,
    ) -> None:
        self.engine = engine
        self.threshold = threshold
        self.risk_level: RiskLevel = risk_level
        self.render = render
        self.explain: Explain = explain
        # The run's counts (and its coverage, ``totals.coverage``), counted as each trace is checked; None:
        # nothing is counted (a caller that only wants reports).
        self.totals = totals
        # Rules whose messages quote trace values: `same:` rules quote the arguments they group by, a
        # blocklist names the trace's tool. Every other message is made of the rule file's own words.
        self.quoting = frozenset(
            r.rule_id for r in engine.ruleset.rules if getattr(r, "same", None) or r.type == "blocklist"
        )
        # Where the quoting rules' entries sit in a report's `rules` (one entry per rule, in the rule set's
        # order), so the screen looks at those alone; checked against the entry's id on every use.
        self._quoting_at = [
            (at, comp.rule_id) for at, comp in enumerate(engine.compiled) if comp.rule_id in self.quoting
        ]
        self._rule_count = len(engine.compiled)
        # Texts of the quoting rules that screened clean: most are the same every trace ("No call carries
        # order_id."). Bounded; cleared when full.
        self._clean: set[str] = set()
        # Only some rules are ever deferred (``RuleBase.may_defer``): a `judge` rule without an evaluator
        # always, one with `applies_to` on a trace that calls its tools, a `lineage` rule on a trace whose
        # source it could not read. Testing for a missing evaluator alone hid the others from the deferred
        # counts (issue 37).
        self._may_defer = any(comp.rule.may_defer or comp.evaluate is None for comp in engine.compiled)

    def data(self, trace: Trace | PlainTrace) -> dict[str, Any]:
        """The trace's report data as it may be shown (redacted); views that need no JSON line use this."""
        return self._redacted(
            self.engine.check_data(
                trace, threshold=self.threshold, risk_level=self.risk_level, explain=self.explain
            )
        )

    def checked(self, trace: Trace | PlainTrace, origin: Origin | None = None) -> Checked:
        data = self.data(trace)
        totals = self.totals
        if totals is not None:
            rules = data["rules"]
            trace_id = str(data["trace_id"])
            totals.count(
                data["verdict"],
                list(map(_RULE_ID, data["violations"])),  # (a comprehension is a call of its own)
                [r["rule_id"] for r in rules if r["outcome"] == "deferred"] if self._may_defer else [],
                trace_id,
            )
            if totals.coverage is not None:
                totals.coverage.add_trace(trace, rules, trace_id)
        return Checked(self.render(trace, data, origin), data["verdict"])

    def counting(self, totals: Totals | None) -> Checker:
        """This checker counting into ``totals`` instead (a worker's chunk)."""
        other = copy.copy(self)
        other.totals = totals
        return other

    def _redacted(self, data: dict[str, Any]) -> dict[str, Any]:
        """A report as it may be shown, redacted by ``seqjudge.redact``'s policy.

        Trace values reach a report only as the trace id and in what the quoting rules (``self.quoting``)
        say: those texts are screened, not the whole line (a whole-line screen cost 0.5 ms a trace), and
        of those only the ones not screened clean before (``self._clean``)."""
        texts = [str(data.get("trace_id"))]
        quoting = self.quoting
        if quoting:
            rules = data["rules"]
            # (loops rather than comprehensions: a comprehension is a call of its own, per trace)
            items = []
            if len(rules) == self._rule_count:
                for at, rule_id in self._quoting_at:
                    item = rules[at]
                    if item["rule_id"] == rule_id:
                        items.append(item)
            if len(items) != len(self._quoting_at):  # not the engine's order: look at every entry
                items = [item for item in rules if item["rule_id"] in quoting]
            for item in data["violations"]:
                if item["rule_id"] in quoting:
                    items.append(item)
            clean = self._clean
            fresh: list[str] = []
            for item in items:
                if "explanation" not in item:
                    continue  # a lean report's passed entry: its rule's identity and outcome alone
                text = item["explanation"]
                if text and text not in clean:
                    fresh.append(text)
                text = item.get("actual_order")
                if text and text not in clean:
                    fresh.append(text)
                if item.get("details"):
                    fresh.append(json.dumps(item["details"], ensure_ascii=False, default=str))
            if fresh:
                if may_need_redaction("\n".join(fresh)):
                    texts += fresh
                else:
                    if len(clean) > _CLEAN_TEXTS:
                        clean.clear()
                    clean.update(fresh)
        # One screen for the rest: a few plain finds, not one per text.
        joined = texts[0] if len(texts) == 1 else "\n".join(texts)
        if may_need_redaction(joined) and any(redact_text(t) != t for t in texts):
            data = redact_value(data, keys=False)
        return data


_CLEAN_TEXTS = 4096  # texts a checker remembers as clean
_RULE_ID = itemgetter("rule_id")


def _check_record(checker: Checker, record: Record, source: Source, options: Options) -> Done:
    assert record.line is not None
    trace = native.parse_line(record, options)  # a JSONL record is one trace
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
    """The ``Options.native_lines`` hook for one ``seqjudge check`` run (a pool per file, started lazily).

    ``join``: the writer joins the parts of a worker's chunk into one bytes there (``CheckOutput.joins``),
    and ``failures_only`` leaves passing traces out of it; else each trace's part comes back."""

    def __init__(
        self,
        checker: Checker,
        *,
        workers: int | None = None,
        inline: int | None = None,
        join: bool = False,
        failures_only: bool = False,
    ) -> None:
        self.checker = checker
        self.requested = workers
        self._workers: int | None = None
        self.inline = INLINE if inline is None else inline
        self.join = join
        self.failures_only = failures_only

    @property
    def workers(self) -> int:
        """Worker processes to start. Decided when first asked (it imports multiprocessing): a file with no
        more records than are checked inline loads none of it. An explicit count is honoured where workers
        can be forked; elsewhere everything runs here."""
        if self._workers is None:
            requested = self.requested
            self._workers = worker_count() if requested is None else (requested if forkable() else 0)
        return self._workers

    def __call__(
        self, records: Iterator[Record], source: Source, options: Options, blocks: Blocks
    ) -> Iterator[Done | Batch]:
        options = replace(options, native_lines=None)
        # Read ahead (lines are cheap to read) to tell a small file from a large one before checking any.
        head: list[Record] = []
        size = 0
        unread: Exception | None = None  # a reading error, raised where the single-process path meets it
        try:
            for record in records:
                head.append(record)
                size += len(record.raw)
                if len(head) > self.inline or size > READ_AHEAD:
                    break
        except Exception as exc:
            unread = exc
        if len(head) > self.inline and self.workers > 0:
            yield from self._pooled(head, records, len(head), blocks, source, options)
            return
        # A small file (or one of large records, or no workers): the first records here, as they come.
        ahead = itertools.chain(head, records)
        for record in islice(ahead, self.inline):
            yield _check_record(self.checker, record, source, options)
        if unread is not None:
            raise unread
        following = next(ahead, None)
        if following is None:
            return  # everything was checked here: no worker question asked
        if self.workers < 1:
            yield _check_record(self.checker, following, source, options)
            for record in ahead:
                yield _check_record(self.checker, record, source, options)
            return
        # The records taken so far: the head and any read after it.
        taken = max(len(head), self.inline + 1)
        yield from self._pooled(
            [following, *head[self.inline + 1 :]], records, taken, blocks, source, options
        )

    def _pooled(
        self,
        held: list[Record],
        records: Iterator[Record],
        taken: int,
        blocks: Blocks,
        source: Source,
        options: Options,
    ) -> Iterator[Done | Batch]:
        """Check ``held``, then the rest of ``records``, in worker chunks; ``taken``: records taken from
        ``records`` so far (past them the file is read in blocks when it can be, not a line at a time)."""
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        global _STATE
        slots = self.workers * AHEAD  # chunks in flight, each with its slot of the ring
        # Joined output comes back through memory shared with the workers (anonymous, mapped before the
        # fork): a chunk's output, megabytes, is then not copied out of a pipe and unpickled here.
        ring = mmap.mmap(-1, slots * SLOT) if self.join else None
        free = deque(range(slots))
        _STATE = (self.checker, source, options, ring, self.failures_only)  # inherited by the workers
        # What is alive now lives until the run ends: no collection should walk it again, here or in a
        # worker (where walking it would also copy every page it sits on).
        gc.freeze()
        pool = ProcessPoolExecutor(
            self.workers, mp_context=multiprocessing.get_context("fork"), initializer=_ignore_interrupts
        )
        self.broken = False
        chunks = itertools.chain(_record_chunks(iter(held)), _rest_chunks(records, taken, blocks))
        pending: deque[tuple[Chunk, int, Future[_Result] | None]] = deque()
        unread: Exception | None = None  # a reading error, raised where the single-process path meets it
        totals = self.checker.totals
        stats = options.stats
        try:
            while True:
                while unread is None and len(pending) < self.workers * AHEAD:
                    try:
                        chunk = next(chunks, None)
                    except Exception as exc:
                        unread = exc
                        break
                    if chunk is None:
                        break
                    slot = free.popleft()
                    pending.append((chunk, slot, self._submit(pool, chunk, slot)))
                if not pending:
                    if unread is not None:
                        raise unread
                    return
                chunk, slot, future = pending.popleft()
                trace_ids, lines, verdicts, output, ends, counted, stopped = self._result(future)
                if totals is not None and counted is not None:
                    totals.merge(counted)
                numbered = type(chunk[1]) is int  # a block: its records are counted here, not as read
                if numbered:
                    stats.records += len(trace_ids)
                if trace_ids:
                    if isinstance(output, list):
                        yield Batch(trace_ids, lines, Checks(verdicts, output, b"", b""))
                    else:
                        joined: bytes | memoryview
                        if isinstance(output, int):  # in the chunk's slot of the ring
                            assert ring is not None
                            joined = memoryview(ring)[slot * SLOT : slot * SLOT + output]
                        else:  # too large for its slot
                            joined = output
                        yield Batch(trace_ids, lines, Checks(verdicts, None, joined, ends))
                if stopped:
                    # Read the record that stopped the worker (and the rest of its chunk) here, to raise
                    # its error exactly as the single-process path does; or the chunk no worker took.
                    for record in islice(_records(source, chunk), len(trace_ids), None):
                        if numbered:
                            stats.records += 1
                        yield _check_record(self.checker, record, source, options)
                free.append(slot)  # its output is written: the writer has returned
        finally:
            # Tasks not started are dropped; a running one finishes its chunk (milliseconds), then every
            # worker exits before this returns, whether the run ended, failed or was interrupted.
            pool.shutdown(wait=True, cancel_futures=True)
            _STATE = None
            gc.unfreeze()

    def _submit(self, pool: ProcessPoolExecutor, chunk: Chunk, slot: int) -> Future[_Result] | None:
        """The chunk's task (its output to the ring's ``slot``, when joined), or None once the pool cannot
        take one (this process reads it instead)."""
        if not self.broken:
            try:
                return pool.submit(_work, *chunk, slot)
            except (OSError, RuntimeError):  # no fork (process limit), or a pool already broken
                self.broken = True
        return None

    def _result(self, future: Future[_Result] | None) -> _Result:
        """A task's results and whether it stopped early; a chunk no worker finished counts as stopped at
        its start, so that this process reads all of it: a worker killed from outside costs time, not
        output."""
        from concurrent.futures.process import BrokenProcessPool

        if future is not None:
            try:
                return future.result()
            except BrokenProcessPool:
                self.broken = True
        return [], [], [], [], b"", None, True


@dataclass(slots=True)
class Checks:
    """The results of a worker's chunk, in input order (a ``Batch``'s): each trace's verdict, and either
    each one's part (``parts``, for a writer that is handed them one by one) or the parts to write joined
    into one bytes (``joined``), with where each trace's share of it ends (``ends``, an array of "Q")."""

    verdicts: list[str]
    parts: list[bytes] | None
    joined: bytes | memoryview  # a view of the ring (``LinePool._pooled``): valid until the next item
    ends: bytes

    def first(self, count: int) -> Checks:
        if self.parts is not None:
            return Checks(self.verdicts[:count], self.parts[:count], b"", b"")
        ends = array("Q", self.ends)[:count]
        return Checks(self.verdicts[:count], None, self.joined[: ends[-1] if ends else 0], ends.tobytes())


# A chunk of records for a worker: whole JSONL lines, and either the number of the line before them (a
# block read from the file: blank lines are in it) or each record's line (records read one at a time).
Chunk = tuple[bytes, int | list[int]]


def _record_chunks(records: Iterator[Record]) -> Iterator[Chunk]:
    """Records read one at a time (the first ones), in chunks of about ``CHUNK`` bytes. Each record's raw
    is one line, with its newline but for the file's last: joined, they split back into the same records."""
    while True:
        chunk: list[Record] = []
        size = 0
        for record in records:
            chunk.append(record)
            size += len(record.raw)
            if size >= CHUNK:
                break
        if not chunk:
            return
        yield b"".join([r.raw for r in chunk]), [r.line or 0 for r in chunk]  # JSONL: every line is set


def _rest_chunks(records: Iterator[Record], taken: int, blocks: Blocks) -> Iterator[Chunk]:
    """The records after the first ``taken``: the file's lines in blocks when it can be read so (nothing
    to do a line here), else the records one at a time."""
    rest = blocks(taken, CHUNK)
    if rest is None:
        yield from _record_chunks(records)
        return
    for after, block in rest:
        yield block, after


def _records(source: Source, chunk: Chunk) -> Iterator[Record]:
    """A chunk's records, as the file's reader made them."""
    raw, lines = chunk
    if type(lines) is int:
        return files.following(source, io.BytesIO(raw), lines)
    assert isinstance(lines, list)
    return (Record(source, line, text) for line, text in zip(lines, io.BytesIO(raw), strict=True))


_STATE: tuple[Checker, Source, Options, mmap.mmap | None, bool] | None = None


def _ignore_interrupts() -> None:
    # Ctrl-C goes to the whole process group: the main process handles it and shuts the pool down.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _work(raw: bytes, lines: int | list[int], slot: int) -> _Result:
    """Check a chunk of records in a worker: each one's trace id, line and verdict, their parts (joined
    into the ring's ``slot`` when the writer joins them: their size comes back, or the bytes when they do
    not fit), the chunk's totals, and whether a record stopped it early (the records from there on are
    left out)."""
    assert _STATE is not None
    checker, source, options, ring, failures_only = _STATE
    totals = checker.totals.fresh() if checker.totals is not None else None
    checker = checker.counting(totals)
    trace_ids: list[str] = []
    numbers: list[int] = []
    parts: list[bytes] = []
    verdicts: list[str] = []
    stopped = False
    for record in _records(source, (raw, lines)):
        try:
            done = _check_record(checker, record, source, options)
        except Exception:  # the main process reads this record again and raises the error itself
            stopped = True
            break
        trace_ids.append(done.trace_id)
        numbers.append(done.line)
        parts.append(done.result.line)
        verdicts.append(done.result.verdict)
    if ring is None:
        return trace_ids, numbers, verdicts, parts, b"", totals, stopped
    if failures_only:
        parts = [part if verdict != "pass" else b"" for part, verdict in zip(parts, verdicts, strict=True)]
    ends = array("Q", itertools.accumulate(map(len, parts)))
    joined = b"".join(parts)
    size = len(joined)
    if size > SLOT:
        return trace_ids, numbers, verdicts, joined, ends.tobytes(), totals, stopped
    ring[slot * SLOT : slot * SLOT + size] = joined
    return trace_ids, numbers, verdicts, size, ends.tobytes(), totals, stopped


# A chunk's results as builtins and one Totals: they cross the pipe several times faster than objects a trace.
_Result = tuple[list[str], list[int], list[str], "list[bytes] | bytes | int", bytes, "Totals | None", bool]
