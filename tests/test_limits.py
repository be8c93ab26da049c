"""The run's limits on a fake clock: requests and tokens per minute, the shared pause after a 429, the budget,
the concurrency cap, and how the adapters report their HTTP traffic."""

from __future__ import annotations

import asyncio
import math
import random
from bisect import bisect_left
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqjudge.errors import ProviderError
from seqjudge.judge.cache import request_key
from seqjudge.judge.providers.base import JudgeRequest, ProviderReply, Usage, retry_after_seconds
from seqjudge.judge.providers.scripted import ScriptedProvider
from seqjudge.limits import (
    Budget,
    BudgetExhaustedError,
    LimitedProvider,
    RateLimiter,
    RunStoppedError,
    SlidingWindow,
    default_limits,
    estimate_tokens,
)


class FakeClock:
    """Virtual time: ``sleep`` moves the clock instead of waiting. Only monotonicity matters to the
    limiter's guarantee, so any interleaving of sleepers is a valid schedule."""

    def __init__(self) -> None:
        self.t = 0.0
        self.slept: list[float] = []

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds
        await asyncio.sleep(0)


def max_in_window(times: list[float], window: float, weights: list[int] | None = None) -> int:
    """The most starts (or weight) in any half-open window [a, a + window): a densest window can always be
    moved to begin at a start, so checking those windows covers all of them."""
    order = sorted(range(len(times)), key=lambda i: times[i])
    ts = [times[i] for i in order]
    ws = [weights[i] if weights else 1 for i in order]
    best = 0
    for i, start in enumerate(ts):
        j = bisect_left(ts, start + window)
        best = max(best, sum(ws[i:j]))
    return best


async def start_all(
    limiter: RateLimiter, clock: FakeClock, arrivals: list[float], tokens: list[int] | None = None
) -> list[float]:
    """Requests arriving at ``arrivals`` (gaps between them), each acquiring as soon as it arrives."""
    tasks = []
    for n, gap in enumerate(arrivals):
        clock.t += gap
        tasks.append(asyncio.create_task(limiter.acquire(tokens[n] if tokens else 0)))
        await asyncio.sleep(0)
    permits = await asyncio.gather(*tasks)
    return [p.at for p in permits]


# -- requests per minute -----------------------------------------------------------------------------------
async def test_the_rpm_plus_first_start_waits_exactly_a_window() -> None:
    clock = FakeClock()
    limiter = RateLimiter(rpm=3, clock=clock, smooth=False)
    starts = await start_all(limiter, clock, [0, 0, 0, 0, 0])
    assert starts == [0, 0, 0, 60, 60]  # a burst of the whole minute's budget, then the window slides
    assert max_in_window(starts, 60) == 3


async def test_a_start_just_inside_the_window_still_waits() -> None:
    clock = FakeClock()
    limiter = RateLimiter(rpm=1, clock=clock)
    starts = await start_all(limiter, clock, [0, 59.9])
    assert starts == [0, 60]


async def test_smoothing_spreads_the_minute_over_its_seconds() -> None:
    clock = FakeClock()
    limiter = RateLimiter(rpm=120, clock=clock)  # 2 a second at most
    starts = await start_all(limiter, clock, [0] * 10)
    assert max_in_window(starts, 1.0) == 2
    assert starts[-1] == pytest.approx(4.0)


# Gaps between arrivals: anything, and especially the edges where an off-by-a-little window would slip.
GAPS = st.one_of(
    st.floats(min_value=0, max_value=30, allow_nan=False),
    st.sampled_from([0.0, 0.0, 0.001, 0.5, 0.999, 1.0, 1.001, 59.5, 59.999, 60.0, 60.001]),
)


