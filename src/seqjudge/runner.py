"""A run over many traces: engine, judge (where configured), reconciliation, routing, storage.

Each trace is stored in its own transaction as soon as it is decided, so a run killed at any moment keeps
every finished trace, and ``resume`` finishes the rest without judging a stored trace again.

Throughput (see seqjudge.limits): traces stream through a bounded look-ahead (``2 * concurrency`` traces
decided at once, so memory stays flat however long the suite), the provider sits behind ``LimitedProvider``
(at most ``concurrency`` calls in flight, requests/tokens per minute, the run-wide pause after a 429, the
``--max-cost`` budget), and the response cache answers any request seen before without a call.

What stops a run, and what a trace becomes:
- auth/config errors, and connection/bad-request errors before any call has succeeded (a wrong base URL, a
  wrong model name): fatal. No new call starts; calls in flight finish and are stored; status
  ``interrupted``; the error is raised (exit 3). The traces not stored are left for ``--resume``.
- the budget: no new call starts; status ``stopped``; the summary says how to finish (``--resume``).
- anything else the SDK's retries did not cure (rate limits, 5xx, timeouts, a dropped connection once the
  endpoint has answered, a malformed body): that trace is stored ``unscored`` with the reason and routed
  to review, and the run goes on.
"""

from __future__ import annotations

import asyncio
import gc
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seqjudge.audit import apply_audit
from seqjudge.cascade import (
    Ask,
    Stage,
    StageTally,
    build_stages,
    cascade_routing,
    judge_cascade,
    stage_notes,
)
from seqjudge.config import RunConfig, asked_on, judge_rule_ids
from seqjudge.crosscheck import AgreementTally, StageRecord, TraceResult, reconcile
from seqjudge.errors import InputError, ProviderError
from seqjudge.judge.confidence import check_source
from seqjudge.judge.providers.registry import judge_unavailable, skipped_judge
from seqjudge.judge_gate import gate_data, gate_from_data, run_gate
from seqjudge.limits import Budget, CpuLane, LimitedProvider, RateLimiter, default_limits, estimate_tokens
from seqjudge.pricing import Cost, Price, cost_of, estimate_cost, load_prices, price_for
from seqjudge.provenance import rules_hash
from seqjudge.report import Report
from seqjudge.rules.coverage import Coverage
from seqjudge.rules.engine import Engine
from seqjudge.rules.lint import JUDGE_ONLY_HINT, JUDGE_ONLY_WARNING
from seqjudge.rules.model import RuleSet
from seqjudge.trace import Trace, check_trace_data

if TYPE_CHECKING:
    from seqjudge.judge.judge import JudgeResult
    from seqjudge.judge.providers.base import Provider
    from seqjudge.store import Store

# Provider errors after which no other trace can succeed either: stop the run (exit 3), keep it resumable.
FATAL_KINDS = {"auth", "config"}
# ... and these too, as long as no call of this run has succeeded (the endpoint or the model is wrong);
# once one has, they are one trace's bad luck (a dropped connection, one over-long prompt).
FATAL_UNTIL_SUCCESS = {"connection", "bad_request"}
# Expected output tokens of one judge reply for --dry-run (a judgement with a few violations is 250-500).
DRY_RUN_OUTPUT_TOKENS = 400


