"""The guard's ``judge="model"``: the configured LLM judge decides, before a call, the rules only it can.

Opt-in and slow (a model call per decision that needs one; the decision says how long it took). The judge
is seqjudge's own (``seqjudge.judge.judge.judge_trace``: the prompt, validation and re-asks of ``seqjudge
run``), asked about the session's calls with the proposed call last (no output yet), and only about the
rules that need it. A judge that cannot answer (no model configured, the provider unreachable, no valid
reply) is a guard that cannot decide: ``GuardError``, which the session turns into its fail mode's decision.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from seqjudge.errors import GuardError, SeqjudgeError

if TYPE_CHECKING:
    from seqjudge.config import RunConfig
    from seqjudge.judge.judge import JudgeResult
    from seqjudge.judge.providers.base import Provider
    from seqjudge.rules.model import RuleSet
    from seqjudge.trace import Trace


class ModelJudge:
    """The judge a guard asks: ``provider`` if given (a host's, or a test's scripted one), else one built
    per call from the config's ``model`` and ``model_options`` (an SDK client belongs to one event loop)."""

    def __init__(self, ruleset: RuleSet, config: RunConfig | None, provider: Provider | None) -> None:
        if provider is None and (config is None or not config.model):
            raise GuardError(
                "judge mode 'model' needs a judge: the config's `model:` (with --config), or a provider "
                "given to Guard(..., provider=...)"
            )
        self.ruleset = ruleset
        self.config = config
        self.provider = provider
        self.name = getattr(provider, "model", None) or (config.model if config else None) or "the judge"

    def judge(self, trace: Trace, rule_ids: list[str]) -> tuple[JudgeResult, float]:
        """The judge's result on ``trace`` for ``rule_ids``, and the seconds it took."""
        start = time.perf_counter()
        try:
            result = _run(self._judge(trace, rule_ids))
        except SeqjudgeError as exc:
            raise GuardError(f"the judge could not decide ({type(exc).__name__}: {exc})", cause=exc) from None
        if result.report is None:
            raise GuardError(f"the judge gave no valid answer ({result.reason or 'unscored'})")
        return result, time.perf_counter() - start

    async def _judge(self, trace: Trace, rule_ids: list[str]) -> JudgeResult:
        from seqjudge.judge.judge import judge_trace

        cfg = self.config
        options: dict[str, Any] = {"rule_ids": rule_ids}
        if cfg is not None:
            options |= {
                "risk_level": cfg.risk_level,
                "max_attempts": cfg.max_attempts,
                "max_tokens": cfg.model_options.max_tokens,
                "temperature": cfg.model_options.temperature,
                "seed": cfg.model_options.seed,
                "redact": cfg.redact,
            }
        if self.provider is not None:
            return await judge_trace(trace, self.ruleset, self.provider, **options)
        from seqjudge.judge.providers.base import get_provider

        assert cfg is not None and cfg.model
        opts = cfg.model_options
        built = get_provider(
            cfg.model, base_url=opts.base_url, timeout=opts.timeout, max_retries=opts.max_retries
        )
        try:
            return await judge_trace(trace, self.ruleset, built, **options)
        finally:
            close = getattr(built, "aclose", None)
            if close is not None:
                await close()


def _run(coroutine: Coroutine[Any, Any, JudgeResult]) -> JudgeResult:
    """Run the judge's coroutine to its end from synchronous code, also under a running event loop (an
    async agent framework's): then in a thread of its own, which the caller waits for."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
