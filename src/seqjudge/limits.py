"""Keeping a provider as busy as its limits allow, and no busier: concurrency, requests and tokens per minute,
a shared back-off after a 429, and a cost budget.

Design decisions:

- Requests per minute use a sliding-window *log* of start times, not a token bucket. A bucket of size
  ``rpm`` refilled at ``rpm/60`` a second lets almost ``2 * rpm`` requests start within one minute (a full
  bucket, then a minute of refill); the log admits a start at ``t`` only when fewer than ``rpm`` starts lie
  in ``(t - 60, t]``. So any ``rpm + 1`` consecutive starts span at least 60 s, i.e. no 60-second window
  holds more than ``rpm`` starts (tests/test_limits.py checks this on random schedules with a fake clock).
  A second, 1/60-long window with ``ceil(rpm / 60)`` spreads the starts over the minute, because providers
  enforce per-minute limits over shorter periods too (10,000 rpm as about 167 a second).
- Tokens per minute use the same log, weighted: a call reserves an estimate (its prompt's characters / 4,
  plus the output tokens this run's replies have averaged) when it starts, and the reply's real usage
  replaces the estimate. It is a pacing aid, not a guarantee: the true count is known only afterwards.
  A call larger than the whole per-minute budget starts alone, into an empty window, rather than never.
- A 429 (or Anthropic's 529, or a 503 with Retry-After) pauses every *new* call of the run until the
  Retry-After has passed (1 s when the reply names none, at most ``MAX_PAUSE_S``): a provider that says
  "slow down" means the account, not one request. The SDK still retries the call that got the 429 itself.
  The adapters report each HTTP response through ``SDKProvider.observe_transport``.
- SDK transport retries count against the requests per minute too: the adapters ask ``on_request`` before
  every HTTP attempt, and a retry waits for a free slot like a new call. The first attempt of a call was
  admitted by ``LimitedProvider.complete`` already (a context variable carries that across).
- ``LimitedProvider`` wraps the run's provider: at most ``concurrency`` calls in flight (a semaphore held
  only around the provider call, so cache hits and rendering never take a slot), then the budget, then
  the rate limits; everything else (name, model, sampling, ...) is the wrapped provider's, so response
  cache keys do not change.
- The budget (``--max-cost``) reserves each call's estimated cost before it starts (every input token at
  the uncached price, the run's average output) and stops starting calls once ``spent + reserved`` would
  pass it. Calls already in flight finish, so the budget can be passed by the estimation error of those.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from seqjudge.errors import ProviderError
from seqjudge.judge.providers.base import TransportObservable
from seqjudge.judge.providers.registry import provider_profile

__all__ = [
    "Budget",
    "BudgetExhaustedError",
    "CallStats",
    "Clock",
    "LimitedProvider",
    "MonotonicClock",
    "RateLimiter",
    "RunStoppedError",
    "SlidingWindow",
    "default_limits",
    "estimate_tokens",
]

WINDOW_S = 60.0
MAX_PAUSE_S = 120.0  # the longest Retry-After honoured (OpenAI's SDK gives up beyond 120 s anyway)
DEFAULT_429_PAUSE_S = 1.0  # a 429 without Retry-After
MIN_SLEEP_S = 0.001  # re-check at least this much later, so float rounding can never spin the loop
CHARS_PER_TOKEN = 4  # the usual rule of thumb for English and JSON; an estimate, not a count
FIRST_OUTPUT_GUESS = 1_000  # expected reply tokens before this run has seen a reply


def default_limits(provider: str) -> tuple[int, int]:
    """(rpm, tpm) when --rpm/--tpm are not given: the provider profile's (the published limits of a tier-2
    account for the flagship models; accounts differ: set yours with --rpm/--tpm or `rpm:`/`tpm:` in
    seqjudge.yaml). (0, 0) = unlimited, as for providers without published limits (scripted, custom)."""
    profile = provider_profile(provider) if provider else None
    return (profile.default_rpm, profile.default_tpm) if profile is not None else (0, 0)


def estimate_tokens(text_chars: int) -> int:
    """Tokens in a text of ``text_chars`` characters: characters / 4, rounded up."""
    return -(-text_chars // CHARS_PER_TOKEN)


def request_chars(request: Any) -> int:
    """Characters a ``JudgeRequest`` sends (system, user text, re-ask turns)."""
    return (
        len(request.system)
        + len(request.static_prompt)
        + len(request.dynamic_prompt)
        + sum(len(t.get("content", "")) for t in request.reask)
    )


# -- clocks ------------------------------------------------------------------------------------------------
class Clock(Protocol):
    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class MonotonicClock:
    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


# -- the window --------------------------------------------------------------------------------------------
@dataclass
class _Entry:
    at: float
    amount: int
    live: bool = True


class SlidingWindow:
    """At most ``limit`` units (requests, tokens) started in any ``window`` seconds: a log of starts."""

    def __init__(self, limit: int, window: float = WINDOW_S) -> None:
        if limit < 1 or window <= 0:
            raise ValueError("a sliding window needs limit >= 1 and window > 0")
        self.limit = limit
        self.window = window
        self._log: deque[_Entry] = deque()
        self._total = 0

    @property
    def used(self) -> int:
        return self._total

    def _expire(self, now: float) -> None:
        # A start at ``at`` leaves the window at ``at + window``: windows are half-open, [a, a + window).
        edge = now - self.window
        log = self._log
        while log and log[0].at <= edge:
            entry = log.popleft()
            entry.live = False
            self._total -= entry.amount

    def wait_time(self, now: float, amount: int = 1) -> float:
        """Seconds from ``now`` until ``amount`` more fits (0.0: it fits now)."""
        self._expire(now)
        if self._total + amount <= self.limit or not self._log:
            return 0.0
        excess = self._total + amount - self.limit
        freed = 0
        for entry in self._log:  # oldest first: the earliest moment enough of the log has left the window
            freed += entry.amount
            if freed >= excess:
                return max(entry.at + self.window - now, 0.0)
        return max(self._log[-1].at + self.window - now, 0.0)  # pragma: no cover - freed reaches excess

    def add(self, now: float, amount: int = 1) -> _Entry:
        entry = _Entry(now, amount)
        self._log.append(entry)
        self._total += amount
        return entry

    def correct(self, entry: _Entry, amount: int) -> None:
        """Replace an estimate with the real amount (ignored once the entry has left the window)."""
        if entry.live:
            self._total += amount - entry.amount
            entry.amount = amount


# -- the limiter -------------------------------------------------------------------------------------------
@dataclass
class Permit:
    """One admitted start; ``tokens`` is its entry in the tokens-per-minute log (None when unlimited)."""

    at: float
    tokens: _Entry | None = None


class RateLimiter:
    """Requests and tokens per ``window`` (a minute), and the run-wide pause after a 429.

    ``acquire(tokens)`` waits (FIFO) until a call may start and records the start; ``settle(permit,
    tokens)`` replaces the estimate with the reply's usage; ``pause(seconds)`` holds every new start.
    ``rpm=0`` / ``tpm=0``: that limit is off.
    """

    def __init__(
        self,
        rpm: int = 0,
        tpm: int = 0,
        *,
        window: float = WINDOW_S,
        clock: Clock | None = None,
        smooth: bool = True,
        max_pause: float = MAX_PAUSE_S,
    ) -> None:
        if rpm < 0 or tpm < 0:
            raise ValueError("rpm and tpm are >= 0 (0 = unlimited)")
        self.rpm, self.tpm, self.window = rpm, tpm, window
        self.clock: Clock = clock or MonotonicClock()
        self.max_pause = max_pause
        self._windows: list[SlidingWindow] = []
        if rpm:
            self._windows.append(SlidingWindow(rpm, window))
            if smooth and rpm > 1:
                self._windows.append(SlidingWindow(math.ceil(rpm / 60), window / 60))
        self._tokens = SlidingWindow(tpm, window) if tpm else None
        self.paused_until = -math.inf
        self._lock = asyncio.Lock()  # admission is FIFO: a waiting call is never overtaken
        self.starts = 0
        self.pauses = 0
        self.waited_s = 0.0

    @property
    def unlimited(self) -> bool:
        return not self.rpm and not self.tpm

    def pause(self, seconds: float | None) -> None:
        """Hold every new start for ``seconds`` from now (a 429's Retry-After)."""
        seconds = DEFAULT_429_PAUSE_S if seconds is None or not math.isfinite(seconds) else seconds
        seconds = min(max(seconds, 0.0), self.max_pause)
        self.paused_until = max(self.paused_until, self.clock.now() + seconds)
        self.pauses += 1

    async def acquire(self, tokens: int = 0) -> Permit:
        async with self._lock:
            now = await self._wait(tokens)
            entry = self._tokens.add(now, tokens) if self._tokens is not None else None
            for w in self._windows:
                w.add(now)
            self.starts += 1
            return Permit(now, entry)

    async def acquire_retry(self) -> None:
        """A transport retry: one more request (its tokens were reserved by the call it repeats)."""
        await self.acquire(0)

    def settle(self, permit: Permit, tokens: int) -> None:
        if permit.tokens is not None and self._tokens is not None:
            self._tokens.correct(permit.tokens, tokens)

    async def _wait(self, tokens: int) -> float:
        started = self.clock.now()
        while True:
            now = self.clock.now()
            wait = self.paused_until - now
            for w in self._windows:
                wait = max(wait, w.wait_time(now, 1))
            if self._tokens is not None:
                wait = max(wait, self._tokens.wait_time(now, tokens))
            if wait <= 0:
                self.waited_s += now - started
                return now
            await self.clock.sleep(max(wait, MIN_SLEEP_S))


# -- the budget --------------------------------------------------------------------------------------------
class BudgetExhaustedError(ProviderError):
    """The next call would pass ``--max-cost``: the run stops starting calls and stays resumable."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="budget")


class RunStoppedError(ProviderError):
    """The run is stopping (a fatal error or the budget elsewhere): this call was not started."""

    def __init__(self, message: str = "the run is stopping; this call was not started") -> None:
        super().__init__(message, kind="stopped")


class Budget:
    """``--max-cost`` in USD: ``reserve(estimate)`` before a call, ``settle(reservation, cost)`` after."""

    def __init__(self, limit_usd: float) -> None:
        self.limit = limit_usd
        self.spent = 0.0
        self.reserved = 0.0

    def reserve(self, estimate: float) -> float:
        if self.spent + self.reserved + estimate > self.limit:
            raise BudgetExhaustedError(
                f"the budget of ${self.limit:.2f} (--max-cost) is spent: ${self.spent:.4f} spent, "
                f"${self.reserved:.4f} reserved by calls in flight, and the next call is estimated at "
                f"${estimate:.4f}"
            )
        self.reserved += estimate
        return estimate

    def settle(self, reservation: float, cost: float | None) -> None:
        """``cost=None``: the call failed before anything was charged (a 429, a 5xx, a dropped line)."""
        self.reserved = max(self.reserved - reservation, 0.0)
        if cost:
            self.spent += cost


# -- what a run counts about its calls ---------------------------------------------------------------------
@dataclass
class CallStats:
    calls: int = 0  # provider calls that returned a reply
    failed_calls: int = 0  # provider calls that raised (after the SDK's own retries)
    errors: Counter[str] = field(default_factory=Counter)  # by ProviderError kind
    http_attempts: int = 0  # HTTP requests the adapters sent (SDK retries included); SDK providers only
    transport_retries: int = 0
    rate_limited: int = 0  # 429/529 responses seen (each paused the run)
    in_flight: int = 0
    max_in_flight: int = 0
    output_tokens: int = 0

    def expected_output(self, max_tokens: int) -> int:
        """The output tokens to reserve for the next call: this run's average so far, at most max_tokens."""
        guess = self.output_tokens / self.calls if self.calls else FIRST_OUTPUT_GUESS
        return max(1, min(max_tokens, math.ceil(guess)))

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "failed_calls": self.failed_calls,
            "errors": dict(self.errors),
            "http_attempts": self.http_attempts,
            "transport_retries": self.transport_retries,
            "rate_limited": self.rate_limited,
            "max_in_flight": self.max_in_flight,
        }


