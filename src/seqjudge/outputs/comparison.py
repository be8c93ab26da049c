"""`seqjudge compare`'s verdict (text or JSON), `seqjudge report-ci`'s one-line summary, and the CI files
both commands write (--junit, --markdown, --github)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING
from xml.etree.ElementTree import ElementTree

from seqjudge.compare import Comparison
from seqjudge.outputs.ci_outputs import Pair, append_step_summary, failed_blocks, write_junit
from seqjudge.outputs.streams import open_output

if TYPE_CHECKING:
    from seqjudge.rates import RateComparison

REGRESSIONS_SHOWN = 3  # actionable blocks printed in full by `compare`'s text output


@dataclass
class ComparisonView:
    """What `seqjudge compare` shows: the comparison, which runs it compared, the candidate's traces."""

    result: Comparison
    baseline: str
    candidate: str
    candidate_pairs: Sequence[Pair] = ()
    rates: RateComparison | None = None  # `compare --rates`: the judge rules' changes in violation rate


def comparison_text(view: ComparisonView, out: IO[str]) -> None:
    lines = comparison_lines(view.result, view.baseline, view.candidate)
    if view.rates is not None:
        from seqjudge.outputs.rates import difference_lines

        lines += difference_lines(view.rates)
    out.write("\n".join(lines + regression_blocks(view.result, view.candidate_pairs)) + "\n")


def comparison_json(view: ComparisonView, out: IO[str]) -> None:
    data = view.result.model_dump(mode="json")
    if view.rates is not None:
        data["rates"] = view.rates.model_dump(mode="json")
    out.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


@dataclass
class RunCounts:
    """What `seqjudge report-ci` says of one run."""

    name: str  # "seqjudge run RUN"
    run: str
    counts: dict[str, int]
    written: list[str] = field(default_factory=list)  # "JUnit PATH", "markdown PATH"


def run_counts_text(view: RunCounts, out: IO[str]) -> None:
    c = view.counts
    out.write(
        f"{view.name}: {sum(c.values())} trace(s): {c['pass']} pass, {c['fail']} fail, {c['review']} review\n"
    )
    if view.written:
        out.write("wrote " + ", ".join(view.written) + "\n")


def run_counts_json(view: RunCounts, out: IO[str]) -> None:
    out.write(json.dumps({"run": view.run, "traces": sum(view.counts.values()), **view.counts}) + "\n")


