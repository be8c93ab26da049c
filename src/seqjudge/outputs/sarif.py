"""`seqjudge check --format sarif`: the violations as one SARIF 2.1.0 log, for code-scanning tools.

One result per violation: ``ruleId`` the rule's id, ``level`` from its severity (critical -> error, warning ->
warning), the message the FAIL block's Why (with what was expected and what happened). Its location is the
trace file when the traces came from one file (a folder or stdin names no single file), with the line when
the trace has no id of its own (its default id is ``FILE:LINE``); the trace and the call always go in a
logical location, ``TRACE_ID/calls[N]``. Every rule of the rule set is described once in
``tool.driver.rules``. What the engine could not decide (deferred ``judge`` rules, traces routed to review)
is counted in the run's properties and named in a notification, never left out silently.
"""

from __future__ import annotations

import json
import re
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import IO, Any

from seqjudge.outputs.check import CheckOutput, deferred_note
from seqjudge.outputs.textview import Totals
from seqjudge.trace import PlainTrace, Trace

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
LEVELS = {"critical": "error", "warning": "warning"}
# A JSONL trace without its own id is named after where it was read: FILE:LINE, or FILE:LINE[INDEX] for
# one of several conversations on that line (ingest.base.Record.default_id).
_DEFAULT_ID = re.compile(r"^(?P<file>.+):(?P<line>\d+)(\[\d+\])?$")


def _version() -> str:
    try:
        return version("seqjudge")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree that was never installed
        return "unknown"


def _uri(path: str) -> str:
    p = Path(path)
    return p.as_uri() if p.is_absolute() else p.as_posix()


class SarifOutput(CheckOutput):
    def __init__(self, out: IO[str], *, source: str) -> None:
        super().__init__(out, source=source)
        self.rules: dict[str, dict[str, Any]] = {}  # rule id -> its reportingDescriptor, first-seen order
        self.results: list[dict[str, Any]] = []
        self.one_file = source != "-" and Path(source).is_file()
        self.folder = source != "-" and Path(source).is_dir()
        self._files: dict[Path, bool] = {}  # one stat per file, not per violation

    def _describe(self, data: dict[str, Any]) -> None:
        described = {v["rule_id"]: v["rule_description"] for v in data["violations"]}
        for r in data["rules"]:
            if r["rule_id"] in self.rules:
                continue
            text = described.get(r["rule_id"]) or f"{r['type']} rule {r['rule_id']}"
            self.rules[r["rule_id"]] = {
                "id": r["rule_id"],
                "shortDescription": {"text": text},
                "defaultConfiguration": {"level": LEVELS[r["severity"]]},
                "properties": {"type": r["type"]},
            }

    def _is_file(self, path: Path) -> bool:
        if path not in self._files:
            self._files[path] = path.is_file()
        return self._files[path]

    def _physical(self, trace_id: str) -> dict[str, Any] | None:
        """The trace's file (and line when its default id gives it); None when no single file is known."""
        if self.source == "-":
            return None
        root = Path(self.source)
        file: Path | None = root if self.one_file else None
        line = None
        found = _DEFAULT_ID.match(trace_id)
        if found is not None:
            # Default ids are FILE:LINE with FILE relative to a folder argument, or the file's own name.
            named = root / found["file"] if self.folder else (root if found["file"] == root.name else None)
            if named is not None and self._is_file(named):
                file, line = named, int(found["line"])
        if file is None:
            return None
        physical: dict[str, Any] = {"artifactLocation": {"uri": _uri(str(file))}}
        if line is not None:
            physical["region"] = {"startLine": line}
        return physical

    def report(self, trace: Trace | PlainTrace, data: dict[str, Any]) -> None:
        self._describe(data)
        index = {rule_id: n for n, rule_id in enumerate(self.rules)}
        trace_id = data["trace_id"]
        for v in data["violations"]:
            call = v["offending_call_index"]
            where = f"{trace_id}/calls[{call}]" if call is not None else trace_id
            location: dict[str, Any] = {
                "logicalLocations": [{"name": where, "fullyQualifiedName": where, "kind": "member"}]
            }
            physical = self._physical(trace_id)
            if physical is not None:
                location["physicalLocation"] = physical
            self.results.append(
                {
                    "ruleId": v["rule_id"],
                    "ruleIndex": index[v["rule_id"]],
                    "level": LEVELS[v["severity"]],
                    "message": {
                        "text": f"{trace_id}: {v['explanation']} Expected: {v['expected_order']}. "
                        f"Actual: {v['actual_order']}."
                    },
                    "locations": [location],
                    "properties": {
                        "traceId": trace_id,
                        "callIndex": call,
                        "violationType": v["violation_type"],
                        "verdict": data["verdict"],
                    },
                }
            )

    def finish(self, totals: Totals) -> None:
        deferred = deferred_note(totals)
        notes = [{"level": "note", "message": {"text": deferred}}] if deferred else []
        if totals.verdicts["review"]:
            notes.append(
                {
                    "level": "note",
                    "message": {"text": f"{totals.verdicts['review']} trace(s) routed to review."},
                }
            )
        log = {
            "$schema": SCHEMA,
            "version": "2.1.0",
            "runs": [
                {
                    "tool": {
                        "driver": {
                            "name": "seqjudge",
                            "version": _version(),
                            "rules": list(self.rules.values()),
                        }
                    },
                    "invocations": [
                        {"executionSuccessful": True, "toolExecutionNotifications": notes},
                    ],
                    "results": self.results,
                    "properties": {"summary": totals.as_dict()},
                }
            ],
        }
        json.dump(log, self.out, ensure_ascii=False, indent=2)
        self.out.write("\n")
