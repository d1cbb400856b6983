"""The virtual rounds of zerorename.testing.rounds: requests sent together are one round,
requests sent one after another are as many rounds as requests, whatever runs between
them (a worker thread, a loaded machine)."""

from __future__ import annotations

import anyio
import anyio.to_thread

from zerorename.servers.requestlog import sequential_requests
from zerorename.testing.memstore import MemoryState, MemoryStore
from zerorename.testing.rounds import rounds

B = "bkt"


async def test_requests_sent_together_are_one_round_and_a_chain_counts_each() -> None:
    state = MemoryState(B)
    store = MemoryStore(state)
    async with rounds(store) as r:
        async with anyio.create_task_group() as tg:  # 5 together: one round
            for i in range(5):
                tg.start_soon(store.put_object, B, f"k{i}", b"x")
        for i in range(3):  # then 3 one after another, a thread's work between them
            await anyio.to_thread.run_sync(sum, range(10_000))
            await store.head_object(B, f"k{i}")
    assert r.now == 4
    assert sequential_requests(store.log) == 4
    assert [(q.start, q.end) for q in store.log[:5]] == [(0.0, 1.0)] * 5


async def test_a_request_sent_while_another_is_in_flight_overlaps_it() -> None:
    """A second task sends while the first request is in flight: both start in the same
    round (the first's end does not precede the second's start)."""
    state = MemoryState(B)
    store = MemoryStore(state)

    async def later() -> None:
        await anyio.lowlevel.checkpoint()  # sent a moment after the first, not after it ends
        await store.put_object(B, "b", b"y")

    async with rounds(store), anyio.create_task_group() as tg:
        tg.start_soon(store.put_object, B, "a", b"x")
        tg.start_soon(later)
    assert sequential_requests(store.log) == 1
    assert store.gate is None and store.delay is None  # restored after the block
