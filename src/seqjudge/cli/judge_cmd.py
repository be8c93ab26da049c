"""`seqjudge prompt` (print what the model sees) and `seqjudge judge` (the LLM judge beside the engine)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import IO, Annotated, Any

import typer

from seqjudge.cli.app import app
from seqjudge.cli.check_cmd import (
    CatalogOpt,
    ErrorPatternOpt,
    Format,
    FormatOpt,
    MessagesKeyOpt,
    OutputOpt,
    Risk,
    RiskOpt,
    RulesArg,
    ThresholdOpt,
    TraceFormatOpt,
    TracesArg,
    VerboseOpt,
    open_output,
)
from seqjudge.errors import InputError, ProviderError
from seqjudge.judge.providers.registry import key_variables
from seqjudge.report import DEFAULT_THRESHOLD, Report, RiskLevel
from seqjudge.rules.model import RuleSet

ExamplesOpt = Annotated[
    Path | None,
    typer.Option(
        "--examples",
        help="Worked examples for the judge (YAML); default: the shipped prompts/examples/default.yaml.",
    ),
]
DECIDED = ("passed", "failed")


def load_inputs(rules: Path, catalog: Path | None) -> tuple[RuleSet, Any]:
    """The rule set and its catalog (the flag, else the rule file's `catalog:`, relative to the rule file)."""
    import warnings

    from seqjudge.rules.load import load_rules

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ruleset = load_rules(rules)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    path = catalog
    if path is None and ruleset.catalog:
        path = Path(ruleset.catalog)
        if not path.is_absolute():
            path = rules.parent / path
    if path is None:
        return ruleset, None
    from seqjudge.rules.catalog import load_catalog

    return ruleset, load_catalog(path)


def _traces(traces: str, **options: Any) -> Any:
    from seqjudge.ingest import load_traces

    return load_traces(traces, **options)


@app.command()
def prompt(
    rules: RulesArg,
    trace: TracesArg,
    catalog: CatalogOpt = None,
    examples: ExamplesOpt = None,
    risk_level: RiskOpt = Risk.medium,
    trace_id: Annotated[
        str | None, typer.Option("--trace-id", help="Which trace of the file (default: the first).")
    ] = None,
    trace_format: TraceFormatOpt = None,
    messages_key: MessagesKeyOpt = None,
    error_pattern: ErrorPatternOpt = None,
    judge_mode: Annotated[
        str,
        typer.Option("--judge-mode", help="full (every rule) or contextual (only judge rules), as in run."),
    ] = "full",
) -> int:
    """Print the judge prompt for one trace exactly as the model sees it: the system prompt, then the user
    content."""
    from seqjudge.config import judge_rule_ids
    from seqjudge.judge.prompt import catalog_names, load_examples, render
    from seqjudge.judge.validate import check_inputs

    ruleset, cat = load_inputs(rules, catalog)
    rule_ids = judge_rule_ids(ruleset, judge_mode)
    if not rule_ids:
        raise InputError(
            "the rule file has no `judge` rule, so a contextual run asks the judge nothing",
            source=str(rules),
            hint="use --judge-mode full, or add a rule with type: judge",
        )
    chosen = None
    count = 0
    for t in _traces(trace, format=trace_format, messages_key=messages_key, error_pattern=error_pattern):
        count += 1
        if chosen is None and (trace_id is None or t.trace_id == trace_id):
            chosen = t
            if trace_id is not None:
                break
    if chosen is None:
        raise InputError(
            f"no trace with id {trace_id!r}" if trace_id else "the input holds no trace",
            source=trace,
            hint="pick an existing trace with --trace-id" if trace_id else None,
        )
    if trace_id is None and count > 1:
        print(
            f"note: {count} traces in {trace}; showing the first ({chosen.trace_id}); "
            "choose one with --trace-id",
            file=sys.stderr,
        )
    names = catalog_names(cat) if cat is not None else None
    chosen = check_inputs(chosen, ruleset, catalog_names=names, rule_ids=rule_ids)
    rendered = render(
        chosen,
        ruleset,
        catalog=cat,
        examples=load_examples(examples),
        risk_level=risk_level.value,
        rule_ids=rule_ids,
    )
    sys.stdout.write(rendered.text())
    return 0


@app.command()
def judge(
    rules: RulesArg,
    traces: TracesArg,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            envvar="SEQJUDGE_MODEL",
            show_envvar=True,
            help="provider:model, e.g. openai:gpt-4o or anthropic:claude-sonnet-5-5.",
        ),
    ] = None,
    catalog: CatalogOpt = None,
    examples: ExamplesOpt = None,
    risk_level: RiskOpt = Risk.medium,
    threshold: ThresholdOpt = DEFAULT_THRESHOLD,
    max_attempts: Annotated[
        int, typer.Option("--max-attempts", min=1, max=10, help="Model answers per trace, re-asks included.")
    ] = 3,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Ignore and do not fill .seqjudge/cache/.")
    ] = False,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url", help="API base URL (an OpenAI-compatible server: vLLM, Ollama, a gateway)."
        ),
    ] = None,
    fmt: FormatOpt = Format.text,
    output: OutputOpt = None,
    trace_format: TraceFormatOpt = None,
    messages_key: MessagesKeyOpt = None,
    error_pattern: ErrorPatternOpt = None,
    verbose: VerboseOpt = False,
) -> int:
    """Judge every trace with an LLM and show its report beside the engine's, rule by rule.

    Exit 0 when every trace passed both, 1 when some trace failed, needs review, or could not be scored,
    2 on bad input, 3 when the model provider cannot be used (missing key, wrong base URL, rate limit).
    """
    from seqjudge.judge.cache import ResponseCache
    from seqjudge.judge.prompt import load_examples
    from seqjudge.judge.providers.base import get_provider
    from seqjudge.rules.engine import Engine

    ruleset, cat = load_inputs(rules, catalog)
    worked = load_examples(examples)
    if not model:
        raise InputError(
            "no model to judge with",
            where="--model",
            hint="pass --model provider:model (for example openai:gpt-4o) or set SEQJUDGE_MODEL; "
            "`seqjudge check` needs no model",
        )
    try:
        provider = get_provider(model, base_url=base_url)
    except ProviderError as exc:
        raise _explain(exc, model, base_url, done=0) from None
    stream = _traces(
        traces, format=trace_format, messages_key=messages_key, error_pattern=error_pattern, verbose=verbose
    )
    run = _JudgeRun(
        ruleset,
        Engine(ruleset),
        provider,
        cat,
        worked,
        risk_level.value,
        threshold,
        max_attempts,
        None if no_cache else ResponseCache(),
    )
    with open_output(output) as out:
        try:
            asyncio.run(run.all(stream, fmt, out))
        except ProviderError as exc:
            raise _explain(exc, model, base_url, done=len(run.rows)) from None
        if fmt is Format.json:
            json.dump({"summary": run.summary(), "results": run.rows}, out, ensure_ascii=False, indent=2)
            out.write("\n")
        elif fmt is Format.text:
            out.write(run.total_line() + "\n")
    return 0 if all(r["verdict"] == "pass" for r in run.rows) else 1


