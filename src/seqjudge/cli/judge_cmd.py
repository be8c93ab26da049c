"""`seqjudge prompt` (print what the model sees) and `seqjudge judge` (the LLM judge beside the engine)."""

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from seqjudge.cli.app import app
from seqjudge.cli.options import (
    BaseUrlOpt,
    CatalogOpt,
    ExamplesOpt,
    MaxAttemptsOpt,
    ModelOpt,
    NoCacheOpt,
    OutputOpt,
    Risk,
    RiskOpt,
    RulesArg,
    ThresholdOpt,
    TracesArg,
    format_option,
)
from seqjudge.cli.trace_options import (
    AllowEmpty,
    ErrorPattern,
    MessagesKey,
    TraceFormat,
    Verbose,
    load_options,
)
from seqjudge.defaults import DEFAULT_THRESHOLD
from seqjudge.errors import InputError, ProviderError
from seqjudge.outputs.registry import writer
from seqjudge.outputs.streams import open_output
from seqjudge.safetext import say, terminal
from seqjudge.safetext import shown as terminal_lines

if TYPE_CHECKING:
    from seqjudge.judge.judge import JudgeResult
    from seqjudge.outputs.judged import JudgeOutput
    from seqjudge.report import Report, RiskLevel
    from seqjudge.rules.model import RuleSet

_NAMED_IDS = 10  # trace ids named when --trace-id matches none; the rest are counted


def _traces(traces: list[str], **options: Any) -> Any:
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
    trace_format: TraceFormat = None,
    messages_key: MessagesKey = None,
    error_pattern: ErrorPattern = None,
    allow_empty: AllowEmpty = False,
    judge_mode: Annotated[
        str,
        typer.Option("--judge-mode", help="full (every rule) or contextual (only judge rules), as in run."),
    ] = "full",
) -> int:
    """Print the judge prompt for one trace exactly as the model sees it: the system prompt, then the user
    content."""
    from seqjudge.config import asked_on, judge_rule_ids
    from seqjudge.inputs import load_suite
    from seqjudge.judge.prompt import catalog_names, render
    from seqjudge.judge.validate import check_inputs

    suite = load_suite(rules, catalog, examples, with_examples=True, known_tools=False)
    ruleset, cat = suite.ruleset, suite.catalog
    rule_ids = judge_rule_ids(ruleset, judge_mode)
    if not rule_ids and not any(r.may_defer for r in ruleset.rules):
        raise InputError(
            "the rule file has no `judge` rule, so a contextual run asks the judge nothing",
            source=str(rules),
            hint="use --judge-mode full, or add a rule with type: judge",
        )
    chosen = None
    count = 0
    seen: list[str] = []  # the first ids, to name some when --trace-id matches none
    options = load_options(trace_format, messages_key, error_pattern, False, allow_empty)
    for t in _traces(trace, **options):
        count += 1
        if len(seen) < _NAMED_IDS:
            seen.append(terminal(t.trace_id))
        if chosen is None and (trace_id is None or t.trace_id == trace_id):
            chosen = t
            if trace_id is not None:
                break
    if chosen is None:
        some = ", ".join(seen) + (f" and {count - len(seen)} more" if count > len(seen) else "")
        raise InputError(
            f"no trace with id {trace_id!r} among the input's {count} trace(s): {some}"
            if trace_id and count
            else "the input holds no trace",
            source=", ".join(trace),
            hint="pick one of those with --trace-id" if trace_id and count else None,
        )
    if trace_id is None and count > 1:
        say(
            f"note: {count} traces in {', '.join(trace)}; showing the first ({chosen.trace_id}); "
            "choose one with --trace-id",
            err=True,
        )
    # What `run` asks on this trace: the mode's rules, and any rule the engine left undetermined on it.
    from seqjudge.rules.engine import Engine

    rule_ids = asked_on(rule_ids, Engine(ruleset).check(chosen).rules)
    if not rule_ids:
        raise InputError(
            f"the engine decided every rule on trace {chosen.trace_id!r}, so a contextual run asks the judge "
            "nothing about it",
            source=", ".join(trace),
            hint="use --judge-mode full, or pick a trace a lineage rule left undetermined with --trace-id",
        )
    names = catalog_names(cat) if cat is not None else None
    chosen = check_inputs(chosen, ruleset, catalog_names=names, rule_ids=rule_ids)
    rendered = render(
        chosen,
        ruleset,
        catalog=cat,
        examples=suite.examples,
        risk_level=risk_level.value,
        rule_ids=rule_ids,
    )
    # What the judge is sent, but the trace's names and words with no escape code for the terminal.
    sys.stdout.write(terminal_lines(rendered.text()))
    return 0