@settings(max_examples=200, deadline=None)
@given(
    rpm=st.integers(min_value=1, max_value=40),
    smooth=st.booleans(),
    gaps=st.lists(GAPS, min_size=1, max_size=150),
    pauses=st.lists(st.tuples(st.integers(0, 149), st.floats(0, 10, allow_nan=False)), max_size=5),
)
def test_no_60_second_window_ever_holds_more_than_rpm_starts(
    rpm: int, smooth: bool, gaps: list[float], pauses: list[tuple[int, float]]
) -> None:
    """The guarantee of the sliding-window log, on random arrival schedules with random 429 pauses."""

    async def scenario() -> list[float]:
        clock = FakeClock()
        limiter = RateLimiter(rpm=rpm, clock=clock, smooth=smooth)
        tasks = []
        pause_at = dict(pauses)
        for n, gap in enumerate(gaps):
            clock.t += gap
            if n in pause_at:
                limiter.pause(pause_at[n])
            tasks.append(asyncio.create_task(limiter.acquire()))
            await asyncio.sleep(0)
        return [p.at for p in await asyncio.gather(*tasks)]

    starts = asyncio.run(scenario())
    assert len(starts) == len(gaps)
    assert max_in_window(starts, 60.0) <= rpm
    if smooth and rpm > 1:
        assert max_in_window(starts, 1.0) <= math.ceil(rpm / 60)


async def test_a_token_bucket_would_not_do_and_the_log_does() -> None:
    # The case a bucket of size rpm gets wrong: a full burst at t=0, then steady refill. The log holds the
    # rest back until the first burst has left the window.
    clock = FakeClock()
    limiter = RateLimiter(rpm=10, clock=clock, smooth=False)
    starts = await start_all(limiter, clock, [0] * 10 + [6] * 10)
    assert max_in_window(starts, 60.0) == 10
    assert min(starts[10:]) >= 60.0


# -- tokens per minute -------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(
    tpm=st.integers(min_value=100, max_value=5_000),
    calls=st.lists(
        st.tuples(st.floats(0, 20, allow_nan=False), st.integers(1, 100)), min_size=1, max_size=80
    ),
)
def test_tokens_in_any_window_stay_under_tpm_when_estimates_are_exact(
    tpm: int, calls: list[tuple[float, int]]
) -> None:
    async def scenario() -> list[float]:
        clock = FakeClock()
        limiter = RateLimiter(tpm=tpm, clock=clock)
        return await start_all(limiter, clock, [g for g, _ in calls], [t for _, t in calls])

    starts = asyncio.run(scenario())
    assert max_in_window(starts, 60.0, [t for _, t in calls]) <= tpm


async def test_the_reply_usage_replaces_the_estimate() -> None:
    clock = FakeClock()
    limiter = RateLimiter(tpm=1_000, clock=clock)
    first = await limiter.acquire(900)
    limiter.settle(first, 100)  # the reply used far fewer tokens than reserved
    second = await limiter.acquire(800)
    assert second.at == 0.0  # fits at once: 100 + 800 <= 1,000
    third = await limiter.acquire(800)
    assert third.at == 60.0  # now it has to wait for the window to empty


async def test_a_call_bigger_than_the_whole_budget_goes_alone() -> None:
    clock = FakeClock()
    limiter = RateLimiter(tpm=100, clock=clock)
    a = await limiter.acquire(50)
    b = await limiter.acquire(500)
    c = await limiter.acquire(10)
    assert (a.at, b.at, c.at) == (0.0, 60.0, 120.0)


def test_window_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        SlidingWindow(0)
    with pytest.raises(ValueError):
        RateLimiter(rpm=-1)


# -- the shared pause --------------------------------------------------------------------------------------
async def test_a_pause_holds_every_new_start_until_it_ends() -> None:
    clock = FakeClock()
    limiter = RateLimiter(clock=clock)  # no rate limit at all: only the pause
    assert limiter.unlimited
    await limiter.acquire()
    clock.t = 10.0
    limiter.pause(2.5)
    starts = await start_all(limiter, clock, [0, 0.5, 0.5])
    assert all(s >= 12.5 for s in starts)
    assert limiter.pauses == 1


