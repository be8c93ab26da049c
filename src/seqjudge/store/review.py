"""The review queue: items routed for a person, their details, resolutions, and resolved items exported
as golden-dataset labels."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from seqjudge.errors import InputError
from seqjudge.store.codec import _dumps
from seqjudge.store.models import Resolution, ReviewDetail, ReviewItem
from seqjudge.store.results import ResultsMixin

_NAMED = 10  # open item numbers named when one asked for does not exist


class ReviewMixin(ResultsMixin):
    """The ``review_items`` table."""

    @property
    def _REVIEW_SELECT(self) -> str:  # noqa: N802 (a constant of the backend, used as one)
        return (
            "SELECT i.*, r.verdict AS result_verdict, r.score AS result_score, "
            f"{self._json_number('r.result', 'audit_probability')} AS inclusion_probability "
            "FROM review_items i JOIN results r ON r.run_id = i.run_id AND r.trace_id = i.trace_id"
        )

    def _review_item(self, row: sqlite3.Row) -> ReviewItem:
        return ReviewItem(**self._review_fields(row))

    @staticmethod
    def _review_fields(row: sqlite3.Row) -> dict[str, Any]:
        resolution = None
        if row["status"] == "resolved":
            resolution = Resolution(
                verdict=row["resolution_verdict"],
                rules=json.loads(row["resolution_rules"] or "{}"),
                note=row["note"] or "",
                reviewer=row["reviewer"] or "",
                resolved_at=row["resolved_at"],
            )
        return {
            "id": row["id"],
            "run_id": row["run_id"],
            "trace_id": row["trace_id"],
            "reasons": json.loads(row["reasons"]),
            "status": row["status"],
            "created_at": row["created_at"],
            "verdict": row["result_verdict"],
            "score": row["result_score"],
            "resolution": resolution,
            "inclusion_probability": row["inclusion_probability"],
        }

    def review_items(
        self, run: str | None = None, reason: str | None = None, status: str | None = "open"
    ) -> list[ReviewItem]:
        """Review items, oldest first. ``run`` is a run reference (id, prefix, ``latest``); ``status`` is
        ``open``, ``resolved``, or None / ``all`` for both; ``reason`` keeps items routed for that reason."""
        where: list[str] = []
        params: list[Any] = []
        if run is not None:
            where.append("i.run_id = ?")
            params.append(self.resolve_run(run))
        if status not in (None, "all"):
            if status not in ("open", "resolved"):
                raise InputError(
                    f"unknown review status {status!r}", where="--status", hint="use open, resolved or all"
                )
            where.append("i.status = ?")
            params.append(status)
        if reason is not None:
            where.append(self._json_array_holds("i.reasons"))
            params.append(reason)
        sql = self._REVIEW_SELECT + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY i.id"
        return [self._review_item(r) for r in self._read(sql, tuple(params))]

    def review_item(self, item_id: int) -> ReviewDetail:
        rows = self._read(self._REVIEW_SELECT + " WHERE i.id = ?", (item_id,))
        if not rows:
            raise InputError(f"no review item {item_id}", source=self.location, hint=self._items_hint())
        fields = self._review_fields(rows[0])
        stored = self.result(fields["run_id"], fields["trace_id"])
        return ReviewDetail(
            **fields,
            trace=stored.trace,
            result=stored.result,
            attempts=self.attempts(fields["run_id"], fields["trace_id"]),
        )

    def _items_hint(self) -> str:
        """Which item numbers there are: a new store has none, and an example's number names nothing."""
        (count,) = self._read("SELECT COUNT(*) AS n FROM review_items WHERE status = 'open'")
        if not count["n"]:
            return "the store has no open review item: `seqjudge run` routes traces to review"
        rows = self._read("SELECT id FROM review_items WHERE status = 'open' ORDER BY id LIMIT ?", (_NAMED,))
        shown = ", ".join(str(r["id"]) for r in rows)
        more = f" and {count['n'] - len(rows)} more" if count["n"] > len(rows) else ""
        return f"the open items are {shown}{more} (`seqjudge review list` shows them)"

    def _check_resolution(
        self, item_ids: list[int], *, verdict: str, rules: dict[str, str], reviewer: str
    ) -> None:
        """A decision's words checked before anything is written: the verdict, each rule's outcome, the
        reviewer, and that every item exists and has each rule named."""
        if verdict not in ("pass", "fail"):
            raise InputError(
                f"verdict {verdict!r} is not pass or fail",
                where="--verdict",
                hint="a reviewer says pass or fail",
            )
        for rule_id, outcome in rules.items():
            if outcome not in ("pass", "fail"):
                raise InputError(
                    f"rule {rule_id}: {outcome!r} is not pass or fail",
                    where="--rule",
                    hint="write --rule RULE=pass or --rule RULE=fail",
                )
        if not reviewer.strip():
            raise InputError("the reviewer is empty", where="--reviewer", hint="say who decided")
        for item_id in item_ids:
            item = self.review_item(item_id)
            known = [d.rule_id for d in item.result.rules]
            for rule_id in rules:
                if rule_id not in known:
                    raise InputError(
                        f"rule {rule_id!r} is not a rule of trace {item.trace_id} (review item {item_id})",
                        where="--rule",
                        hint=f"its rules are: {', '.join(known) or '(none)'}",
                    )

    def _write_resolution(
        self,
        conn: sqlite3.Connection,
        item_id: int,
        *,
        verdict: str,
        rules: dict[str, str],
        note: str,
        reviewer: str,
        at: str,
    ) -> None:
        """The resolution path: an item resolved is what `review export`, golden labels, rates and audits
        read. Every resolution goes through here (store.team decides when)."""
        conn.execute(
            "UPDATE review_items SET status = 'resolved', resolved_at = ?, reviewer = ?, "
            "resolution_verdict = ?, resolution_rules = ?, note = ? WHERE id = ?",
            (at, self._clean(reviewer), verdict, self._text(rules), self._clean(note), item_id),
        )

    def _review_row(self, item_id: int) -> ReviewItem:
        return self._review_item(self._read(self._REVIEW_SELECT + " WHERE i.id = ?", (item_id,))[0])

    def export_labels(self, out: IO[str], *, run: str | None = None) -> int:
        """Write ``review_labels`` as JSONL lines. Returns the number of lines written."""
        return write_labels(out, self.review_labels(run=run))

    def review_labels(self, *, run: str | None = None) -> list[dict[str, Any]]:
        """Resolved items as golden-dataset labels (trace_id, verdict, rules, labeler, note), one per trace.

        A golden dataset labels each trace once. When a trace was resolved in several runs, resolutions that
        agree (same verdict, no rule labelled both ways) are one label: every rule label of each, every
        reviewer. Resolutions that conflict are an error naming who decided what and when: keeping either
        one would silently drop a person's decision."""
        by_trace: dict[str, list[ReviewItem]] = {}
        for item in self.review_items(run=run, status="resolved"):
            by_trace.setdefault(item.trace_id, []).append(item)
        return [_label(trace_id, items) for trace_id, items in by_trace.items()]


