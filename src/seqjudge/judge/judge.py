"""One judge call: render, send, validate, re-ask, and never a default score.

The loop (tenacity, at most ``max_attempts`` calls, no waiting) re-asks only about the judge's *output*:
malformed JSON, a schema error or a failed semantic check. A re-ask is the original prompt plus the last
bad reply and what was wrong with it, so the context never grows beyond that. Transport errors are the
SDK's to retry; a ``ProviderError`` propagates. A reply cut off by the token limit is retried once with a
doubled limit (when allowed), never unchanged; a refusal ends the loop. When attempts run out the result
is ``unscored`` with its reason, and every attempt (raw reply, error, usage, latency) is kept.

``JudgeSession.accept(reply)`` is the validate-one-reply step on its own: batch runs (``seqjudge.batch``)
feed it the replies a provider's batch API returned, then re-ask through the same loop (``finish``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, ParamSpec

from pydantic import BaseModel, Field
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_none

from seqjudge.config import CONFIDENCE_SOURCES, ConfidenceSource  # noqa: F401  (re-exported: first named here)
from seqjudge.errors import InputError, JudgeOutputError, ProviderError
from seqjudge.judge.cache import ResponseCache, cache_reply
from seqjudge.judge.prompt import MAX_FIELD_CHARS, MAX_TRACE_CHARS, RenderedPrompt, catalog_names, render
from seqjudge.judge.providers.base import JudgeRequest, Provider, ProviderReply, Usage
from seqjudge.judge.schema import SCHEMA_NAME, JudgeOutput, json_schema
from seqjudge.judge.validate import InvalidJudgeOutput, check_inputs, validate_reply
from seqjudge.redact import DEFAULT_REDACT
from seqjudge.report import DEFAULT_THRESHOLD, RiskLevel, Verdict, verdict
from seqjudge.rules.model import RuleSet
from seqjudge.trace import Trace

P = ParamSpec("P")

DEFAULT_MAX_TOKENS = 4096
DEFAULT_MAX_TOKENS_LIMIT = 16384
# A reply longer than max_tokens could produce is not a judgement: a token is about four characters of
# English and JSON, so twice that is generous. A larger reply (a misbehaving proxy or fake server once sent
# 50 MB, echoed back in every re-ask) is malformed, kept and echoed only as an excerpt.
REPLY_CHARS_PER_TOKEN = 8
REASK_ECHO_CHARS = 8_000  # at most this much of a bad reply goes back to the model in a re-ask


def reply_char_limit(max_tokens: int) -> int:
    """The longest reply accepted under ``max_tokens``."""
    return max_tokens * REPLY_CHARS_PER_TOKEN


def excerpt(text: str, limit: int = REASK_ECHO_CHARS) -> str:
    """``text``, or its first ``limit`` characters and how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit:,} more characters not repeated here]"


class Attempt(BaseModel):
    """One model answer, good or bad, exactly as it came back."""

    n: int
    request_hash: str
    raw_text: str
    error: str | None = None
    # parse | schema | semantic | size | length | refusal; None for the accepted reply.
    # An oversized reply's raw_text is an excerpt of it (``excerpt``).
    error_stage: str | None = None
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    finish_reason: str
    max_tokens: int
    reasked: bool = False  # the request carried the previous bad reply and its problems
    cached: bool = False


class Fingerprint(BaseModel):
    """What a score depends on, stored with it so that it can be reproduced or explained."""

    provider: str
    model: str
    model_version: str | None = None  # the model id the provider answered with (e.g. a dated snapshot)
    system_fingerprint: str | None = None  # the backend fingerprint, where the provider returns one
    template_version: str
    template_hash: str
    prompt_hash: str
    sampling_sent: dict[str, Any] = Field(default_factory=dict)
    sampling_controlled: bool = False
    attempts_used: int = 0