@dataclass
class RunSummary:
    run_id: str
    judged: bool
    judge_skipped: str | None
    verdicts: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    queued: int = 0  # traces routed to review: the review items of the run (``TraceResult.routed``)
    judge_status: Counter[str] = field(default_factory=Counter)
    violated: Counter[str] = field(default_factory=Counter)
    tokens: dict[str, int] = field(
        default_factory=lambda: {"input": 0, "cached_input": 0, "cache_write": 0, "output": 0}
    )
    skipped_stored: int = 0
    agreement: dict[str, Any] = field(default_factory=dict)
    status: str = "completed"
    error: str | None = None
    # Cost: of every stored trace of the run (a resumed run counts what was stored before, too).
    model: str | None = None
    price: Price | None = None
    cost: Cost = field(default_factory=Cost)
    judged_traces: int = 0  # traces with a judge result (scored or unscored)
    max_trace_cost: float = 0.0
    # This invocation's provider calls (seqjudge.limits.CallStats.as_dict) and response-cache hits.
    calls: dict[str, Any] = field(default_factory=dict)
    cache_hits: int = 0
    stopped: str | None = None  # why the run stopped early (the budget)
    notes: list[str] = field(default_factory=list)  # what the reader of the summary must know (judge-only)
    advisory_fails: Counter[str] = field(default_factory=Counter)  # judge rule -> advisory fails (no gate)
    # The `judge` rules left `deferred` because no judge could run (judge_skipped): named, never silent.
    deferred_rules: list[str] = field(default_factory=list)
    coverage: Coverage | None = None  # what the traces left unchecked (rules exercised on none, ...)
    # Judge-engine agreement, counted as results come: a run keeps no per-trace data in memory.
    tally: AgreementTally = field(default_factory=AgreementTally, repr=False)
    stages: StageTally | None = None  # an escalation cascade's judges (seqjudge.cascade)
    store: str | None = None  # the store the run is in, for the commands the summary suggests

    @property
    def traces(self) -> int:
        return sum(self.verdicts.values())

    @property
    def priced(self) -> bool:
        return self.price is not None

    def cost_totals(self) -> dict[str, Any] | None:
        if self.price is None:
            return None
        c = self.cost
        return {
            "usd": round(c.total, 6),
            "input_usd": round(c.input, 6),
            "cached_input_usd": round(c.cached_input, 6),
            "cache_write_usd": round(c.cache_write, 6),
            "output_usd": round(c.output, 6),
            "per_trace_usd": round(c.total / self.judged_traces, 6) if self.judged_traces else 0.0,
            "max_trace_usd": round(self.max_trace_cost, 6),
            "model": self.model,
            "price_per_million": self.price.model_dump(),
        }

    def totals(self) -> dict[str, Any]:
        return {
            "traces": self.traces,
            "pass": self.verdicts["pass"],
            "fail": self.verdicts["fail"],
            "review": self.verdicts["review"],
            "review_reasons": dict(self.reasons),
            "review_items": self.queued,
            "judge": dict(self.judge_status),
            "tokens": dict(self.tokens),
            "cost": self.cost_totals(),
            "calls": {**self.calls, "cache_hits": self.cache_hits},
            "violations_by_rule": dict(self.violated.most_common()),
            "agreement": self.agreement,
            "judge_skipped": self.judge_skipped,
            "deferred_rules": list(self.deferred_rules),
            "stopped": self.stopped,
            "notes": list(self.notes),
            **({"stages": self.stages.totals()} if self.stages is not None else {}),
            "advisory_judge_fails": dict(self.advisory_fails),
            **({"coverage": self.coverage.as_dict()} if self.coverage is not None else {}),
        }


def run_limits(cfg: RunConfig, provider_name: str) -> tuple[int, int]:
    """(rpm, tpm) of a run: the config's, else the provider's defaults; 0 = unlimited."""
    rpm, tpm = default_limits(provider_name)
    return (rpm if cfg.rpm is None else cfg.rpm, tpm if cfg.tpm is None else cfg.tpm)


def run_price(cfg: RunConfig, prices: Any = None) -> Price | None:
    """The price of the run's model (``prices`` or the config's ``prices:`` over the shipped table)."""
    return price_for(cfg.model, load_prices(prices if prices is not None else cfg.prices))


@contextmanager
def steady_gc() -> Iterator[None]:
    """Garbage collection tuned for the length of a run, then restored.

    A run allocates many short-lived objects against a large long-lived heap (the SDK, compiled rules,
    pydantic schemas), and the collector's full passes kept re-scanning that heap: about a tenth of the
    CPU of a judged trace. What exists at the start is frozen (never scanned during the run) and young
    collections run less often."""
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(threshold[0], 20_000), threshold[1], threshold[2])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


