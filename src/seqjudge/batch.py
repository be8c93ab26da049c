"""Batch runs: every judge request of a run through the provider's batch API (half price, for suites that
can wait), then collected into the store exactly as an online run would have stored it.

``submit_run`` runs the engine on every trace, renders each judge request as the online judge would
(``prepare_request``), keeps what finishing the trace needs in the store (redacted trace, engine report,
prompt metadata, the request), and submits the requests in as few batches as the provider's limits allow.
The run is left ``batch_pending``. ``collect_run`` records the results of ended batches (joined by
``custom_id``, whatever their order), feeds each reply to the online judge's own validate-one-reply step
(``JudgeSession.accept``), re-asks malformed replies (online by default, or in a follow-up batch), retries
errored or expired requests once in a follow-up batch, and stores every trace through ``reconcile`` and
``Store.save_result``. When every trace is stored the run is finished ``completed``.

Resume safety: results are written to the store before they are acted on, each batch once; a request is
marked handled only after what it led to (a stored result, a follow-up batch) is in the store; a trace
already stored is never stored again. So ``collect`` can be run (or killed) any number of times. The one
window left is between a follow-up batch being accepted by the provider and recorded here: a collect
killed exactly there submits that follow-up again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Literal

from seqjudge.audit import apply_audit
from seqjudge.batch_api import BatchAPI, BatchLine, batch_api
from seqjudge.batch_records import (
    custom_id,
    pack_request,
    pack_session,
    packed_parts,
    prompt_meta,
    rendered_prompt,
    unpack_request,
)
from seqjudge.config import RunConfig, judge_rule_ids
from seqjudge.crosscheck import agreement, reconcile
from seqjudge.errors import InputError, JudgeOutputError, ProviderError
from seqjudge.judge.cache import ResponseCache, cache_reply
from seqjudge.judge.judge import (
    DEFAULT_MAX_TOKENS_LIMIT,
    JudgeFailure,
    JudgeResult,
    JudgeSession,
    SessionState,
    StopJudging,
    prepare_request,
)
from seqjudge.judge.providers.base import JudgeRequest
from seqjudge.judge_gate import gate_data, gate_from_data, run_gate
from seqjudge.provenance import rules_hash
from seqjudge.redact import redact_trace
from seqjudge.report import Report
from seqjudge.rules.engine import Engine
from seqjudge.rules.model import RuleSet
from seqjudge.store import BatchRequest, BatchTrace, DuplicateTraceError, Store
from seqjudge.trace import Trace, check_trace_data

ReaskMode = Literal["online", "batch"]
# Provider errors that stop a collect's online re-asks (as they stop an online run): no other call can
# succeed either. Any other error leaves that trace unscored, with the reason.
FATAL_KINDS = {"auth", "config", "connection"}
BATCH_PRICE_SCALE = 0.5  # the batch APIs' half price (online re-asks pay the full price)


def run_fingerprint(cfg: RunConfig, ruleset: RuleSet) -> dict[str, Any]:
    """The run's fingerprint, the same as an online run's: a batch run is stored like one."""
    return {
        "model": cfg.model,
        "judge_mode": cfg.judge_mode,
        "engine": "seqjudge-engine/1",
        "rules_hash": rules_hash(ruleset),
    }


# -- submit ------------------------------------------------------------------------------------------------
@dataclass
class SubmitSummary:
    run_id: str
    batch_ids: list[str] = field(default_factory=list)
    submitted: int = 0  # traces whose judge request went into a batch
    stored: int = 0  # traces stored at once (no judge rule to ask about, or answered from the cache)
    status: str = "batch_pending"


@dataclass
class _Item:
    trace_id: str
    custom_id: str
    prompt_hash: str
    request: JudgeRequest
    row: dict[str, Any]


async def submit_run(
    cfg: RunConfig,
    ruleset: RuleSet,
    traces: Iterable[Trace],
    store: Store,
    *,
    provider: Any,
    catalog: Any = None,
    examples: Any = None,
    api: BatchAPI | None = None,
) -> SubmitSummary:
    """Create a run, store the traces that need no model call, and submit the others' judge requests."""
    api = api or batch_api(provider)  # an unsupported provider fails before anything is stored
    if cfg.confidence != "stated":
        raise InputError(
            f"--batch sends one request per trace and keeps no log-probabilities: --confidence "
            f"{cfg.confidence} needs an online run",
            where="--confidence",
            hint="drop --batch, or use --confidence stated (the model's own confidence) with --batch",
        )
    if cfg.model is None:
        cfg = cfg.model_copy(update={"model": f"{provider.name}:{provider.model}"})
    engine = Engine(ruleset)
    rule_ids = judge_rule_ids(ruleset, cfg.judge_mode)
    cache = _cache(cfg, store)
    opts = cfg.model_options
    rules = [r for r in ruleset.rules if r.rule_id in set(rule_ids)]
    seen: set[str] = set()
    immediate: list[tuple[Trace, Report, JudgeSession | None]] = []
    items: list[_Item] = []
    parts: dict[str, str] = {}
    # Everything is rendered and checked before the run exists: bad input costs nothing and leaves nothing.
    for trace in traces:
        check_trace_data(trace, cfg.traces_named())  # before redacting or rendering it
        report = engine.check(trace, threshold=cfg.threshold, risk_level=cfg.risk_level)
        if report.trace_id in seen:
            raise InputError(
                f"trace id {report.trace_id!r} occurs twice",
                source=cfg.traces_named(),
                hint="give every trace a distinct trace_id (ids must be unique within a run)",
            )
        seen.add(report.trace_id)
        redacted = redact_trace(trace, cfg.redact)
        if not rule_ids:
            immediate.append((redacted, report, None))
            continue
        checked, prompt, request = prepare_request(
            redacted,
            ruleset,
            catalog=catalog,
            examples=examples,
            risk_level=cfg.risk_level,
            rule_ids=rule_ids,
            max_tokens=opts.max_tokens,
            temperature=opts.temperature,
            seed=opts.seed,
            redact=cfg.redact,
        )
        if cache is not None and cache.get(provider, request) is not None:
            # Answered before: the online judge takes it from the cache at no cost.
            immediate.append((checked, report, JudgeSession(provider, prompt, request, cache)))
            continue
        cid = custom_id(
            trace_id=report.trace_id,
            trace=checked,
            rules=rules,
            template_version=prompt.template_version,
            template_hash=prompt.template_hash,
            provider=provider.name,
            model=provider.model,
            prompt_hash=prompt.prompt_hash,
        )
        row = {
            "trace_id": report.trace_id,
            "custom_id": cid,
            "trace": checked,
            "engine": report.model_dump(mode="json"),
            "prompt": prompt_meta(prompt),
            "request": pack_request(request, parts),
        }
        items.append(_Item(report.trace_id, cid, prompt.prompt_hash, request, row))

    plan = _plan(api, [(it, "first", SessionState(request=it.request), None) for it in items])
    gate = run_gate(cfg, ruleset, provider)
    run_id = store.create_run(
        config=cfg.model_dump(mode="json"),
        fingerprint={**run_fingerprint(cfg, ruleset), "judge_gate": gate_data(gate)},
        label=cfg.label,
    )
    summary = SubmitSummary(run_id=run_id, submitted=len(items))
    try:
        for trace, report, session in immediate:
            judged = None if session is None else await _finish_online(session, trace, cfg.max_attempts)
            _save(store, run_id, cfg, trace, report, judged, gate)
            summary.stored += 1
    except ProviderError:
        # Nothing was submitted yet: an ordinary interrupted run, which `seqjudge run --resume` finishes.
        store.finish_run(run_id, totals={}, status="interrupted")
        raise
    if not items:
        finish(store, run_id, cfg)
        summary.status = "completed"
        return summary
    store.put_batch_traces(run_id, [it.row for it in items], parts)
    try:
        summary.batch_ids = await _send(store, run_id, api, plan)
    finally:
        # Even when a later chunk fails, the run is pending: `batch collect` submits what is left.
        store.mark_batch_pending(run_id)
    return summary