@app.command()
def judge(
    rules: RulesArg,
    traces: TracesArg,
    model: ModelOpt = None,
    catalog: CatalogOpt = None,
    examples: ExamplesOpt = None,
    risk_level: RiskOpt = Risk.medium,
    threshold: ThresholdOpt = DEFAULT_THRESHOLD,
    max_attempts: MaxAttemptsOpt = 3,
    no_cache: NoCacheOpt = False,
    base_url: BaseUrlOpt = None,
    fmt: Annotated[str, format_option("judge")] = "text",
    output: OutputOpt = None,
    trace_format: TraceFormat = None,
    messages_key: MessagesKey = None,
    error_pattern: ErrorPattern = None,
    verbose: Verbose = False,
    allow_empty: AllowEmpty = False,
) -> int:
    """Judge every trace with an LLM and show its report beside the engine's, rule by rule.

    Exit 0 when every trace passed both, 1 when some trace failed, needs review, or could not be scored,
    2 on bad input (no model, or its key is not set: `seqjudge run` then defers the judge rules instead),
    3 when the model provider cannot be used (a rejected key, wrong base URL, rate limit).
    """
    import asyncio

    from seqjudge.inputs import load_suite, model_or_env
    from seqjudge.judge.cache import ResponseCache
    from seqjudge.judge.providers.base import get_provider
    from seqjudge.judge.providers.registry import require_judge
    from seqjudge.rules.engine import Engine

    # The judge checks the rules and every trace against the catalog itself (judge.validate).
    suite = load_suite(rules, catalog, examples, with_examples=True, known_tools=False)
    ruleset, cat, worked = suite.ruleset, suite.catalog, suite.examples
    output_class = writer("judge", fmt)
    # No model or no key: exit 2 with the sentence `run` prints when it defers the judge rules.
    model = require_judge(model_or_env(model), base_url, needs="`seqjudge judge`")
    try:
        provider = get_provider(model, base_url=base_url)
    except ProviderError as exc:
        raise _explain(exc, model, base_url, done=0) from None
    stream = _traces(traces, **load_options(trace_format, messages_key, error_pattern, verbose, allow_empty))
    run = _JudgeRun(
        ruleset,
        Engine(ruleset),
        provider,
        cat,
        worked,
        risk_level.value,
        threshold,
        max_attempts,
        ResponseCache(read=not no_cache),  # --no-cache still writes fresh entries
    )
    with open_output(output, inputs=[rules, catalog, examples, *traces]) as out:
        shown: JudgeOutput = output_class(out)
        try:
            asyncio.run(run.all(stream, shown))
        except ProviderError as exc:
            raise _explain(exc, model, base_url, done=len(run.rows)) from None
        shown.finish(run.rows, run.summary())
    return 0 if all(r["verdict"] == "pass" for r in run.rows) else 1


def _explain(exc: ProviderError, model: str, base_url: str | None, *, done: int) -> ProviderError:
    """The provider's message, plus which model and endpoint, and what to do for each kind of trouble."""
    from seqjudge.judge.providers.base import redact
    from seqjudge.judge.providers.registry import key_variables

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
    where = f" at {redact(base_url)}" if base_url else ""
    progress = f" after {done} trace(s) were judged" if done else ""
    message = f"the judge cannot use {model}{where}{progress}: {exc}. What to do: {todo}."
    return ProviderError(message, kind=exc.kind, provider=exc.provider, status_code=exc.status_code)


class _JudgeRun:
    def __init__(
        self,
        ruleset: "RuleSet",
        engine: Any,
        provider: Any,
        catalog: Any,
        examples: Any,
        risk_level: "RiskLevel",
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

    async def all(self, stream: Any, shown: "JudgeOutput") -> None:
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
                shown.row(row)
        finally:
            close = getattr(self.provider, "aclose", None)
            if close is not None:
                await close()

    def row(self, report: "Report", result: "JudgeResult") -> dict[str, Any]:
        """One trace as `seqjudge run` decides it: the engine and the judge reconciled by ``reconcile``."""
        from seqjudge.crosscheck import reconcile

        decided = reconcile(report, result, threshold=self.threshold, risk_level=self.risk_level)
        # Shown in the judge column when the judge gave no outcome for a rule.
        missing = "unscored" if result.status == "unscored" else "not_asked"
        rules = [
            {
                "rule_id": d.rule_id,
                "type": d.type,
                "severity": d.severity,
                "engine": d.engine,
                "judge": d.judge or missing,
                "final": d.final,
                "agree": d.agree,
            }
            for d in decided.rules
        ]
        return {
            "trace_id": report.trace_id,
            "verdict": decided.verdict,
            "review_reasons": list(decided.review_reasons),
            "engine_verdict": report.verdict,
            "judge_verdict": result.verdict(threshold=self.threshold, risk_level=self.risk_level),
            "disagreements": len(decided.disagreements),
            "rules": rules,
            "engine": report.model_dump(mode="json"),
            "judge": result.model_dump(mode="json"),
        }

    def summary(self) -> dict[str, Any]:
        counts = {k: sum(1 for r in self.rows if r["verdict"] == k) for k in ("pass", "fail", "review")}
        # An unscored judge sends its trace to review (as in `seqjudge run`); this counts those traces.
        counts["unscored"] = sum(1 for r in self.rows if r["judge"]["status"] == "unscored")
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