async def test_a_pause_without_retry_after_is_a_second_and_long_ones_are_capped() -> None:
    clock = FakeClock()
    limiter = RateLimiter(clock=clock, max_pause=120.0)
    limiter.pause(None)
    assert limiter.paused_until == 1.0
    limiter.pause(10_000)
    assert limiter.paused_until == 120.0
    limiter.pause(0.1)  # a shorter pause never shortens a longer one
    assert limiter.paused_until == 120.0


async def test_admission_is_first_come_first_served() -> None:
    clock = FakeClock()
    limiter = RateLimiter(rpm=1, clock=clock, smooth=False)
    order: list[int] = []

    async def one(n: int) -> None:
        await limiter.acquire()
        order.append(n)

    await asyncio.gather(*(one(n) for n in range(5)))
    assert order == [0, 1, 2, 3, 4]


# -- the budget --------------------------------------------------------------------------------------------
def test_budget_reserves_then_settles_and_refuses_past_the_limit() -> None:
    budget = Budget(1.0)
    r1 = budget.reserve(0.4)
    r2 = budget.reserve(0.4)
    with pytest.raises(BudgetExhaustedError) as err:
        budget.reserve(0.4)  # 0.8 reserved + 0.4 > 1.0
    assert err.value.kind == "budget" and "--max-cost" in str(err.value)
    budget.settle(r1, 0.1)  # cheaper than feared
    budget.settle(r2, None)  # failed: nothing charged
    assert budget.spent == pytest.approx(0.1) and budget.reserved == pytest.approx(0.0)
    budget.reserve(0.9)


# -- the provider behind the limits ------------------------------------------------------------------------
REQUEST = JudgeRequest(
    system="s" * 40, static_prompt="x" * 400, dynamic_prompt="y" * 160, schema={}, schema_name="judgement"
)


class SlowProvider:
    """Counts how many calls are inside ``complete`` at once."""

    name = "slow"
    model = "slow-1"

    def __init__(self, delay: float = 0.01, output_tokens: int = 7) -> None:
        self.delay = delay
        self.output_tokens = output_tokens
        self.inside = 0
        self.most = 0
        self.calls = 0

    async def complete(self, request: JudgeRequest) -> ProviderReply:
        self.inside += 1
        self.most = max(self.most, self.inside)
        self.calls += 1
        await asyncio.sleep(self.delay)
        self.inside -= 1
        return ProviderReply(
            text="{}",
            model=self.model,
            finish_reason="stop",
            usage=Usage(input_tokens=150, output_tokens=self.output_tokens),
            transport_retries=1,
        )


async def test_at_most_concurrency_calls_in_flight() -> None:
    inner = SlowProvider()
    gate = LimitedProvider(inner, concurrency=3)
    await asyncio.gather(*(gate.complete(REQUEST) for _ in range(20)))
    assert inner.most == 3 and inner.calls == 20
    assert gate.stats.max_in_flight == 3 and gate.stats.calls == 20
    assert gate.stats.transport_retries == 20 and gate.stats.output_tokens == 140
    assert gate.stats.expected_output(4096) == 7  # the run's average reply, for the next reservation


def test_the_wrapper_keeps_the_wrapped_providers_identity_and_cache_keys() -> None:
    inner = ScriptedProvider([], model="m-1")
    gate = LimitedProvider(inner, concurrency=2)
    assert gate.name == "scripted" and gate.model == "m-1"
    assert request_key(gate, REQUEST) == request_key(inner, REQUEST)


async def test_the_budget_stops_the_wrapper_and_nothing_more_starts() -> None:
    inner = SlowProvider()
    budget = Budget(0.05)
    gate = LimitedProvider(
        inner,
        concurrency=1,
        budget=budget,
        estimate_cost=lambda i, o: (i + o) / 10_000,  # 150 + 1,000 tokens: 0.115 > 0.05 at once
        cost_of=lambda usage: 0.0,
    )
    with pytest.raises(BudgetExhaustedError):
        await gate.complete(REQUEST)
    assert gate.stop_reason and "--max-cost" in gate.stop_reason
    with pytest.raises(RunStoppedError):
        await gate.complete(REQUEST)
    assert inner.calls == 0 and budget.reserved == 0.0