async def _finish_online(session: JudgeSession, trace: Trace, max_attempts: int) -> JudgeResult:
    """Run the online judge loop from the session's state; a non-fatal provider error ends unscored."""
    outcome = await session.settle(trace, max_attempts)
    if isinstance(outcome, JudgeFailure):
        if outcome.error.kind in FATAL_KINDS:
            raise outcome.error
        return outcome.unscored
    return outcome


def _cache(cfg: RunConfig, store: Store) -> Any:
    """The online runner's response cache (``cache/`` beside the store); written, and read unless the run
    was started with ``--no-cache``."""
    return ResponseCache(store.local_dir / "cache", read=cfg.cache)


def _save(
    store: Store,
    run_id: str,
    cfg: RunConfig,
    trace: Trace,
    report: Report,
    judged: JudgeResult | None,
    gate: Any = None,
) -> None:
    """What the online runner does with a decided trace: reconcile (``gate``: ``runner.run_gate``'s) and
    store it."""
    result = reconcile(
        report,
        judged,
        threshold=cfg.threshold,
        risk_level=cfg.risk_level,
        judge_skipped=None,
        gate=gate,
        queue_fails=cfg.review.fails,
    )
    result = apply_audit(result, cfg.audit_rate, cfg.audit_seed, cfg.audit_draw)
    # Every trace reaching here was redacted with the run's names at submit time.
    store.save_result(run_id, trace, result, redacted_with=cfg.redact)