class JudgeResult(BaseModel):
    trace_id: str | None = None
    status: Literal["scored", "unscored"]
    report: JudgeOutput | None = None
    reason: str | None = None
    attempts: list[Attempt] = Field(default_factory=list)
    fingerprint: Fingerprint
    usage: Usage = Field(default_factory=Usage)  # tokens spent by this call (cached replies cost nothing)
    rule_ids: list[str] = Field(default_factory=list)  # the rules the judge was asked about
    # Per rule, a confidence from another source than the reply itself (agreement across samples, token
    # log-probabilities); None: the stated confidences of the reply are used (``rule_confidences``).
    confidence: dict[str, float] | None = None
    confidence_source: ConfidenceSource = "stated"

    def rule_confidences(self) -> dict[str, float]:
        """Per rule given to the judge, its confidence in its decision (a rule missing has none)."""
        if self.confidence is not None:
            return dict(self.confidence)
        if self.report is None or self.report.rule_decisions is None or self.confidence_source != "stated":
            return {}
        return {d.rule_id: d.confidence for d in self.report.rule_decisions}

    def rule_outcomes(self) -> dict[str, Literal["passed", "failed"]]:
        """Per rule given to the judge: failed iff it appears in the violations. Empty when unscored."""
        if self.report is None:
            return {}
        failed = {v.rule_id for v in self.report.violations}
        return {rid: "failed" if rid in failed else "passed" for rid in self.rule_ids}

    def verdict(
        self, *, threshold: float = DEFAULT_THRESHOLD, risk_level: RiskLevel = "medium"
    ) -> Verdict | None:
        """The judge's own verdict on its report (None when unscored)."""
        if self.report is None:
            return None
        critical = any(v.severity == "critical" for v in self.report.violations)
        return verdict(
            self.report.sequence_correctness_score, critical, threshold=threshold, risk_level=risk_level
        )