async def run_traces(
    cfg: RunConfig,
    ruleset: RuleSet,
    traces: Iterable[Trace],
    store: Store,
    *,
    provider: Provider | None = None,
    run_id: str | None = None,
    catalog: Any = None,
    examples: Any = None,
    on_result: Callable[[Trace, TraceResult], None] | None = None,
    on_progress: Callable[[RunSummary], None] | None = None,
    limiter: RateLimiter | None = None,
    prices: Any = None,
    cache_dir: str | Path | None = None,
    escalation: Sequence[Provider] | None = None,
    strict: bool = False,
    gated: bool = True,
) -> RunSummary:
    """Decide every trace of ``traces`` (an iterable) and store each result as it is decided.

    ``limiter`` replaces the one built from ``cfg.rpm``/``cfg.tpm`` (a benchmark scales the window);
    ``prices`` replaces ``cfg.prices``; ``cache_dir`` the response cache's folder (default: ``cache/``
    beside the store); ``escalation`` the providers of ``cfg.escalate``'s models (default: built from
    them), the later stages of a cascade (``seqjudge.cascade``). ``strict`` (or ``cfg.strict``): a judge
    rule without a matching calibration certificate is an error (``seqjudge.judge_gate``) instead of advice.
    ``gated=False``: every judge decision stands, certificate or not (a calibration's own runs, which
    measure the judge the certificate is about)."""
    from seqjudge.redact import redact_trace

    engine = Engine(ruleset)
    # A model that was asked for and cannot run is an error here; only "no model" runs the engine alone.
    skipped = (
        None
        if provider is not None
        else skipped_judge(cfg.model, cfg.model_options.base_url, escalate=cfg.escalate)
    )
    if provider is None and skipped is None:
        from seqjudge.judge.providers.base import get_provider

        # Before the provider is built: it would refuse an option it lacks in less helpful words.
        check_source(cfg.confidence, cfg.samples, str(cfg.model).split(":", 1)[0])
        opts = cfg.model_options
        provider = get_provider(
            cfg.model,  # type: ignore[arg-type]
            base_url=opts.base_url,
            timeout=opts.timeout,
            max_retries=opts.max_retries,
            **({"logprobs": True} if cfg.confidence == "logprobs" else {}),
        )
    if provider is not None:
        check_source(cfg.confidence, cfg.samples, getattr(provider, "name", None))
    price = run_price(cfg, prices) if provider is not None else None
    if provider is not None and cfg.max_cost and price is None:
        raise InputError(
            f"--max-cost needs the price of model {cfg.model}, and seqjudge has none",
            where="--max-cost",
            hint="give it with --prices FILE (or prices: in seqjudge.yaml), e.g. "
            f"{cfg.model}: {{input: 2.5, cached_input: 1.25, output: 10}} in USD per million tokens",
        )
    routing = run_gate(cfg, ruleset, provider) if gated else None
    # An escalation cascade (seqjudge.cascade): the run's judge first, then each --escalate model.
    stages: list[Stage] = []
    if provider is not None and cfg.escalate:
        later = list(escalation) if escalation is not None else escalation_providers(cfg)
        table = load_prices(prices if prices is not None else cfg.prices)
        stages = build_stages(cfg, ruleset, [provider, *later], table, routing if gated else None)
    if strict or cfg.strict:
        from seqjudge.judge_gate import require_certificate

        for stage_gate in [stage.gate for stage in stages] or [routing]:
            require_certificate(stage_gate)
    fingerprint = {
        "model": cfg.model if provider is not None else None,
        **({"escalate": list(cfg.escalate)} if provider is not None and cfg.escalate else {}),
        "judge_mode": cfg.judge_mode,
        "engine": "seqjudge-engine/1",
        "rules_hash": rules_hash(ruleset),  # ties a calibration to runs of its own rules (provenance)
        "judge_gate": gate_data(routing),  # which certificate thresholds the judge rules ran under
        **({"escalation_gates": [gate_data(stage.gate) for stage in stages[1:]]} if stages else {}),
    }
    if run_id is not None:
        info = store.reopen_run(run_id)
        if gated and "judge_gate" in info.fingerprint:
            # A resumed run routes as it started, whatever certificates came or went meanwhile.
            routing = gate_from_data(info.fingerprint["judge_gate"])
            kept = info.fingerprint.get("escalation_gates") or []
            for stage, data in zip(stages, [info.fingerprint["judge_gate"], *kept], strict=False):
                stage.gate = gate_from_data(data)
    else:
        run_id = store.create_run(
            config=cfg.model_dump(mode="json"), fingerprint=fingerprint, label=cfg.label
        )
    store.defer_writes()  # on a server, traces are committed in groups; finish_run ends that
    coverage = Coverage.of(ruleset, catalog, strict=cfg.strict)
    summary = RunSummary(
        run_id=run_id,
        store=store.location,
        judged=provider is not None,
        judge_skipped=skipped,
        model=cfg.model if provider is not None else None,
        price=price,
        stages=StageTally({stage.model: stage.price for stage in stages}) if stages else None,
        deferred_rules=[r.rule_id for r in ruleset.rules if r.type == "judge"] if skipped else [],
        coverage=coverage,
    )
    if ruleset.rules and all(r.type == "judge" for r in ruleset.rules):
        summary.notes.append(f"{JUDGE_ONLY_WARNING}. {JUDGE_ONLY_HINT}.")
    gate_note = routing.note() if routing is not None and not stages else None
    if gate_note:
        summary.notes.append(gate_note)
    summary.notes.extend(stage_notes(stages))
    done = store.completed_trace_ids(run_id)
    if done:
        # Totals and cost cover the whole run, not only what this invocation adds.
        for stored in store.results(run_id):
            _count(summary, stored.result)

    gate: LimitedProvider | None = None
    gates: list[LimitedProvider] = []
    cache = None
    lane: CpuLane | None = None
    if provider is not None:
        lane = CpuLane()
        rpm, tpm = run_limits(cfg, getattr(provider, "name", ""))
        budget = Budget(cfg.max_cost) if cfg.max_cost else None
        gate = _gate(provider, price, cfg, limiter or RateLimiter(rpm, tpm), budget, lane)
        gates = [gate]
        for n, stage in enumerate(stages):
            # Each judge of a cascade behind its own limits, all under the one budget.
            if n == 0:
                stage.provider = gate
            else:
                limits = RateLimiter(*run_limits(cfg, getattr(stage.provider, "name", "")))
                stage.provider = _gate(stage.provider, stage.price, cfg, limits, budget, lane)
                gates.append(stage.provider)
        from seqjudge.judge.cache import ResponseCache

        # --no-cache: answers are not read from the cache, but fresh ones are still written to it.
        folder = cache_dir if cache_dir is not None else store.local_dir / "cache"
        cache = ResponseCache(folder, read=cfg.cache)
    rule_ids = judge_rule_ids(ruleset, cfg.judge_mode)
    judge_only = {r.rule_id for r in ruleset.rules if r.type == "judge"}
    fatal: list[ProviderError] = []

    def ask(trace: Trace) -> Ask:
        async def one(stage: Stage, asked: list[str]) -> JudgeResult | None:
            judged = await _judge(trace, ruleset, stage.provider, cfg, cache, asked, catalog, examples, fatal)
            if judged is None:
                why = next((g.stop_reason for g in gates if g.stop_reason), None) or "the run is stopping"
                for g in gates:  # one stage stopping (a fatal error, the budget) stops them all
                    if g.stop_reason is None:
                        g.stop(why)
            return judged

        return one

    async def decide(trace: Trace) -> None:
        if lane is None:
            return await decide_now(trace)
        await lane.enter()
        try:
            return await decide_now(trace)
        finally:
            lane.leave()

    async def decide_now(trace: Trace) -> None:
        # The engine sees the trace as it is (a rule may match on any argument); only what leaves the
        # process or is kept — the judge's prompt and the store — gets the redacted copy.
        data = engine.check_data(trace, threshold=cfg.threshold, risk_level=cfg.risk_level)
        coverage.add_trace(trace, data["rules"])
        report = Report.model_validate(data)
        redacted = redact_trace(trace, cfg.redact)
        judged = None
        records: list[StageRecord] = []
        asked = asked_on(rule_ids, report.rules)
        if gate is not None and asked:
            if _stopping(gates):
                return  # stopping: leave the trace for --resume
            if stages:
                cascaded = await judge_cascade(stages, asked, judge_only, ask(redacted))
                if cascaded is None:
                    return  # the run is stopping: leave the trace for --resume
                judged, records = cascaded
            else:
                judged = await _judge(redacted, ruleset, gate, cfg, cache, asked, catalog, examples, fatal)
                if judged is None:
                    return  # the run is stopping: leave the trace for --resume
        result = reconcile(
            report,
            judged,
            threshold=cfg.threshold,
            risk_level=cfg.risk_level,
            judge_skipped=skipped if provider is None else None,
            # A cascade's decisions gate by the certificate of the judge whose answer is final.
            gate=cascade_routing(stages, records) if records else routing,
            queue_fails=cfg.review.fails,
        )
        if records:
            result = result.model_copy(update={"stages": records})
        result = apply_audit(result, cfg.audit_rate, cfg.audit_seed, cfg.audit_draw)
        store.save_result(run_id, redacted, result, redacted_with=cfg.redact)
        _count(summary, result)
        if on_result is not None:
            on_result(trace, result)
        if on_progress is not None:
            on_progress(summary)

    # Traces decided at once: enough to keep every provider slot busy while others render and store, and
    # few enough that memory stays flat however long the suite. A semaphore, not asyncio.wait over the
    # pending set, which would cost O(pending) per finished trace.
    lookahead = asyncio.Semaphore(cfg.concurrency * 2)
    pending: set[asyncio.Task[None]] = set()
    failed: list[BaseException] = []

    def finished(task: asyncio.Task[None]) -> None:
        pending.discard(task)
        lookahead.release()
        if not task.cancelled() and task.exception() is not None:
            failed.append(task.exception())  # type: ignore[arg-type]

    try:
        with steady_gc():
            for trace in traces:
                if failed:
                    raise failed[0]  # a bug in one trace ends the run (marked interrupted below)
                if _stopping(gates):
                    break
                if trace.trace_id in done:
                    summary.skipped_stored += 1
                    # Stored before: the engine alone, so that what the run left unchecked covers it too.
                    coverage.add_trace(trace, engine.check_data(trace)["rules"])
                    continue
                check_trace_data(trace, cfg.traces_named())  # before redacting, judging or storing it
                await lookahead.acquire()
                task = asyncio.create_task(decide(trace))
                pending.add(task)
                task.add_done_callback(finished)
            while pending:
                await asyncio.wait(set(pending))
        if failed:
            raise failed[0]
    except InputError as exc:  # a trace that cannot be judged or stored: say which, keep the run resumable
        await asyncio.gather(*pending, return_exceptions=True)  # the traces already started are stored
        await _close_transports(provider, gates)
        _finish(summary, gates, cache)
        summary.status = "stopped"
        summary.stopped = f"bad input: {exc}"
        summary.error = str(exc)
        store.finish_run(run_id, totals=summary.totals(), status="stopped")
        resume = (
            f"run {run_id} is stored as stopped; once the input is fixed, `seqjudge run --resume {run_id}`"
        )
        hint = f"{exc.hint.rstrip('.')}; {resume} finishes it" if exc.hint else f"{resume} finishes it"
        raise InputError(exc.problem, source=exc.source, where=exc.where, hint=hint) from None
    except BaseException as exc:  # a bug, Ctrl-C, a cancelled task: keep the run resumable and say so
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await _close_transports(provider, gates)
        _finish(summary, gates, cache)
        summary.status = "interrupted"
        summary.error = f"{type(exc).__name__}: {exc}"
        store.finish_run(run_id, totals=summary.totals(), status="interrupted")
        raise
    await _close_transports(provider, gates)
    _finish(summary, gates, cache)
    if fatal:
        summary.status = "interrupted"
        summary.error = str(fatal[0])
    elif _stopping(gates):
        summary.status = "stopped"
        summary.stopped = next(g.stop_reason for g in gates if g.stop_reason)
    store.finish_run(run_id, totals=summary.totals(), status=summary.status)
    if fatal:
        raise fatal[0]
    return summary


