"""gc_paused: the collector is off while a trace is built, on again after, and a huge build is handed to the
oldest generation instead of being scanned by the next young collections."""

from __future__ import annotations

import gc
import weakref

from seqjudge import trace as trace_module
from seqjudge.trace import gc_paused


class Node:
    pass


def test_collector_off_inside_and_restored_after() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off before: stays off
    finally:
        gc.enable()


def test_a_huge_build_leaves_the_young_generation_empty_and_stays_collectable() -> None:
    with gc_paused():
        built = [[i] for i in range(trace_module._LARGE_YOUNG + 50_000)]
        cycle = Node()
        cycle.self = cycle  # type: ignore[attr-defined]
        ref = weakref.ref(cycle)
        del cycle
    assert gc.get_count()[0] < 1_000  # nothing left for the next young collection to scan
    assert len(built) == trace_module._LARGE_YOUNG + 50_000 and built[-1] == [
        trace_module._LARGE_YOUNG + 49_999
    ]
    assert ref() is not None  # garbage in a cycle waits for a full collection...
    gc.collect()
    assert ref() is None  # ...and is collected by it


def test_a_small_build_is_left_to_the_collector() -> None:
    gc.collect()
    with gc_paused():
        kept = [[i] for i in range(1_000)]
    assert gc.get_count()[0] >= 1_000  # still young: the normal schedule applies
    assert len(kept) == 1_000