class StopJudging(Exception):
    """Ends the loop without another attempt (a refusal, a cut-off that may not be retried)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class _CutOff(JudgeOutputError):
    """A reply cut off by the token limit; retried once with a bigger limit, never unchanged."""


def reask_message(problems: Sequence[str]) -> str:
    """The user turn of a re-ask: exactly what was wrong, and what to do."""
    listing = "\n".join(f"- {p}" for p in problems)
    return (
        "Your previous reply (above) was not accepted. What was wrong:\n"
        f"{listing}\n"
        "Judge the same trace against the same rules again and answer with one complete JSON object that "
        "follows the OUTPUT SCHEMA and the CONSTRAINTS, fixing exactly these problems. Answer with the JSON "
        "object only."
    )


def prepare_request(
    trace: Trace,
    ruleset: RuleSet,
    *,
    catalog: Any = None,
    examples: Any = None,
    risk_level: RiskLevel = "medium",
    rule_ids: Sequence[str] | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    temperature: float | None = 0.0,
    seed: int | None = None,
    max_field_chars: int = MAX_FIELD_CHARS,
    max_trace_chars: int = MAX_TRACE_CHARS,
    redact: Sequence[str] = DEFAULT_REDACT,
) -> tuple[Trace, RenderedPrompt, JudgeRequest]:
    """Check the inputs (``InputError`` before any call) and build the first request of a judge call.

    The online judge and the batch transport both start here, so a batch line carries exactly the request
    an online call would have sent."""
    names = catalog_names(catalog) if catalog is not None else None
    trace = check_inputs(trace, ruleset, catalog_names=names, rule_ids=rule_ids, redact=redact)
    prompt = render(
        trace,
        ruleset,
        catalog=catalog,
        examples=examples,
        risk_level=risk_level,
        rule_ids=rule_ids,
        max_field_chars=max_field_chars,
        max_trace_chars=max_trace_chars,
    )
    request = JudgeRequest(
        system=prompt.system,
        static_prompt=prompt.static,
        dynamic_prompt=prompt.dynamic,
        schema=json_schema(),
        schema_name=SCHEMA_NAME,
        max_tokens=max_tokens,
        temperature=temperature,
        seed=seed,
    )
    return trace, prompt, request


@dataclass(frozen=True)
class JudgeFailure:
    """A judge call the provider failed (after the SDK's own retries): the error, the attempts recorded
    before it, and the ``unscored`` result a run stores when it carries on past this error."""

    error: ProviderError
    unscored: JudgeResult


async def settle_trace(
    trace: Trace,
    ruleset: RuleSet,
    provider: Provider,
    *,
    catalog: Any = None,
    examples: Any = None,
    risk_level: RiskLevel = "medium",
    max_attempts: int = 3,
    cache: ResponseCache | None = None,
    rule_ids: Sequence[str] | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    max_tokens_limit: int = DEFAULT_MAX_TOKENS_LIMIT,
    temperature: float | None = 0.0,
    seed: int | None = None,
    max_field_chars: int = MAX_FIELD_CHARS,
    max_trace_chars: int = MAX_TRACE_CHARS,
    redact: Sequence[str] = DEFAULT_REDACT,
) -> JudgeResult | JudgeFailure:
    """Judge one trace. Invalid inputs raise ``InputError`` before any call; provider trouble is returned
    as a ``JudgeFailure``; bad output ends ``unscored``."""
    if max_attempts < 1:
        raise InputError(f"max_attempts is {max_attempts}", where="--max-attempts", hint="use 1 or more")
    trace, prompt, base = prepare_request(
        trace,
        ruleset,
        catalog=catalog,
        examples=examples,
        risk_level=risk_level,
        rule_ids=rule_ids,
        max_tokens=max_tokens,
        temperature=temperature,
        seed=seed,
        max_field_chars=max_field_chars,
        max_trace_chars=max_trace_chars,
        redact=redact,
    )
    session = JudgeSession(provider, prompt, base, cache, max_tokens_limit)
    return await session.settle(trace, max_attempts)


def _raising(
    settle: Callable[P, Awaitable[JudgeResult | JudgeFailure]],
) -> Callable[P, Awaitable[JudgeResult]]:
    @functools.wraps(settle)  # the signature help() and inspect show is settle's
    async def judge(*args: P.args, **kwargs: P.kwargs) -> JudgeResult:
        outcome = await settle(*args, **kwargs)
        if isinstance(outcome, JudgeFailure):
            raise outcome.error
        return outcome

    return judge


judge_trace = _raising(settle_trace)
judge_trace.__name__ = judge_trace.__qualname__ = "judge_trace"
judge_trace.__doc__ = """Judge one trace: ``settle_trace``'s arguments, its result, and a provider's trouble
raised as the ``ProviderError`` (with ``.attempts`` holding what was recorded)."""


class SessionState(BaseModel):
    """A judge call between two attempts, in JSON: what a batch run keeps while a request is in flight."""

    attempts: list[Attempt] = Field(default_factory=list)
    last_reply: ProviderReply | None = None
    request: JudgeRequest  # the next request to send
    grew_tokens: bool = False


class JudgeSession:
    """The state of one judge call across its attempts.

    ``accept(reply)`` is the validate-one-reply step (record the attempt, check it, decide what comes
    next); ``attempt()`` sends ``self.request`` and accepts the answer; ``finish()`` runs the re-ask loop to
    ``max_attempts`` and returns the result. A batch run feeds batch replies to ``accept`` and keeps
    ``state()`` in its store between rounds (``state=`` restores it).
    """

    def __init__(
        self,
        provider: Provider,
        prompt: RenderedPrompt,
        base: JudgeRequest,
        cache: ResponseCache | None = None,
        max_tokens_limit: int = DEFAULT_MAX_TOKENS_LIMIT,
        *,
        state: SessionState | None = None,
    ) -> None:
        self.provider = provider
        self.prompt = prompt
        self.base = base
        self.request = base
        self.cache = cache
        self.max_tokens_limit = max_tokens_limit
        self.rules = dict(prompt.rule_severities)
        self.attempts: list[Attempt] = []
        self.replies: list[ProviderReply] = []
        self.grew_tokens = False
        if state is not None:
            self.attempts = [a.model_copy() for a in state.attempts]
            # Only the last reply is read again (by ``result``): it is all a restored session needs.
            self.replies = [state.last_reply] if state.last_reply is not None else []
            self.request = state.request
            self.grew_tokens = state.grew_tokens

    def state(self) -> SessionState:
        return SessionState(
            attempts=list(self.attempts),
            last_reply=self.replies[-1] if self.replies else None,
            request=self.request,
            grew_tokens=self.grew_tokens,
        )

    async def finish(self, trace: Trace, max_attempts: int) -> JudgeResult:
        """``settle``, with a provider's trouble raised as its ``ProviderError``."""
        outcome = await self.settle(trace, max_attempts)
        if isinstance(outcome, JudgeFailure):
            raise outcome.error
        return outcome

    async def settle(self, trace: Trace, max_attempts: int) -> JudgeResult | JudgeFailure:
        """Ask (and re-ask) until a valid judgement or ``max_attempts`` attempts in all, counting those
        already made; the result is ``unscored`` with its reason when none is valid. A ``ProviderError``
        that ends the attempts is returned with the unscored result a run records if it carries on."""
        remaining = max_attempts - len(self.attempts)
        if remaining < 1:
            raise ValueError(f"no attempt left: {len(self.attempts)} of max_attempts={max_attempts} made")
        report: JudgeOutput | None = None
        reason: str | None = None
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(remaining),
                wait=wait_none(),
                retry=retry_if_exception_type(JudgeOutputError),
                reraise=True,
            ):
                with attempt:
                    report = await self.attempt()
        except JudgeOutputError as exc:
            reason = self.exhausted(max_attempts, exc)
        except StopJudging as exc:
            reason = exc.reason
        except ProviderError as exc:
            exc.attempts = list(self.attempts)  # kept for the store and review
            # What a run records when it carries on past this error: unscored, with the reason, never a score.
            unscored = self.result(
                trace, None, f"provider error ({exc.kind}) after the SDK's own retries: {exc}"
            )
            return JudgeFailure(exc, unscored)
        return self.result(trace, report, reason)

    def exhausted(self, max_attempts: int, exc: Exception) -> str:
        """The reason of an ``unscored`` result whose attempts ran out."""
        return (
            f"no valid judgement after {len(self.attempts)} attempt(s) (max_attempts={max_attempts}); "
            f"last problem: {exc}"
        )

    async def _send(self, request: JudgeRequest) -> tuple[ProviderReply, bool]:
        if self.cache is not None:
            hit = self.cache.get(self.provider, request)  # never for a re-ask (seqjudge.judge.cache)
            if hit is not None:
                return hit, True
        return await self.provider.complete(request), False

    async def attempt(self) -> JudgeOutput:
        request = self.request
        reply, cached = await self._send(request)
        report = self.accept(reply, cached=cached)
        if not cached:
            cache_reply(self.cache, self.provider, request, reply)  # valid replies only
        return report

    def accept(self, reply: ProviderReply, *, cached: bool = False) -> JudgeOutput:
        """Record ``reply`` (the answer to ``self.request``) as the next attempt and validate it.

        Returns the report; raises ``JudgeOutputError`` when the reply may be re-asked (``self.request``
        is then the re-ask, or the same prompt with a doubled token limit after a cut-off) and
        ``StopJudging`` when it may not (a refusal, a second cut-off)."""
        request = self.request
        raw = reply.text if reply.text.strip() or reply.parsed is None else json.dumps(reply.parsed)
        cap = reply_char_limit(request.max_tokens)
        oversized = len(raw) if len(raw) > cap else 0
        if oversized:
            raw = excerpt(raw)  # the only copy kept: the full text is neither stored nor sent back
            reply = reply.model_copy(update={"text": raw, "parsed": None})
        record = Attempt(
            n=len(self.attempts) + 1,
            request_hash=reply.request_hash,
            raw_text=raw,
            usage=reply.usage,
            latency_s=0.0 if cached else reply.latency_s,
            finish_reason=reply.finish_reason,
            max_tokens=request.max_tokens,
            reasked=bool(request.reask),
            cached=cached,
        )
        self.attempts.append(record)
        self.replies.append(reply)
        if reply.finish_reason == "refusal" or reply.refusal:
            record.error_stage = "refusal"
            record.error = f"the model refused: {reply.refusal or 'no explanation given'}"
            raise StopJudging(
                f"the model refused to judge the trace ({reply.refusal or 'no explanation given'}); "
                "a refusal is not re-asked unchanged"
            )
        if reply.finish_reason == "length":
            record.error_stage = "length"
            doubled = request.max_tokens * 2
            if not self.grew_tokens and doubled <= self.max_tokens_limit:
                self.grew_tokens = True
                self.request = request.model_copy(update={"max_tokens": doubled})
                record.error = (
                    f"the reply was cut off at max_tokens={request.max_tokens}; asking again once "
                    f"with max_tokens={doubled}"
                )
                raise _CutOff(record.error)
            record.error = f"the reply was cut off at max_tokens={request.max_tokens}"
            limit = (
                "it was already doubled once"
                if self.grew_tokens
                else f"doubling it would pass the limit of {self.max_tokens_limit}"
            )
            raise StopJudging(
                f"the reply was cut off at max_tokens={request.max_tokens} and {limit}; "
                "a cut-off reply is not re-asked unchanged"
            )
        try:
            if reply.invalid_utf8:
                raise InvalidJudgeOutput(
                    "parse",
                    [
                        "the reply held bytes that are not UTF-8 (shown here as \ufffd); answer with the "
                        "JSON object in UTF-8 text"
                    ],
                )
            if oversized:
                raise InvalidJudgeOutput(
                    "size",
                    [
                        f"the reply was {oversized:,} characters long, more than the {cap:,} that "
                        f"max_tokens={request.max_tokens} allows; answer with the JSON object only"
                    ],
                )
            return validate_reply(raw, self.rules, self.prompt.n_calls, dict(self.prompt.rule_calls))
        except InvalidJudgeOutput as exc:
            record.error_stage = exc.stage
            record.error = str(exc)
            # The original prompt plus only this reply and its problems: the context never grows further.
            self.request = self.base.model_copy(
                update={
                    "max_tokens": request.max_tokens,
                    "reask": [
                        {"role": "assistant", "content": excerpt(raw) or "(empty reply)"},
                        {"role": "user", "content": reask_message(exc.problems)},
                    ],
                }
            )
            raise

    def result(self, trace: Trace, report: JudgeOutput | None, reason: str | None) -> JudgeResult:
        last = self.replies[-1] if self.replies else None
        usage = Usage()
        for a in self.attempts:
            if not a.cached:
                usage = usage + a.usage
        fingerprint = Fingerprint(
            provider=getattr(self.provider, "name", type(self.provider).__name__),
            model=getattr(self.provider, "model", ""),
            model_version=last.model if last else None,
            system_fingerprint=last.fingerprint if last else None,
            template_version=self.prompt.template_version,
            template_hash=self.prompt.template_hash,
            prompt_hash=self.prompt.prompt_hash,
            sampling_sent=dict(last.sampling_sent) if last else {},
            sampling_controlled=last.sampling_controlled if last else False,
            attempts_used=len(self.attempts),
        )
        confidence = None
        if report is not None and last is not None and last.token_logprobs is not None:
            from seqjudge.judge.confidence import decision_confidences

            confidence = decision_confidences(last.text, last.token_logprobs)
        return JudgeResult(
            trace_id=trace.trace_id,
            status="scored" if report is not None else "unscored",
            report=report,
            reason=None if report is not None else reason,
            attempts=self.attempts,
            fingerprint=fingerprint,
            usage=usage,
            rule_ids=list(self.prompt.rule_ids),
            confidence=confidence,
            confidence_source="logprobs" if confidence is not None else "stated",
        )
