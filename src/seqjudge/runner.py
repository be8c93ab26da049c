"""A run over many traces: engine, judge (where configured), reconciliation, routing, storage.

Each trace is stored in its own transaction as soon as it is decided, so a run killed at any moment keeps
every finished trace, and ``resume`` finishes the rest without judging a stored trace again.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from seqjudge.config import RunConfig
from seqjudge.crosscheck import TraceResult, agreement, reconcile
from seqjudge.errors import ProviderError
from seqjudge.rules.engine import Engine
from seqjudge.rules.model import RuleSet
from seqjudge.trace import Trace

# Provider errors after which no other trace can succeed either: stop the run (exit 3), keep it resumable.
FATAL_KINDS = {"auth", "config", "connection", "bad_request"}
KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def judge_unavailable(model: str | None) -> str | None:
    """Why the judge cannot run, in a sentence for the user (None when it can)."""
    if not model:
        return (
            "no model configured (give --model provider:model, `model:` in seqjudge.yaml, or SEQJUDGE_MODEL)"
        )
    provider = model.split(":", 1)[0]
    env = KEY_ENV.get(provider)
    if env and not os.environ.get(env):
        return f"model {model} is configured but {env} is not set"
    return None


@dataclass
class RunSummary:
    run_id: str
    judged: bool
    judge_skipped: str | None
    verdicts: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    judge_status: Counter[str] = field(default_factory=Counter)
    violated: Counter[str] = field(default_factory=Counter)
    tokens: dict[str, int] = field(default_factory=lambda: {"input": 0, "cached_input": 0, "output": 0})
    skipped_stored: int = 0
    agreement: dict[str, Any] = field(default_factory=dict)
    status: str = "completed"
    error: str | None = None

    @property
    def traces(self) -> int:
        return sum(self.verdicts.values())

    def totals(self) -> dict[str, Any]:
        return {
            "traces": self.traces,
            "pass": self.verdicts["pass"],
            "fail": self.verdicts["fail"],
            "review": self.verdicts["review"],
            "review_reasons": dict(self.reasons),
            "judge": dict(self.judge_status),
            "tokens": dict(self.tokens),
            "violations_by_rule": dict(self.violated.most_common()),
            "agreement": self.agreement,
            "judge_skipped": self.judge_skipped,
        }


def _judge_rule_ids(ruleset: RuleSet, mode: str) -> list[str]:
    if mode == "contextual":
        return [r.rule_id for r in ruleset.rules if r.type == "judge"]
    return [r.rule_id for r in ruleset.rules]


async def run_traces(
    cfg: RunConfig,
    ruleset: RuleSet,
    traces: Any,
    store: Any,
    *,
    provider: Any = None,
    run_id: str | None = None,
    catalog: Any = None,
    examples: Any = None,
    on_result: Callable[[Trace, TraceResult], None] | None = None,
) -> RunSummary:
    """Decide every trace of ``traces`` (an iterable) and store each result as it is decided."""
    from seqjudge.redact import redact_trace

    engine = Engine(ruleset)
    skipped = None if provider is not None else judge_unavailable(cfg.model)
    if provider is None and skipped is None:
        from seqjudge.judge.providers.base import get_provider

        opts = cfg.model_options
        provider = get_provider(
            cfg.model,
            base_url=opts.base_url,
            timeout=opts.timeout,  # type: ignore[arg-type]
            max_retries=opts.max_retries,
        )
    fingerprint = {
        "model": cfg.model if provider is not None else None,
        "judge_mode": cfg.judge_mode,
        "engine": "seqjudge-engine/1",
    }
    if run_id is not None:
        store.reopen_run(run_id)
    else:
        run_id = store.create_run(
            config=cfg.model_dump(mode="json"), fingerprint=fingerprint, label=cfg.label
        )
    done = store.completed_trace_ids(run_id)
    summary = RunSummary(run_id=run_id, judged=provider is not None, judge_skipped=skipped)
    cache = None
    if provider is not None and cfg.cache:
        from seqjudge.judge.cache import ResponseCache

        cache = ResponseCache()
    rule_ids = _judge_rule_ids(ruleset, cfg.judge_mode)
    results: list[TraceResult] = []
    fatal: list[ProviderError] = []
    semaphore = asyncio.Semaphore(cfg.concurrency)

    async def decide(trace: Trace) -> None:
        # The engine sees the trace as it is (a rule may match on any argument); only what leaves the
        # process or is kept — the judge's prompt and the store — gets the redacted copy.
        report = engine.check(trace, threshold=cfg.threshold, risk_level=cfg.risk_level)
        redacted = redact_trace(trace, cfg.redact)
        judged = None
        if provider is not None and rule_ids and not fatal:
            judged = await _judge(
                redacted, ruleset, provider, cfg, cache, rule_ids, catalog, examples, semaphore, fatal
            )
            if judged is None:
                return  # a fatal provider error: leave the trace for --resume
        result = reconcile(
            report,
            judged,
            threshold=cfg.threshold,
            risk_level=cfg.risk_level,
            judge_skipped=skipped if provider is None else None,
        )
        store.save_result(run_id, redacted, result)
        _count(summary, result)
        results.append(result)
        if on_result is not None:
            on_result(trace, result)

    pending: set[asyncio.Task[None]] = set()
    for trace in traces:
        if fatal:
            break
        if trace.trace_id in done:
            summary.skipped_stored += 1
            continue
        pending.add(asyncio.create_task(decide(trace)))
        if len(pending) >= cfg.concurrency * 2:  # bounded look-ahead: traces stream, memory stays flat
            finished, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for t in finished:
                t.result()
    if pending:
        for t in await asyncio.gather(*pending, return_exceptions=True):
            if isinstance(t, BaseException):
                raise t
    summary.agreement = agreement(results)
    if fatal:
        summary.status = "interrupted"
        summary.error = str(fatal[0])
    store.finish_run(run_id, totals=summary.totals(), status=summary.status)
    if fatal:
        raise fatal[0]
    return summary


async def _judge(
    trace: Trace,
    ruleset: RuleSet,
    provider: Any,
    cfg: RunConfig,
    cache: Any,
    rule_ids: list[str],
    catalog: Any,
    examples: Any,
    semaphore: asyncio.Semaphore,
    fatal: list[ProviderError],
) -> Any:
    from seqjudge.judge.judge import judge_trace

    async with semaphore:
        if fatal:
            return None
        try:
            return await judge_trace(
                trace,
                ruleset,
                provider,
                catalog=catalog,
                examples=examples,
                risk_level=cfg.risk_level,
                max_attempts=cfg.max_attempts,
                cache=cache,
                rule_ids=rule_ids,
                max_tokens=cfg.model_options.max_tokens,
                temperature=cfg.model_options.temperature,
                seed=cfg.model_options.seed,
            )
        except ProviderError as exc:
            if exc.kind in FATAL_KINDS:
                fatal.append(exc)
                return None
            # Rate limits and server errors that outlived the SDK's own retries: this trace is unscored,
            # with the reason, and goes to review; the run goes on.
            return exc.unscored  # type: ignore[attr-defined]


def _count(summary: RunSummary, result: TraceResult) -> None:
    summary.verdicts[result.verdict] += 1
    for reason in result.review_reasons:
        summary.reasons[reason] += 1
    for d in result.rules:
        if d.final == "failed":
            summary.violated[d.rule_id] += 1
    if result.judge is not None:
        summary.judge_status[result.judge.status] += 1
        usage = result.judge.usage
        summary.tokens["input"] += usage.input_tokens
        summary.tokens["cached_input"] += usage.cached_input_tokens
        summary.tokens["output"] += usage.output_tokens