def write_labels(out: IO[str], labels: list[dict[str, Any]]) -> int:
    """``review_labels``'s labels as JSONL lines; returns how many."""
    for label in labels:
        out.write(_label_line(label))
    return len(labels)


def _label_line(label: dict[str, Any]) -> str:
    return _dumps(label) + "\n"


def _lines(path: Path) -> list[str]:
    """The file's lines as they are (line ends kept, none translated), numbered as ``golden`` numbers them."""
    with path.open(encoding="utf-8", newline="") as handle:
        return handle.read().splitlines(keepends=True)


def _trace_id(line: str) -> str | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    trace_id = record.get("trace_id") if isinstance(record, dict) else None
    return trace_id if isinstance(trace_id, str) else None


def dropped_labels(path: Path, labels: list[dict[str, Any]]) -> int:
    """How many labels of the existing file ``path`` writing ``labels`` over it would lose: its non-blank
    lines that are not a label of one of ``labels``' traces (0 for a missing, empty or non-regular file)."""
    if not path.is_file():
        return 0
    try:
        lines = _lines(path)
    except (OSError, UnicodeDecodeError):
        return 0  # unreadable here: open_output reports what is wrong with writing it
    exported = {label["trace_id"] for label in labels}
    return sum(1 for line in lines if line.strip() and _trace_id(line) not in exported)


@dataclass(frozen=True)
class Merge:
    """``labels`` merged into a dataset's labels file: its new ``text`` and which traces changed."""

    path: Path
    text: str
    replaced: list[str]
    added: list[str]