def _explain(exc: ProviderError, model: str, base_url: str | None, *, done: int) -> ProviderError:
    """The provider's message, plus which model and endpoint, and what to do for each kind of trouble."""
    todo = {
        "config": "fix what the message above names; keys are read from the environment only "
        f"({key_variables()})",
        "auth": "check that the key in the environment is valid for this provider and model",
        "connection": "check --base-url (OpenAI-compatible servers usually need the /v1 suffix) and that the "
        "server is running",
        "rate_limit": "wait and run again (answers already received are cached and not paid twice)",
        "timeout": "run again later, or check the server's load",
        "bad_request": "check the model name in --model and the --base-url",
    }.get(exc.kind, "run again later; if it persists, check the provider's status page")
    where = f" at {base_url}" if base_url else ""
    progress = f" after {done} trace(s) were judged" if done else ""
    message = f"the judge cannot use {model}{where}{progress}: {exc}. What to do: {todo}."
    return ProviderError(message, kind=exc.kind, provider=exc.provider, status_code=exc.status_code)


class _JudgeRun:
    def __init__(
        self,
        ruleset: RuleSet,
        engine: Any,
        provider: Any,
        catalog: Any,
        examples: Any,
        risk_level: RiskLevel,
        threshold: float,
        max_attempts: int,
        cache: Any,
    ) -> None:
        self.ruleset = ruleset
        self.engine = engine
        self.provider = provider
        self.catalog = catalog
        self.examples = examples
        self.risk_level = risk_level
        self.threshold = threshold
        self.max_attempts = max_attempts
        self.cache = cache
        self.rows: list[dict[str, Any]] = []

    async def all(self, stream: Any, fmt: Format, out: IO[str]) -> None:
        from seqjudge.judge.judge import judge_trace

        try:
            for trace in stream:
                report = self.engine.check(trace, threshold=self.threshold, risk_level=self.risk_level)
                result = await judge_trace(
                    trace,
                    self.ruleset,
                    self.provider,
                    catalog=self.catalog,
                    examples=self.examples,
                    risk_level=self.risk_level,
                    max_attempts=self.max_attempts,
                    cache=self.cache,
                )
                row = self.row(report, result)
                self.rows.append(row)
                if fmt is Format.jsonl:
                    out.write(json.dumps(row, ensure_ascii=False) + "\n")
                elif fmt is Format.text:
                    out.write(self.text(row) + "\n")
        finally:
            close = getattr(self.provider, "aclose", None)
            if close is not None:
                await close()

    def row(self, report: Report, result: Any) -> dict[str, Any]:
        judged = result.rule_outcomes()
        rules = []
        disagreements = 0
        for r in report.rules:
            j = judged.get(r.rule_id)
            agree: bool | None = None
            if j is not None and (r.outcome in DECIDED or j == "failed") and r.outcome != "deferred":
                # A rule the engine decided, or one it found not exercised that the judge says failed.
                agree = r.outcome == j
                disagreements += not agree
            rules.append(
                {
                    "rule_id": r.rule_id,
                    "type": r.type,
                    "severity": r.severity,
                    "engine": r.outcome,
                    "judge": j or ("unscored" if result.status == "unscored" else "not_asked"),
                    "agree": agree,
                }
            )
        judge_verdict = result.verdict(threshold=self.threshold, risk_level=self.risk_level)
        # As the cross-check will reconcile: a deterministic rule's outcome is the engine's (the judge saying
        # otherwise sends the trace to review); a `judge` rule's outcome is the judge's.
        words_only = {r.rule_id for r in report.rules if r.type == "judge"}
        judge_rule_failed = result.report is not None and any(
            v.rule_id in words_only and v.severity == "critical" for v in result.report.violations
        )
        if report.verdict == "fail" or judge_rule_failed:
            final = "fail"
        elif result.status == "unscored":
            final = "unscored"
        elif report.verdict == "review" or judge_verdict != "pass" or disagreements:
            final = "review"
        else:
            final = "pass"
        return {
            "trace_id": report.trace_id,
            "verdict": final,
            "engine_verdict": report.verdict,
            "judge_verdict": judge_verdict,
            "disagreements": disagreements,
            "rules": rules,
            "engine": report.model_dump(mode="json"),
            "judge": result.model_dump(mode="json"),
        }

    def text(self, row: dict[str, Any]) -> str:
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
            f"{row['verdict'].upper():8} {row['trace_id']}: engine {engine['verdict']} "
            f"(score {engine['sequence_correctness_score']:.2f}), {judged}"
        ]
        width = max([len(r["rule_id"]) for r in row["rules"]] + [4])
        lines.append(f"    {'rule':<{width}}  {'engine':<14}  judge")
        for r in row["rules"]:
            mark = {True: "agree", False: "DISAGREE", None: ""}[r["agree"]]
            lines.append(f"    {r['rule_id']:<{width}}  {r['engine']:<14}  {r['judge']:<10}  {mark}".rstrip())
        if result["status"] == "scored":
            lines.append(f"    judge summary: {result['report']['summary']}")
            for v in result["report"]["violations"]:
                at = "" if v["offending_call_index"] is None else f" at call {v['offending_call_index'] + 1}"
                lines.append(f"    judge: {v['rule_id']} {v['violation_type']}{at}: {v['explanation']}")
        return "\n".join(lines) + "\n"

    def summary(self) -> dict[str, Any]:
        counts = {
            k: sum(1 for r in self.rows if r["verdict"] == k) for k in ("pass", "fail", "review", "unscored")
        }
        decided = [r["agree"] for row in self.rows for r in row["rules"] if r["agree"] is not None]
        tokens = {"input": 0, "output": 0, "cached_input": 0}
        for row in self.rows:
            usage = row["judge"]["usage"]
            tokens["input"] += usage["input_tokens"]
            tokens["output"] += usage["output_tokens"]
            tokens["cached_input"] += usage["cached_input_tokens"]
        return {
            "traces": len(self.rows),
            **counts,
            "rule_decisions_compared": len(decided),
            "agreements": sum(decided),
            "tokens": tokens,
            "cache": None if self.cache is None else {"hits": self.cache.hits, "misses": self.cache.misses},
        }

    def total_line(self) -> str:
        s = self.summary()
        agree = (
            f"judge and engine agree on {s['agreements']} of {s['rule_decisions_compared']} rule decision(s)"
            if s["rule_decisions_compared"]
            else "no rule decision to compare"
        )
        cache = f", {s['cache']['hits']} cached answer(s)" if s["cache"] else ""
        return (
            f"{s['traces']} trace(s): {s['pass']} pass, {s['fail']} fail, {s['review']} review, "
            f"{s['unscored']} unscored; {agree}; tokens: {s['tokens']['input']} in "
            f"({s['tokens']['cached_input']} cached), {s['tokens']['output']} out{cache}."
        )