async def _close_transport(provider: Any) -> None:
    """Close the provider's HTTP connections while this event loop still runs: they belong to it, and an
    aiohttp session left open warns on stderr when it is collected. The provider stays usable (its next
    call opens a new client)."""
    close = getattr(provider, "aclose", None)
    if close is not None:
        await close()


def _gate(
    provider: Any,
    price: Price | None,
    cfg: RunConfig,
    limiter: RateLimiter,
    budget: Budget | None,
    lane: CpuLane | None,
) -> LimitedProvider:
    """A judge behind the run's limits: at most ``cfg.concurrency`` calls in flight, the rate limits, and
    the budget (priced at this judge's price)."""
    return LimitedProvider(
        provider,
        concurrency=cfg.concurrency,
        limiter=limiter,
        budget=budget,
        estimate_cost=(lambda i, o: estimate_cost(i, o, price)) if price is not None else None,
        cost_of=(lambda usage: cost_of(usage, price).total) if price is not None else None,
        lane=lane,
    )


def escalation_providers(cfg: RunConfig) -> list[Provider]:
    """The providers of ``cfg.escalate``'s models. A model that cannot be used is an error (exit 2): a
    cascade that silently lost a stage would send to review, or auto-pass, what its author meant to
    escalate."""
    from seqjudge.judge.providers.base import get_provider

    opts = cfg.model_options
    out = []
    for model in cfg.escalate:
        why = judge_unavailable(model)
        if why is not None:
            raise InputError(f"the escalation stage cannot run: {why}", where="--escalate")
        out.append(
            get_provider(model, base_url=opts.base_url, timeout=opts.timeout, max_retries=opts.max_retries)
        )
    return out