# Set by LimitedProvider for the duration of one call: its first HTTP attempt is already admitted.
_ADMITTED: contextvars.ContextVar[bool] = contextvars.ContextVar("seqjudge_admitted", default=False)

# Statuses after which the whole run pauses: rate limited (429), Anthropic overloaded (529), and a 503
# that names a Retry-After.
_SLOW_DOWN = {429, 529}


class CpuLane:
    """Takes turns at the CPU-bound part of deciding a trace (engine, rendering, validation, storage): one
    holder at a time, and each new holder first lets every callback already waiting run.

    Why: a run's event loop is CPU bound at high concurrency, and asyncio runs ready callbacks in order. A
    freed slot's next request, or a reply being read, used to wait behind every trace that was rendering or
    storing at that moment (tens of milliseconds a call at 64 in flight); through the lane it waits behind
    at most one. ``LimitedProvider`` gives the turn up while its caller waits on the network.
    """

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._owner: asyncio.Task[Any] | None = None

    async def enter(self) -> None:
        await self._lock.acquire()
        self._owner = asyncio.current_task()
        try:
            await asyncio.sleep(0)  # what became ready before this turn runs first
        except BaseException:
            self.leave()
            raise

    def leave(self) -> bool:
        """Give the turn up if the current task holds it; whether it did."""
        if self._owner is None or self._owner is not asyncio.current_task():
            return False
        self._owner = None
        self._lock.release()
        return True