_Work = tuple[
    _Item, str, SessionState, "tuple[str, str] | None"
]  # item, purpose, session, what it follows up


def _plan(api: BatchAPI, work: list[_Work]) -> list[tuple[list[BatchLine], list[_Work]]]:
    """The batches ``work`` needs within the provider's limits: their lines and their work entries. An
    over-large request fails here, before anything is submitted."""
    lines = [BatchLine(item.custom_id, api.body(state.request)) for item, _, state, _ in work]
    by_cid = {entry[0].custom_id: entry for entry in work}
    return [(chunk, [by_cid[line.custom_id] for line in chunk]) for chunk in api.split(lines)]


async def _send(
    store: Store, run_id: str, api: BatchAPI, plan: list[tuple[list[BatchLine], list[_Work]]]
) -> list[str]:
    """Submit the planned batches; each is recorded (and what it follows up marked handled) as soon as the
    provider has accepted it."""
    round_ = 1 + max((b.round for b in store.batches(run_id)), default=-1)
    ids: list[str] = []
    for n, (chunk, entries) in enumerate(plan):
        submitted = await api.submit(chunk, label=f"seqjudge-{run_id}-r{round_}-{n}")
        parts: dict[str, str] = {}
        purposes = {purpose for _, purpose, _, _ in entries}
        store.add_batch(
            run_id,
            {
                "id": submitted.id,
                "provider": api.provider.name,
                "model": api.provider.model,
                "round": round_,
                "purpose": purposes.pop() if len(purposes) == 1 else "mixed",
                "input_file_id": submitted.input_file_id,
                "wire": api.wire,
                "status": submitted.status,
                "counts": submitted.counts,
            },
            [
                {
                    "custom_id": item.custom_id,
                    "trace_id": item.trace_id,
                    "purpose": purpose,
                    "attempt": len(state.attempts) + 1,
                    "prompt_hash": item.prompt_hash,
                    "request_hash": api.request_hash(state.request),
                    "session": pack_session(state, item.request, parts),
                }
                for item, purpose, state, _ in entries
            ],
            parts=parts,
            handled=[follows for _, _, _, follows in entries if follows is not None],
        )
        ids.append(submitted.id)
    return ids