def _add_calls(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two judges' call counts as one (``max_in_flight``: the larger)."""
    out = dict(a)
    for key, value in b.items():
        if key == "errors":
            out[key] = dict(Counter(a.get(key, {})) + Counter(value))
        elif key == "max_in_flight":
            out[key] = max(a.get(key, 0), value)
        else:
            out[key] = a.get(key, 0) + value
    return out


def _stopping(gates: Sequence[LimitedProvider]) -> bool:
    return any(g.stop_reason is not None for g in gates)


async def _close_transports(provider: Any, gates: Sequence[LimitedProvider]) -> None:
    """The run's provider's connections, and those of a cascade's later judges."""
    await _close_transport(provider)
    for g in gates[1:]:
        await _close_transport(g)


def _finish(summary: RunSummary, gates: Sequence[LimitedProvider], cache: Any) -> None:
    summary.agreement = summary.tally.figures()
    if summary.advisory_fails:
        fails = ", ".join(f"{rule} on {n} trace(s)" for rule, n in summary.advisory_fails.most_common())
        summary.notes.append(
            f"uncertified judge fails, sent to review (uncertified_judge_fail), not to the verdict: {fails}"
        )
    if gates:
        summary.calls = gates[0].stats.as_dict()
        for g in gates[1:]:  # a cascade's calls, all judges together
            summary.calls = _add_calls(summary.calls, g.stats.as_dict())
    if cache is not None:
        summary.cache_hits = cache.hits


async def _judge(
    trace: Trace,
    ruleset: RuleSet,
    gate: LimitedProvider,
    cfg: RunConfig,
    cache: Any,
    rule_ids: list[str],
    catalog: Any,
    examples: Any,
    fatal: list[ProviderError],
) -> JudgeResult | None:
    from seqjudge.judge.confidence import combine_samples, reordered, sample_temperature, with_source
    from seqjudge.judge.judge import JudgeFailure, settle_trace  # cheap once imported; deps stay lazy

    k = cfg.samples if cfg.confidence == "samples" else 1
    temperature = cfg.model_options.temperature
    if k > 1:
        temperature = sample_temperature(gate, temperature)

    async def one(i: int) -> JudgeResult | JudgeFailure:
        rules_i, examples_i = reordered(ruleset, examples, i)
        return await settle_trace(
            trace,
            rules_i,
            gate,
            catalog=catalog,
            examples=examples_i,
            risk_level=cfg.risk_level,
            max_attempts=cfg.max_attempts,
            # Samples after the first never read the cache: a repeated request would repeat its answer.
            cache=cache if i == 0 else None,
            rule_ids=rule_ids,
            max_tokens=cfg.model_options.max_tokens,
            temperature=temperature,
            seed=cfg.model_options.seed,
            redact=cfg.redact,
        )

    # One after another in this task, never gathered: the CPU lane belongs to the task that entered it, and
    # LimitedProvider gives the turn up only from that task while it waits on the network.
    outcomes = [await one(i) for i in range(k)]
    failures = [o for o in outcomes if isinstance(o, JudgeFailure)]
    if not failures or (k > 1 and len(failures) < k and not _stops(failures, gate)):
        results = [o.unscored if isinstance(o, JudgeFailure) else o for o in outcomes]
        return with_source(combine_samples(results) if k > 1 else results[0], cfg.confidence)
    outcome = failures[0]
    exc = outcome.error
    if exc.kind in ("stopped", "budget"):
        return None  # gate.stop_reason says why (the budget, or a fatal error in another trace)
    if exc.kind in FATAL_KINDS or (exc.kind in FATAL_UNTIL_SUCCESS and gate.stats.calls == 0):
        fatal.append(exc)
        gate.stop(str(exc))
        return None
    # Rate limits, server errors, timeouts that outlived the SDK's own retries: this trace is unscored,
    # with the reason, and goes to review; the run goes on.
    return outcome.unscored


def _stops(failures: list[Any], gate: LimitedProvider) -> bool:
    """Whether one of the failures ends the run (or this trace's turn): stopped, budget, or fatal."""
    return any(
        f.error.kind in ("stopped", "budget")
        or f.error.kind in FATAL_KINDS
        or (f.error.kind in FATAL_UNTIL_SUCCESS and gate.stats.calls == 0)
        for f in failures
    )


def _count(summary: RunSummary, result: TraceResult) -> None:
    summary.verdicts[result.verdict] += 1
    summary.queued += result.routed  # what the store queues (``save_result``): one item per routed trace
    for reason in result.review_reasons:
        summary.reasons[reason] += 1
    for d in result.rules:
        if d.final == "failed":
            summary.violated[d.rule_id] += 1
        elif (
            d.final == "deferred"
            and result.judge_skipped is not None
            and d.rule_id not in summary.deferred_rules
        ):
            # A rule the engine left undecided on this trace (a lineage value in an output it could not read)
            # is named with the judge rules a run without a judge leaves deferred: never a silent pass.
            summary.deferred_rules.append(d.rule_id)
        if d.route == "advisory" and d.judge == "failed":
            summary.advisory_fails[d.rule_id] += 1
    summary.tally.add(result.rules)
    judge = result.judge
    if judge is not None and not isinstance(judge, dict):
        summary.judge_status[judge.status] += 1
        summary.judged_traces += 1
        usage = judge.usage
        summary.tokens["input"] += usage.input_tokens
        summary.tokens["cached_input"] += usage.cached_input_tokens
        summary.tokens["cache_write"] += usage.cache_write_tokens
        summary.tokens["output"] += usage.output_tokens
        if result.stages and summary.stages is not None:
            # A cascade's tokens are priced stage by stage: each judge at its own price.
            trace_cost = summary.stages.add(result.stages)
            summary.cost = summary.cost + trace_cost
            summary.max_trace_cost = max(summary.max_trace_cost, trace_cost.total)
        elif summary.price is not None:
            trace_cost = cost_of(usage, summary.price)
            summary.cost = summary.cost + trace_cost
            summary.max_trace_cost = max(summary.max_trace_cost, trace_cost.total)


# -- dry run -----------------------------------------------------------------------------------------------
@dataclass
class RunEstimate:
    """What a run would send, without sending it (``seqjudge run --dry-run``)."""

    traces: int = 0
    skipped_stored: int = 0
    calls: int = 0  # first attempts only; re-asks come on top
    input_tokens: int = 0
    static_tokens: int = 0  # of one call: the part a provider's prompt cache can reuse across traces
    output_tokens: int = 0
    max_output_tokens: int = 0  # the max_tokens bound
    model: str | None = None
    price: Price | None = None
    judge_skipped: str | None = None
    escalate: list[str] = field(default_factory=list)  # a cascade's later judges: not estimated

    def cost(self, *, prompt_cache: bool = False) -> float | None:
        """USD; ``prompt_cache``: the static part of every call but the first read from the prompt cache."""
        if self.price is None:
            return None
        cached = self.static_tokens * max(self.calls - 1, 0) if prompt_cache else 0
        return estimate_cost(self.input_tokens, self.output_tokens, self.price, cached_input_tokens=cached)

    def as_dict(self) -> dict[str, Any]:
        return {
            "dry_run": True,
            "traces": self.traces,
            "skipped_stored": self.skipped_stored,
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "static_tokens_per_call": self.static_tokens,
            "output_tokens": self.output_tokens,
            "max_output_tokens": self.max_output_tokens,
            "model": self.model,
            "price_per_million": self.price.model_dump() if self.price else None,
            "cost_usd": _round(self.cost()),
            "cost_usd_with_prompt_cache": _round(self.cost(prompt_cache=True)),
            "judge_skipped": self.judge_skipped,
            "not_estimated": [f"escalation to {m}" for m in self.escalate],
            "token_estimate": "characters / 4",
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def estimate_run(
    cfg: RunConfig,
    ruleset: RuleSet,
    traces: Iterable[Trace],
    *,
    catalog: Any = None,
    examples: Any = None,
    skip: set[str] | frozenset[str] = frozenset(),
    prices: Any = None,
) -> RunEstimate:
    """Render every judge prompt a run would send and estimate its tokens (characters / 4) and cost.

    No provider is built (no key is needed) and nothing is written. Inputs are checked exactly as the judge
    checks them, so a dry run also finds the errors that would stop a real one."""
    from seqjudge.judge.prompt import catalog_names, render
    from seqjudge.judge.validate import check_inputs

    est = RunEstimate(
        model=cfg.model, price=run_price(cfg, prices) if cfg.model else None, escalate=list(cfg.escalate)
    )
    if not cfg.model:
        est.judge_skipped = judge_unavailable(cfg.model, cfg.model_options.base_url)
    rule_ids = judge_rule_ids(ruleset, cfg.judge_mode)
    names = catalog_names(catalog) if catalog is not None else None
    max_tokens = cfg.model_options.max_tokens
    for trace in traces:
        if trace.trace_id in skip:
            est.skipped_stored += 1
            continue
        est.traces += 1
        if not rule_ids:
            continue
        checked = check_inputs(trace, ruleset, catalog_names=names, rule_ids=rule_ids, redact=cfg.redact)
        if est.judge_skipped:
            continue  # inputs checked as a run would; no judge would be asked, so no call is counted
        prompt = render(
            checked,
            ruleset,
            catalog=catalog,
            examples=examples,
            risk_level=cfg.risk_level,
            rule_ids=rule_ids,
        )
        static = estimate_tokens(len(prompt.system) + len(prompt.static))
        est.static_tokens = static
        est.input_tokens += static + estimate_tokens(len(prompt.dynamic))
        est.output_tokens += min(DRY_RUN_OUTPUT_TOKENS, max_tokens)
        est.max_output_tokens += max_tokens
        est.calls += 1
    return est