class LimitedProvider:
    """The run's provider behind its limits. Attributes other than ``complete`` are the wrapped provider's.

    ``cost_of(usage) -> float | None`` prices a reply, ``estimate_cost(input_tokens, output_tokens)`` a
    call about to start (both None/absent when the model has no price: no budget then).
    """

    def __init__(
        self,
        inner: Any,
        *,
        concurrency: int,
        limiter: RateLimiter | None = None,
        budget: Budget | None = None,
        estimate_cost: Callable[[int, int], float] | None = None,
        cost_of: Callable[[Any], float | None] | None = None,
        lane: CpuLane | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self._inner = inner
        self.lane = lane
        self._slots = asyncio.Semaphore(concurrency)
        self.concurrency = concurrency
        self.limiter = limiter or RateLimiter()
        self.budget = budget
        self._estimate_cost = estimate_cost
        self._cost_of = cost_of
        self.stats = CallStats()
        self.stop_reason: str | None = None
        if isinstance(inner, TransportObservable):
            inner.observe_transport(self)

    def __getattr__(self, name: str) -> Any:
        # Only called for attributes this wrapper lacks: name, model, sampling, base_url, output_mode...
        if name.startswith("__") or name == "_inner":  # copy/pickle probe before __init__ ran
            raise AttributeError(name)
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return f"LimitedProvider({self._inner!r}, concurrency={self.concurrency})"

    @property
    def inner(self) -> Any:
        return self._inner

    def stop(self, reason: str) -> None:
        """Start no more calls (calls in flight finish)."""
        if self.stop_reason is None:
            self.stop_reason = reason

    async def complete(self, request: Any) -> Any:
        # A call waits on the network, not on the CPU: the caller's turn in the lane is given up meanwhile.
        lane = self.lane
        if lane is None or not lane.leave():
            return await self._complete(request)
        try:
            return await self._complete(request)
        finally:
            await lane.enter()

    async def _complete(self, request: Any) -> Any:
        async with self._slots:
            if self.stop_reason is not None:
                raise RunStoppedError()
            est_in = estimate_tokens(request_chars(request))
            est_out = self.stats.expected_output(request.max_tokens)
            reservation = 0.0
            if self.budget is not None and self._estimate_cost is not None:
                try:
                    reservation = self.budget.reserve(self._estimate_cost(est_in, est_out))
                except BudgetExhaustedError as exc:
                    self.stop(str(exc))
                    raise
            try:
                permit = await self.limiter.acquire(est_in + est_out if self.limiter.tpm else 0)
            except BaseException:
                if self.budget is not None:
                    self.budget.settle(reservation, None)
                raise
            stats = self.stats
            stats.in_flight += 1
            stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
            token = _ADMITTED.set(True)
            try:
                reply = await self._inner.complete(request)
            except BaseException as exc:
                stats.failed_calls += 1
                stats.errors[getattr(exc, "kind", type(exc).__name__)] += 1
                if self.budget is not None:
                    self.budget.settle(reservation, None)
                raise
            finally:
                _ADMITTED.reset(token)
                stats.in_flight -= 1
            usage = reply.usage
            self.limiter.settle(permit, usage.input_tokens + usage.output_tokens)
            stats.calls += 1
            stats.output_tokens += usage.output_tokens
            stats.transport_retries += reply.transport_retries
            if self.budget is not None:
                self.budget.settle(reservation, self._cost_of(usage) if self._cost_of else None)
            return reply

    # -- transport observer (called by the SDK adapters for every HTTP attempt and response) --
    async def on_request(self, retry_count: int) -> None:
        self.stats.http_attempts += 1
        if retry_count == 0 and _ADMITTED.get():
            _ADMITTED.set(False)  # the call's first attempt: complete() admitted it
            return
        await self.limiter.acquire_retry()

    def on_response(self, status: int, retry_after: float | None) -> None:
        if status in _SLOW_DOWN or (status == 503 and retry_after is not None):
            self.stats.rate_limited += 1
            self.limiter.pause(retry_after)