def finish(store: Store, run_id: str, cfg: RunConfig) -> Any:
    """Finish the run ``completed`` with the totals an online run of the same results has (the runner's
    own counting), except the cost: what a batch answered is priced at the batch APIs' half price."""
    from seqjudge.pricing import Cost, cost_of
    from seqjudge.runner import RunSummary, _count, run_price

    price = run_price(cfg)
    summary = RunSummary(
        run_id=run_id, judged=True, judge_skipped=None, model=cfg.model, price=price, store=store.location
    )
    requests = store.batch_requests(run_id, handled=None)
    # (trace id, attempt number) of every attempt a batch answered.
    batched = {(r.trace_id, r.attempt) for r in requests if r.outcome == "succeeded"}
    results = []
    cost, max_trace, online = Cost(), 0.0, 0
    for stored in store.results(run_id):
        _count(summary, stored.result)
        results.append(stored.result)
        judge = stored.result.judge
        if judge is None or isinstance(judge, dict):
            continue
        trace_cost = Cost()
        for a in judge.attempts:
            if a.cached:
                continue
            in_batch = (stored.trace_id, a.n) in batched
            online += not in_batch
            if price is not None:
                scale = BATCH_PRICE_SCALE if in_batch else 1.0
                trace_cost = trace_cost + cost_of(a.usage, price, scale=scale)
        cost, max_trace = cost + trace_cost, max(max_trace, trace_cost.total)
    summary.cost, summary.max_trace_cost = cost, max_trace
    summary.calls = {"calls": len(requests) + online, "batch_requests": len(requests), "online_calls": online}
    summary.agreement = agreement(results)
    store.finish_run(run_id, totals=summary.totals(), status="completed")
    return summary


# -- status ------------------------------------------------------------------------------------------------
def run_config(store: Store, run_id: str) -> RunConfig:
    """The configuration a run was started with (as stored)."""
    return RunConfig.model_validate(store.run_info(run_id).config)


@asynccontextmanager
async def _provider_for(store: Store, run_id: str, provider: Any) -> AsyncIterator[tuple[RunConfig, Any]]:
    """The run's config and a provider for it: ``provider`` when given, else one built from the config
    (and closed afterwards, in this event loop)."""
    cfg = run_config(store, run_id)
    if provider is not None:
        yield cfg, provider
        return
    if not cfg.model:
        raise InputError(f"run {run_id} names no model", source=store.location)
    from seqjudge.judge.providers.base import get_provider

    opts = cfg.model_options
    built = get_provider(
        cfg.model,
        base_url=opts.base_url,
        timeout=opts.timeout,  # type: ignore[arg-type]
        max_retries=opts.max_retries,
    )
    try:
        yield cfg, built
    finally:
        await built.aclose()  # type: ignore[attr-defined]


def _api_for(provider: Any, batch: Any) -> BatchAPI:
    if (batch.provider, batch.model) != (provider.name, provider.model):
        raise InputError(
            f"batch {batch.id} was submitted to {batch.provider}:{batch.model}, not {provider.name}:"
            f"{provider.model}",
            hint="collect a run with the model it was submitted to",
        )
    return batch_api(provider, batch.wire)


async def poll_batches(store: Store, run_id: str, *, provider: Any = None) -> list[Any]:
    """Ask the provider about every batch of the run not yet collected; returns the run's batches."""
    async with _provider_for(store, run_id, provider) as (_, client):
        for b in store.batches(run_id):
            if b.state == "submitted":
                polled = await _api_for(client, b).poll(b.id)
                store.update_batch(b.id, status=polled.status, counts=polled.counts)
    return store.batches(run_id)


# -- collect -----------------------------------------------------------------------------------------------
@dataclass
class CollectSummary:
    run_id: str
    status: str
    recorded: int = 0  # results recorded from ended batches
    stored: int = 0  # traces stored by this collect
    reasked_online: int = 0
    follow_up_batches: list[str] = field(default_factory=list)
    pending_batches: int = 0
    remaining: int = 0  # traces not stored yet
    summary: Any = None  # the run's RunSummary once it is completed


