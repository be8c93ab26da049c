"""`seqjudge judge`'s formats: each trace's engine and judge outcomes side by side (text), one JSON document,
or one JSON row a line. A row is what ``crosscheck.reconcile`` decided, with both reports (see
``cli.judge_cmd``); ``finish`` receives the run's summary."""

from __future__ import annotations

import json
from typing import IO, Any

from seqjudge.safetext import terminal, terminal_stream


class JudgeOutput:
    def __init__(self, out: IO[str]) -> None:
        self.out = out

    def row(self, row: dict[str, Any]) -> None:
        """Called as each trace is judged."""

    def finish(self, rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
        """Called once after the last trace."""


class TextOutput(JudgeOutput):
    def __init__(self, out: IO[str]) -> None:
        super().__init__(terminal_stream(out))  # the judge's words and the trace's names: no escape codes

    def row(self, row: dict[str, Any]) -> None:
        self.out.write(trace_text(row) + "\n")

    def finish(self, rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
        self.out.write(total_line(summary) + "\n")


class JsonOutput(JudgeOutput):
    def finish(self, rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
        json.dump({"summary": summary, "results": rows}, self.out, ensure_ascii=False, indent=2)
        self.out.write("\n")


class JsonlOutput(JudgeOutput):
    def row(self, row: dict[str, Any]) -> None:
        self.out.write(json.dumps(row, ensure_ascii=False) + "\n")


def trace_text(row: dict[str, Any]) -> str:
    """One trace: both verdicts, then each rule's engine and judge outcome, then the judge's words."""
    engine, result = row["engine"], row["judge"]
    fp = result["fingerprint"]
    if result["status"] == "scored":
        judged = (
            f"judge {row['judge_verdict']} (score {result['report']['sequence_correctness_score']:.2f}, "
            f"{fp['attempts_used']} attempt(s), {fp['provider']}:{fp['model']})"
        )
    else:
        judged = f"judge UNSCORED ({result['reason']})"
    lines = [
        f"{row['verdict'].upper():8} {terminal(row['trace_id'])}: engine {engine['verdict']} "
        f"(score {engine['sequence_correctness_score']:.2f}), {judged}"
    ]
    width = max([len(r["rule_id"]) for r in row["rules"]] + [4])
    lines.append(f"    {'rule':<{width}}  {'engine':<14}  judge")
    for r in row["rules"]:
        mark = {True: "agree", False: "DISAGREE", None: ""}[r["agree"]]
        lines.append(f"    {r['rule_id']:<{width}}  {r['engine']:<14}  {r['judge']:<10}  {mark}".rstrip())
    if result["status"] == "scored":
        lines.append(f"    judge summary: {terminal(result['report']['summary'])}")  # one line
        for v in result["report"]["violations"]:
            at = "" if v["offending_call_index"] is None else f" at call {v['offending_call_index'] + 1}"
            lines.append(f"    judge: {v['rule_id']} {v['violation_type']}{at}: {terminal(v['explanation'])}")
    return "\n".join(lines) + "\n"


def total_line(s: dict[str, Any]) -> str:
    agree = (
        f"judge and engine agree on {s['agreements']} of {s['rule_decisions_compared']} rule decision(s)"
        if s["rule_decisions_compared"]
        else "no rule decision to compare"
    )
    cache = f", {s['cache']['hits']} cached answer(s)" if s["cache"] else ""
    return (
        f"{s['traces']} trace(s): {s['pass']} pass, {s['fail']} fail, {s['review']} review "
        f"({s['unscored']} unscored); {agree}; tokens: {s['tokens']['input']} in "
        f"({s['tokens']['cached_input']} cached), {s['tokens']['output']} out{cache}."
    )
