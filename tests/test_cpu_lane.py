"""The CPU lane of a run: one trace at a time does CPU work, each turn starts after what was already
waiting, and a trace waiting on the network gives its turn up."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from seqjudge.limits import CpuLane, LimitedProvider


async def test_one_holder_at_a_time_in_arrival_order() -> None:
    lane = CpuLane()
    inside: list[str] = []
    log: list[str] = []

    async def work(name: str) -> None:
        await lane.enter()
        try:
            inside.append(name)
            assert len(inside) == 1, inside
            log.append(name)
            await asyncio.sleep(0.001)  # even across an await nobody else gets in
            inside.remove(name)
        finally:
            lane.leave()

    await asyncio.gather(*(work(str(i)) for i in range(6)))
    assert log == [str(i) for i in range(6)]


async def test_a_turn_starts_after_what_was_already_ready() -> None:
    lane = CpuLane()
    order: list[str] = []
    loop = asyncio.get_running_loop()

    async def waiter() -> None:
        await lane.enter()
        order.append("cpu")
        lane.leave()

    await lane.enter()
    task = asyncio.create_task(waiter())
    await asyncio.sleep(0)  # the waiter queues for the lane
    lane.leave()  # its wake-up is scheduled now...
    loop.call_soon(order.append, "network")  # ...and then a freed slot's next request becomes ready
    await task
    assert order == ["network", "cpu"]  # without the lane's yield the waiter would have run first


async def test_leave_is_only_for_the_holder() -> None:
    lane = CpuLane()
    assert lane.leave() is False  # nobody holds it
    await lane.enter()

    async def other() -> bool:
        return lane.leave()

    assert await asyncio.create_task(other()) is False
    assert lane.leave() is True
    assert lane.leave() is False


class Slow:
    name = "slow"
    model = "m"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    async def complete(self, request: Any) -> Any:
        await asyncio.sleep(0.01)
        if self.fail:
            raise RuntimeError("boom")
        return type(
            "Reply",
            (),
            {"usage": type("U", (), {"input_tokens": 1, "output_tokens": 1})(), "transport_retries": 0},
        )()


class Req:
    max_tokens = 10
    system = static_prompt = dynamic_prompt = ""
    reask: list[Any] = []


@pytest.mark.parametrize("fail", [False, True])
async def test_a_call_gives_the_turn_up_and_takes_it_back(fail: bool) -> None:
    lane = CpuLane()
    gate = LimitedProvider(Slow(fail), concurrency=4, lane=lane)
    ran_while_waiting: list[bool] = []

    async def caller() -> None:
        await lane.enter()
        try:
            if fail:
                with pytest.raises(RuntimeError):
                    await gate.complete(Req())
            else:
                await gate.complete(Req())
            assert lane._owner is asyncio.current_task()  # held again after the call, even when it failed
        finally:
            assert lane.leave()

    async def other() -> None:
        await asyncio.sleep(0.002)
        await lane.enter()  # gets in while the caller waits on the network
        ran_while_waiting.append(True)
        lane.leave()

    await asyncio.gather(caller(), other())
    assert ran_while_waiting == [True]


async def test_a_gate_without_a_lane_or_a_caller_outside_it_just_calls() -> None:
    lane = CpuLane()
    gate = LimitedProvider(Slow(), concurrency=1, lane=lane)
    await gate.complete(Req())  # not holding the lane: nothing to give up
    assert lane._owner is None