async def collect_run(
    store: Store,
    run_id: str,
    *,
    provider: Any = None,
    reask: ReaskMode = "online",
    wait: bool = False,
    poll_interval: float = 60.0,
    on_round: Callable[[CollectSummary], None] | None = None,
) -> CollectSummary:
    """Collect the run's ended batches and act on their results (see the module docstring); with ``wait``,
    poll every ``poll_interval`` seconds until the run is completed."""
    if reask not in ("online", "batch"):
        raise InputError(f"--reask is {reask!r}", where="--reask", hint="use online or batch")
    info = store.run_info(run_id)
    traces = store.batch_traces(run_id)
    if not traces:
        raise InputError(
            f"run {run_id} has no batch requests",
            source=store.location,
            hint="`seqjudge run --batch` submits a run to a provider's batch API",
        )
    total = CollectSummary(run_id=run_id, status=info.status)
    if info.status == "completed":
        return total
    async with _provider_for(store, run_id, provider) as (cfg, client):
        collector = _Collector(store, run_id, cfg, client, traces, reask)
        while True:
            step = await collector.step()
            total.recorded += step.recorded
            total.stored += step.stored
            total.reasked_online += step.reasked_online
            total.follow_up_batches += step.follow_up_batches
            total.pending_batches, total.remaining = step.pending_batches, step.remaining
            total.status, total.summary = step.status, step.summary
            if on_round is not None:
                on_round(step)
            if step.status == "completed" or not wait:
                return total
            await asyncio.sleep(poll_interval)


