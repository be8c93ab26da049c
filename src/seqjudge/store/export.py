"""A run's results written out (JSONL, enough to rebuild every report without the database; or CSV, one row
per trace) and a JSONL export read back."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from typing import IO, Literal, TextIO

from seqjudge.errors import InputError
from seqjudge.safetext import csv_cell
from seqjudge.store.codec import _dumps, rebuild_result
from seqjudge.store.models import RunInfo, StoredResult
from seqjudge.store.review import ReviewMixin
from seqjudge.trace import Trace


def read_export(stream: TextIO) -> Iterator[tuple[RunInfo, StoredResult]]:
    """Read back a JSONL export (``Store.export(..., "jsonl")``) without the database."""
    for number, line in enumerate(stream, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            run = RunInfo.model_validate(row["run"])
            stored = StoredResult(
                run_id=run.id,
                trace_id=row["result"]["trace_id"],
                saved_at=row.get("saved_at") or run.started_at,
                trace=Trace.model_validate(row["trace"]),
                result=rebuild_result(row["result"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(
                f"not a seqjudge JSONL export line ({exc})",
                source=getattr(stream, "name", None),
                where=f"line {number}",
                hint="export runs with `seqjudge runs export RUN --format jsonl`",
            ) from None
        yield run, stored


class ExportMixin(ReviewMixin):
    """Exports of a run."""

    def export(self, run_id: str, fmt: Literal["jsonl", "csv"], out: IO[str]) -> int:
        """Write the run's results; returns how many traces were written.

        jsonl: one self-contained line per trace, ``{run, trace, result, review, saved_at}``, enough to
        rebuild every report without the database (``read_export``). csv: one row per trace, each cell
        that starts like a spreadsheet formula (``=``, ``+``, ``-``, ``@``, tab, CR) after a ``'``."""
        if fmt not in ("jsonl", "csv"):
            raise InputError(f"unknown export format {fmt!r}", where="--format", hint="use jsonl or csv")
        run = self.run_info(run_id)
        reviews = {item.trace_id: item for item in self.review_items(run=run_id, status=None)}
        count = 0
        if fmt == "jsonl":
            head = run.model_dump(mode="json")
            for stored in self.results(run_id):
                item = reviews.get(stored.trace_id)
                line = {
                    "run": head,
                    "trace": stored.trace.model_dump(mode="json"),
                    "result": stored.result.model_dump(mode="json"),
                    "review": None if item is None else item.model_dump(mode="json"),
                    "saved_at": stored.saved_at.isoformat(),
                }
                out.write(_dumps(line) + "\n")
                count += 1
            return count
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(
            [
                "trace_id",
                "verdict",
                "score",
                "review_reasons",
                "rules_failed",
                "disagreements",
                "judge_status",
                "tokens_in",
                "tokens_out",
                "review_item",
                "review_status",
            ]
        )
        rows = self._read(
            "SELECT trace_id, verdict, score, review_reasons, judge_status, tokens_in, tokens_out "
            "FROM results WHERE run_id = ? ORDER BY seq",
            (run_id,),
        )
        failed: dict[str, list[str]] = {}
        split: dict[str, list[str]] = {}
        for r in self._read(
            "SELECT trace_id, rule_id, final, agree FROM rule_decisions WHERE run_id = ? "
            "ORDER BY trace_id, position",
            (run_id,),
        ):
            if r["final"] == "failed":
                failed.setdefault(r["trace_id"], []).append(r["rule_id"])
            if r["agree"] == 0:
                split.setdefault(r["trace_id"], []).append(r["rule_id"])
        for r in rows:
            item = reviews.get(r["trace_id"])
            # A trace id or rule id a spreadsheet would read as a formula (=HYPERLINK(...)) is kept as text.
            writer.writerow(
                map(
                    csv_cell,
                    [
                        r["trace_id"],
                        r["verdict"],
                        f"{r['score']:.4f}",
                        ";".join(json.loads(r["review_reasons"])),
                        ";".join(failed.get(r["trace_id"], [])),
                        ";".join(split.get(r["trace_id"], [])),
                        r["judge_status"],
                        r["tokens_in"],
                        r["tokens_out"],
                        "" if item is None else item.id,
                        "" if item is None else item.status,
                    ],
                )
            )
            count += 1
        return count
