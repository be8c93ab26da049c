"""Confidence sources other than the reply's own words: token log-probabilities and agreement of samples.

- ``logprobs``: the reply lists ``rule_decisions`` first (schema order), so each rule's ``"decision"`` value
  is written before the violations that follow from it. The probability the model gave that value is the
  product of the probabilities of the tokens that spell it: ``exp(sum of their log-probabilities)``.
- ``samples``: the trace is judged K times, each time with the worked examples (and each `judge` rule's own
  examples) in another seeded order, at a sampling temperature where the provider's profile allows one.
  The reported decisions are those of the sample that agrees most with the per-rule majority (ties: the
  first such sample); each rule's confidence is the share of the K samples that decided it the same way. A
  sample that was not scored agrees with nothing, so it lowers every confidence (fail closed).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from typing import Any

from seqjudge.errors import InputError

# Temperature of the K samples when the provider's profile says the model takes one and the config's is 0
# or unset: enough variety for agreement to mean something, far below free generation.
SAMPLE_TEMPERATURE = 0.7
# OpenAI structured output writes the keys in schema order: rule_id, then decision.
_DECISION = re.compile(
    r'"rule_id"\s*:\s*"(?P<rule>(?:[^"\\]|\\.)*)"\s*,\s*"decision"\s*:\s*"(?P<value>passed|failed)"'
)


def check_source(source: str, samples: int, provider_name: str | None) -> None:
    """The confidence options make sense together and for the provider (``InputError`` otherwise)."""
    if source == "samples" and samples < 2:
        raise InputError(
            f"--confidence samples needs at least 2 samples, got --samples {samples}",
            where="--samples",
            hint="give --samples K with K >= 2 (5 is a common choice)",
        )
    if source != "samples" and samples > 1:
        raise InputError(
            f"--samples {samples} goes with --confidence samples",
            where="--samples",
            hint="add --confidence samples, or drop --samples",
        )
    if source == "logprobs" and provider_name is not None and provider_name not in ("openai", "scripted"):
        raise InputError(
            f"--confidence logprobs needs token log-probabilities, which the {provider_name} provider does "
            "not return",
            where="--confidence",
            hint="use the openai adapter (OpenAI chat completions or a compatible server that returns "
            "logprobs), or --confidence stated / samples",
        )


def decision_confidences(text: str, tokens: Sequence[tuple[str, float]]) -> dict[str, float]:
    """Per rule, exp(sum of the log-probabilities of the tokens spelling its ``decision`` value).

    The tokens must spell ``text`` exactly (as OpenAI's ``logprobs.content`` does); otherwise nothing is
    returned rather than a confidence read off the wrong tokens."""
    if "".join(t for t, _ in tokens) != text:
        return {}
    starts: list[int] = []
    at = 0
    for token, _ in tokens:
        starts.append(at)
        at += len(token)
    out: dict[str, float] = {}
    for match in _DECISION.finditer(text):
        lo, hi = match.span("value")
        total = sum(lp for (tok, lp), s in zip(tokens, starts, strict=True) if s < hi and s + len(tok) > lo)
        out.setdefault(match.group("rule"), math.exp(total))
    return out


def sample_temperature(provider: Any, configured: float | None) -> float | None:
    """The temperature of the K samples: the configured one when above 0, else ``SAMPLE_TEMPERATURE`` when
    the provider's profile says the model takes a temperature, else the configured one (which the adapter
    then leaves out, and records so)."""
    if configured:
        return configured
    from seqjudge.judge.providers.registry import provider_profile

    profile = provider_profile(getattr(provider, "name", ""))
    if profile is not None and profile.takes_sampling_for(getattr(provider, "model", "")):
        return SAMPLE_TEMPERATURE
    return configured


def reordered(ruleset: Any, examples: Any, k: int) -> tuple[Any, Any]:
    """Sample ``k``'s prompt inputs: the worked examples and each rule's own examples in a seeded order
    (sample 0 keeps the given order)."""
    if k == 0:
        return ruleset, examples
    from seqjudge.judge.prompt import load_examples

    rng = random.Random(k)
    shown = list(examples) if isinstance(examples, list | tuple) else list(load_examples(examples))
    rng.shuffle(shown)
    rules = []
    for rule in ruleset.rules:
        own = list(getattr(rule, "examples", None) or [])
        if len(own) > 1:
            rng.shuffle(own)
            rule = rule.model_copy(update={"examples": own})
        rules.append(rule)
    return ruleset.model_copy(update={"rules": rules}), tuple(shown)


def combine_samples(samples: Sequence[Any]) -> Any:
    """One ``JudgeResult`` from K samples of the same trace (see the module docstring)."""
    from seqjudge.judge.providers.base import Usage

    k = len(samples)
    usage = Usage()
    for s in samples:
        usage = usage + s.usage
    attempts = [a for s in samples for a in s.attempts]
    scored = [s for s in samples if s.status == "scored"]
    if not scored:
        first = samples[0]
        return first.model_copy(update={"usage": usage, "attempts": attempts, "confidence_source": "samples"})
    votes = [s.rule_outcomes() for s in scored]
    rule_ids = list(scored[0].rule_ids)
    majority = {}
    for rid in rule_ids:
        failed = sum(1 for v in votes if v.get(rid) == "failed")
        majority[rid] = "failed" if 2 * failed >= len(votes) else "passed"  # a tie fails: fail closed
    best = max(range(len(scored)), key=lambda i: (sum(votes[i].get(r) == majority[r] for r in rule_ids), -i))
    chosen = votes[best]
    confidence = {rid: sum(1 for v in votes if v.get(rid) == chosen.get(rid)) / k for rid in rule_ids}
    return scored[best].model_copy(
        update={
            "usage": usage,
            "attempts": attempts,
            "confidence": confidence,
            "confidence_source": "samples",
        }
    )


def with_source(result: Any, source: str) -> Any:
    """``result`` with confidences from ``source`` only: a run asking for log-probabilities whose reply
    carried none gets no confidence (its decisions are never auto-passed), never the stated one instead."""
    if result is None or result.confidence_source == source:
        return result
    if source == "stated":
        return result.model_copy(update={"confidence": None, "confidence_source": "stated"})
    return result.model_copy(update={"confidence": {}, "confidence_source": source})