async def test_spent_is_the_replies_cost_and_failures_cost_nothing() -> None:
    class Failing(SlowProvider):
        async def complete(self, request: JudgeRequest) -> ProviderReply:
            raise ProviderError("down", kind="server")

    budget = Budget(100.0)
    gate = LimitedProvider(
        SlowProvider(), concurrency=2, budget=budget, estimate_cost=lambda i, o: 1.0, cost_of=lambda u: 0.25
    )
    await asyncio.gather(*(gate.complete(REQUEST) for _ in range(4)))
    assert budget.spent == pytest.approx(1.0) and budget.reserved == pytest.approx(0.0)
    failing = LimitedProvider(
        Failing(), concurrency=2, budget=budget, estimate_cost=lambda i, o: 1.0, cost_of=lambda u: 0.25
    )
    with pytest.raises(ProviderError):
        await failing.complete(REQUEST)
    assert budget.spent == pytest.approx(1.0) and budget.reserved == pytest.approx(0.0)
    assert failing.stats.failed_calls == 1 and failing.stats.errors == {"server": 1}


async def test_transport_retries_take_an_rpm_slot_and_the_first_attempt_does_not_twice() -> None:
    clock = FakeClock()
    limiter = RateLimiter(rpm=2, clock=clock, smooth=False)

    class Retrying(SlowProvider):
        """Plays the SDK: asks the observer before each of two HTTP attempts."""

        observer: LimitedProvider

        def observe_transport(self, observer: LimitedProvider) -> None:
            self.observer = observer

        async def complete(self, request: JudgeRequest) -> ProviderReply:
            await self.observer.on_request(0)
            self.observer.on_response(500, None)
            await self.observer.on_request(1)
            return await super().complete(request)

    gate = LimitedProvider(Retrying(delay=0), concurrency=1, limiter=limiter)
    await gate.complete(REQUEST)  # the call (t=0) and its retry (t=0): the minute's 2 requests
    assert limiter.starts == 2 and gate.stats.http_attempts == 2
    await gate.complete(REQUEST)
    assert clock.t == pytest.approx(60.0)  # the next call had to wait for the window


async def test_a_429_pauses_the_limiter_through_the_observer() -> None:
    clock = FakeClock()
    limiter = RateLimiter(clock=clock)
    gate = LimitedProvider(SlowProvider(), concurrency=1, limiter=limiter)
    gate.on_response(200, None)
    gate.on_response(503, None)  # a 503 without Retry-After is an ordinary server error
    assert limiter.pauses == 0
    gate.on_response(429, 3.0)
    gate.on_response(529, None)
    assert limiter.pauses == 2 and limiter.paused_until == 3.0
    assert gate.stats.rate_limited == 2


def test_retry_after_headers() -> None:
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({"retry-after": "1.5"}) == 1.5
    assert retry_after_seconds({"retry-after-ms": "x", "retry-after": "2"}) == 2.0
    soon = datetime.now(UTC) + timedelta(seconds=30)
    assert 25 < retry_after_seconds({"retry-after": format_datetime(soon, usegmt=True)}) <= 30  # type: ignore[operator]
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_defaults_and_estimates() -> None:
    assert default_limits("openai") == (5_000, 450_000)
    assert default_limits("anthropic")[0] == 1_000
    assert default_limits("scripted") == (0, 0)
    assert estimate_tokens(0) == 0 and estimate_tokens(1) == 1 and estimate_tokens(400) == 100


def test_random_schedules_under_both_limits_are_all_admitted() -> None:
    """Liveness: whatever the limits, every request starts eventually (no deadlock, no starvation)."""
    rng = random.Random(7)

    async def scenario() -> tuple[int, float]:
        clock = FakeClock()
        limiter = RateLimiter(rpm=30, tpm=3_000, clock=clock)
        sizes = [rng.randint(1, 400) for _ in range(200)]
        starts = await start_all(limiter, clock, [rng.uniform(0, 1) for _ in sizes], sizes)
        return len(starts), max(starts)

    n, last = asyncio.run(scenario())
    assert n == 200 and last < 60 * 60