def write_ci(
    *,
    junit: Path | None,
    markdown: Path | None,
    github: bool,
    junit_tree: Callable[[], ElementTree],
    markdown_text: Callable[[], str],
    annotations: Callable[[], list[str]],
    inputs: Iterable[Path | str | None] = (),
) -> None:
    """The CI outputs asked for: JUnit XML to ``junit``, the markdown to ``markdown`` (- for stdout), and
    with ``github`` the workflow annotations on stdout and the markdown appended to the job summary.
    ``inputs``: what the command read, which neither output may replace."""
    if junit is not None:
        write_junit(junit_tree(), junit, inputs=inputs)
    md = markdown_text() if (markdown is not None or github) else ""
    if markdown is not None:
        with open_output(markdown, inputs=inputs, option="--markdown") as out:
            out.write(md)
    if github:
        for line in annotations():
            sys.stdout.write(line + "\n")
        append_step_summary(md)


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def comparison_lines(c: Comparison, base: str, cand: str) -> list[str]:
    """The comparison as text; ``base`` and ``cand`` say which runs were compared."""
    b, k = c.baseline, c.candidate
    lines = [
        f"Compare: baseline {base}, {b.traces} traces; candidate {cand}, {k.traces} traces",
        f"  {c.matched} matched; {len(c.only_in_baseline)} only in the baseline; "
        f"{len(c.only_in_candidate)} only in the candidate",
        f"  {'':<16}{'baseline':>10}{'candidate':>11}",
    ]
    for key in ("pass", "fail", "review"):
        delta = k.counts[key] - b.counts[key]
        lines.append(f"  {key:<16}{b.counts[key]:>10}{k.counts[key]:>11}   ({delta:+d})")
    pr = c.pass_rate
    lines.append(
        f"  {'pass rate':<16}{_rate(pr['baseline']):>10}{_rate(pr['candidate']):>11}   "
        f"({100 * (pr['candidate'] - pr['baseline']):+.1f} pts, matched traces)"
    )
    s = c.score
    lines.append(
        f"  {'mean score':<16}{s.baseline_mean:>10.3f}{s.candidate_mean:>11.3f}   ({s.mean_change:+.3f}, "
        f"{s.level:.0%} bootstrap interval [{s.interval[0]:+.3f}, {s.interval[1]:+.3f}])"
    )
    lines.append(f"  {'agreement':<16}{_rate(b.agreement):>10}{_rate(k.agreement):>11}")
    if k.status not in (None, "completed"):
        lines.append(f"  note: the candidate run is {k.status}: it may miss traces")
    if c.worse:
        shown = {ch.trace_id: ch for ch in c.changes}
        items = [f"{t} pass->{shown[t].candidate}" for t in c.worse[:10] if t in shown]
        more = f" and {len(c.worse) - 10} more" if len(c.worse) > 10 else ""
        lines.append(f"Worse ({len(c.worse)}): " + ", ".join(items) + more)
    if c.better:
        more = f" and {len(c.better) - 10} more" if len(c.better) > 10 else ""
        lines.append(f"Fixed ({len(c.better)}): " + ", ".join(c.better[:10]) + more)
    for title, ids in (
        ("Only in the baseline", c.only_in_baseline),
        ("Only in the candidate", c.only_in_candidate),
    ):
        if ids:
            more = f" and {len(ids) - 10} more" if len(ids) > 10 else ""
            lines.append(f"{title} ({len(ids)}): " + ", ".join(ids[:10]) + more)
    moved = [r for r in c.rules if r.new or r.fixed]
    if moved:
        width = max(len(r.rule_id) for r in moved)
        lines.append("Rules that changed (final outcomes, matched traces):")
        lines.append(f"  {'rule':<{width}}  {'decided by':<10}  failing    new  fixed  McNemar p")
        for r in moved:
            p = "" if r.p_value is None else f"{r.p_value:.3g}"
            failing = f"{r.baseline_failed}->{r.candidate_failed}"
            lines.append(
                f"  {r.rule_id:<{width}}  {r.decided_by:<10}  {failing:<9}  {len(r.new):>3}  "
                f"{len(r.fixed):>5}  {p}".rstrip()
            )
    for title, ids in (
        ("Rules only in the baseline (not compared)", c.rules_only_in_baseline),
        ("Rules only in the candidate (not compared)", c.rules_only_in_candidate),
    ):
        if ids:
            lines.append(f"{title}: " + ", ".join(ids))
    fired = [d.rule for d in c.fired]
    lines.append(f"Decision: {'REGRESSION (' + ', '.join(fired) + ')' if fired else 'no regression'}")
    for d in c.decisions:
        mark = "FIRED" if d.fired else ("ok" if d.applies else "n/a")  # n/a: not set, or nothing to compare
        lines.append(f"  {mark:<5} {d.rule}: {d.reason}")
    return lines


def regression_blocks(c: Comparison, candidate: Sequence[Pair]) -> list[str]:
    """The actionable blocks of the first regressed traces."""
    pairs = {r.trace_id: (t, r) for t, r in candidate}
    judge_fired = c.decision("judge_paired").fired
    counted = [
        (ch.trace_id, ch.deterministic_regressions or (ch.new_violations if judge_fired else []))
        for ch in c.changes
    ]
    counted = [(t, rules) for t, rules in counted if rules and t in pairs]
    if not counted:
        return []
    shown = counted[:REGRESSIONS_SHOWN]
    lines = ["", f"Regressions in full ({len(shown)} of {len(counted)} trace(s)):", ""]
    for trace_id, rules in shown:
        lines += [*failed_blocks(*pairs[trace_id], rules), ""]
    return lines