def merge_labels(directory: Path, labels: list[dict[str, Any]]) -> Merge:
    """The dataset's labels file with ``labels`` merged in: a trace's existing line is replaced where it
    stands, a trace of the dataset without a label gets a line at the end, every other line is kept as it
    is. An ``InputError`` (nothing to write) when the dataset or its labels file cannot be read, or when a
    label is for a trace the dataset does not hold (its labels describe its traces, nothing else) or names
    a rule the dataset does not have."""
    from seqjudge.golden import errors, load_dataset, read_dataset

    dataset, problems = read_dataset(directory)
    if dataset is None:
        load_dataset(directory)  # raises every error, as `golden validate` reports them
        raise AssertionError("unreachable: read_dataset gave no dataset without an error")
    path = dataset.labels_path
    # An unlabelled trace is what an export may add; an error in the labels file itself (a duplicate, bad
    # JSON) would make "the trace's line" ambiguous, so the dataset is fixed first.
    if any(p.file == str(path) for p in errors(problems)):
        load_dataset(directory)
    known = {t.trace_id for t in dataset.traces if t.trace_id}
    unknown = [label["trace_id"] for label in labels if label["trace_id"] not in known]
    if unknown:
        raise InputError(
            f"{len(unknown)} exported label(s) are for traces that {directory} does not hold: "
            f"{', '.join(unknown[:_NAMED])}{' ...' if len(unknown) > _NAMED else ''}; nothing was written",
            source=str(dataset.traces_path),
            where="review export --into",
            hint="a dataset's labels describe its own traces: export one run's labels with --run RUN, "
            "or add those traces to the dataset's traces.jsonl first",
        )
    rule_ids = {rule.rule_id for rule in dataset.ruleset.rules}
    foreign = sorted({r for label in labels for r in label["rules"] if r not in rule_ids})
    if foreign:  # the merged dataset would not validate: say so now, not at the next calibration
        raise InputError(
            f"exported labels name rule(s) that {directory} does not have: {', '.join(foreign)}; "
            "nothing was written",
            source=str(dataset.rules_path),
            where="review export --into",
            hint="export the run that was checked with this dataset's rules (--run RUN)",
        )
    new = {label["trace_id"]: _label_line(label) for label in labels}
    lines = _lines(path)
    replaced: list[str] = []
    for number, line in enumerate(lines):
        trace_id = _trace_id(line) if line.strip() else None
        if trace_id is not None and trace_id in new:
            lines[number] = new.pop(trace_id)
            replaced.append(trace_id)
    if new and lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n"
    lines.extend(new.values())
    return Merge(path=path, text="".join(lines), replaced=replaced, added=list(new))


def _label(trace_id: str, items: list[ReviewItem]) -> dict[str, Any]:
    """One trace's label from its resolved items (oldest first), or an InputError if they conflict."""
    resolved = [(item, item.resolution) for item in items if item.resolution is not None]
    resolved.sort(key=lambda pair: pair[1].resolved_at)
    rules: dict[str, str] = {}
    conflict = len({res.verdict for _, res in resolved}) > 1
    for _, res in resolved:
        for rule_id, outcome in res.rules.items():
            conflict = conflict or rules.get(rule_id, outcome) != outcome
            rules[rule_id] = outcome
    if conflict:
        told = "; ".join(
            f"item {item.id} (run {item.run_id}): {res.verdict}"
            + (f" ({', '.join(f'{k}={v}' for k, v in sorted(res.rules.items()))})" if res.rules else "")
            + f" by {res.reviewer} at {res.resolved_at.isoformat(timespec='seconds')}"
            for item, res in resolved
        )
        raise InputError(
            f"trace {trace_id} has conflicting resolutions: {told}",
            where="review export",
            hint="a golden dataset labels each trace once: resolve the items again so that they agree "
            "(`seqjudge review resolve ITEM --verdict ... --reviewer ...` replaces an item's resolution), "
            "or export one run's labels with --run RUN",
        )
    reviewers = list(dict.fromkeys(res.reviewer for _, res in resolved))
    notes = list(dict.fromkeys(res.note for _, res in resolved if res.note))
    return {
        "trace_id": trace_id,
        "verdict": resolved[-1][1].verdict,
        "rules": rules,
        "labeler": ", ".join(reviewers),
        "note": " | ".join(notes),
    }