class _Collector:
    def __init__(
        self,
        store: Store,
        run_id: str,
        cfg: RunConfig,
        provider: Any,
        traces: dict[str, BatchTrace],
        reask: ReaskMode,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.cfg = cfg
        self.provider = provider
        self.traces = traces
        self.reask = reask
        self.cache = _cache(cfg, store)
        parts: set[str] = set()
        for t in traces.values():
            parts |= packed_parts(t.request)
        self.parts = store.prompt_parts(parts)
        self.bases = {tid: unpack_request(t.request, self.parts) for tid, t in traces.items()}
        self.default_api = batch_api(provider)
        self._gate: Any = None
        self._gated = False

    def gate(self) -> Any:
        """The run's judge gate as its submission stored it (``judge_gate.gate_data``; none for a run
        submitted before gates existed), read once."""
        if not self._gated:
            self._gate = gate_from_data(self.store.run_info(self.run_id).fingerprint.get("judge_gate"))
            self._gated = True
        return self._gate

    def _item(self, trace_id: str) -> _Item:
        t = self.traces[trace_id]
        return _Item(trace_id, t.custom_id, t.prompt["prompt_hash"], self.bases[trace_id], {})

    def _session(self, req: BatchRequest) -> JudgeSession:
        t = self.traces[req.trace_id]
        base = self.bases[req.trace_id]
        data = dict(req.session)
        packed = data.pop("request")
        if packed != "base":
            self.parts.update(self.store.prompt_parts(packed_parts(packed) - set(self.parts)))
        request = base if packed == "base" else unpack_request(packed, self.parts)
        state = SessionState.model_validate({**data, "request": request})
        return JudgeSession(
            self.provider,
            rendered_prompt(t.prompt, base),
            base,
            self.cache,
            DEFAULT_MAX_TOKENS_LIMIT,
            state=state,
        )

    async def step(self) -> CollectSummary:
        out = CollectSummary(run_id=self.run_id, status="batch_pending")
        apis: dict[str, BatchAPI] = {}
        # 1. Record the results of every batch that has ended (once: a collected batch is not read again).
        out_now = [b for b in self.store.batches(self.run_id) if b.state == "submitted"]
        cids: dict[str, list[str]] = {b.id: [] for b in out_now}
        if out_now:
            for r in self.store.batch_requests(self.run_id, handled=False):
                if r.batch_id in cids:
                    cids[r.batch_id].append(r.custom_id)
        for b in out_now:
            api = apis[b.id] = _api_for(self.provider, b)
            polled = await api.poll(b.id)
            if not polled.ended:
                self.store.update_batch(b.id, status=polled.status, counts=polled.counts)
                continue
            lines = await api.results(b.id, polled, cids[b.id])
            out.recorded += self.store.record_batch_results(
                b.id, [line.as_dict() for line in lines], status=polled.status, counts=polled.counts
            )
        # 2. Act on every recorded outcome not acted on yet.
        done = self.store.completed_trace_ids(self.run_id)
        batches = {b.id: b for b in self.store.batches(self.run_id)}
        online: list[tuple[BatchRequest, JudgeSession]] = []
        follow: list[_Work] = []
        requested: set[str] = set()
        for req in self.store.batch_requests(self.run_id, handled=None):
            requested.add(req.trace_id)
            if req.handled or req.outcome is None:
                continue
            key = (req.batch_id, req.custom_id)
            if req.trace_id in done:  # stored before a kill, or by another collect: never twice
                self.store.mark_handled([key])
                continue
            session = self._session(req)
            if req.outcome != "succeeded":
                if req.purpose == "retry":
                    reason = (
                        f"no judgement: the batch request failed, and {req.outcome} again when retried in "
                        f"a follow-up batch ({req.error or 'no reason given'})"
                    )
                    self._store(req, session.result(self.traces[req.trace_id].trace, None, reason))
                    out.stored += 1
                else:
                    follow.append((self._item(req.trace_id), "retry", session.state(), key))
                continue
            api = apis.get(req.batch_id) or _api_for(self.provider, batches[req.batch_id])
            request = session.request
            reply = api.reply(req.result or {}, request)
            trace = self.traces[req.trace_id].trace
            try:
                report = session.accept(reply)
            except StopJudging as exc:
                self._store(req, session.result(trace, None, exc.reason))
                out.stored += 1
                continue
            except JudgeOutputError as exc:
                if len(session.attempts) >= self.cfg.max_attempts:
                    self._store(
                        req, session.result(trace, None, session.exhausted(self.cfg.max_attempts, exc))
                    )
                    out.stored += 1
                elif self.reask == "online":
                    online.append((req, session))
                else:
                    follow.append((self._item(req.trace_id), "reask", session.state(), key))
                continue
            # A valid batch answer fills the response cache as an online one does: a later rerun is free.
            cache_reply(self.cache, self.provider, request, reply)
            self._store(req, session.result(trace, report, None))
            out.stored += 1
        # Traces kept at submission whose batch was never created (a submission cut short): submit them now.
        for tid in self.traces:
            if tid not in requested and tid not in done:
                follow.append((self._item(tid), "first", SessionState(request=self.bases[tid]), None))
        # 3. Online re-asks, as many at once as the run's concurrency allows.
        if online:
            out.stored += await self._reask_online(online)
            out.reasked_online += len(online)
        # 4. Follow-up batches.
        if follow:
            api = self.default_api
            out.follow_up_batches = await _send(self.store, self.run_id, api, _plan(api, follow))
        # 5. Done when every trace is stored and no batch is out.
        stored = self.store.completed_trace_ids(self.run_id)
        out.remaining = sum(1 for tid in self.traces if tid not in stored)
        out.pending_batches = sum(1 for b in self.store.batches(self.run_id) if b.state == "submitted")
        if out.remaining == 0 and out.pending_batches == 0:
            out.summary = finish(self.store, self.run_id, self.cfg)
            out.status = "completed"
        return out

    def _store(self, req: BatchRequest, judged: JudgeResult) -> None:
        t = self.traces[req.trace_id]
        # Another collect of this run may have stored it meanwhile: one result per trace, theirs.
        with suppress(DuplicateTraceError):
            _save(
                self.store,
                self.run_id,
                self.cfg,
                t.trace,
                Report.model_validate(t.engine),
                judged,
                self.gate(),
            )
        self.store.mark_handled([(req.batch_id, req.custom_id)])

    async def _reask_online(self, work: list[tuple[BatchRequest, JudgeSession]]) -> int:
        semaphore = asyncio.Semaphore(self.cfg.concurrency)
        fatal: list[ProviderError] = []

        async def one(req: BatchRequest, session: JudgeSession) -> int:
            async with semaphore:
                if fatal:
                    return 0
                try:
                    judged = await _finish_online(
                        session, self.traces[req.trace_id].trace, self.cfg.max_attempts
                    )
                except ProviderError as exc:
                    fatal.append(exc)  # left unhandled: the next collect re-asks it
                    return 0
                self._store(req, judged)
                return 1

        stored = sum(await asyncio.gather(*(one(r, s) for r, s in work)))
        if fatal:
            raise fatal[0]
        return stored
