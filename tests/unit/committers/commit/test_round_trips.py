"""The helpers that let a job commit send independent requests together (gather, caught,
prefetch, the conflict listings by prefix), on the in-memory store."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from zerorename.committers.paths import Destination
from zerorename.committers.store import (
    LIST_CONCURRENCY,
    caught,
    first_foreign_in,
    gather,
    nothing,
    prefetch,
)
from zerorename.testing.memstore import MemoryState, MemoryStore

JOB = "6f1c2b9e-8a4d-4c57-9a0e-3b2f1d0c9e8a"
DEST = Destination.parse("s3://bkt/t")


async def test_gather_runs_steps_together_and_raises_the_first_error_by_position() -> None:
    order: list[str] = []

    async def step(name: str, delay: float, fail: bool = False) -> str:
        await anyio.sleep(delay)
        order.append(name)
        if fail:
            raise ValueError(name)
        return name

    assert await gather(step("a", 0.02), step("b", 0), nothing()) == ["a", "b", None]
    assert order == ["b", "a"]  # together, not one after the other
    order.clear()
    with pytest.raises(ValueError, match=r"^slow$"):  # not the one that failed first
        await gather(step("slow", 0.02, fail=True), step("fast", 0, fail=True))
    assert sorted(order) == ["fast", "slow"]  # both ran to their end
    bad = await caught(step("c", 0, fail=True))
    assert isinstance(bad.error, ValueError) and bad.value is None
    with pytest.raises(ValueError):
        bad.get()
    assert (await caught(step("d", 0))).get() == "d"


async def test_prefetch_reads_ahead_bounded_and_reports_a_read_error_after_its_items() -> None:
    pulled: list[int] = []

    async def listing(fail_at: int | None) -> AsyncIterator[int]:
        for i in range(10):
            if i == fail_at:
                raise RuntimeError("listing failed")
            pulled.append(i)
            yield i

    async with prefetch(listing(None), buffer=3) as items:
        await anyio.sleep(0.01)  # the block's own work: the listing reads meanwhile
        assert 3 <= len(pulled) <= 4  # read ahead, but no more than the buffer (+1 held)
        assert [i async for i in items] == list(range(10))
    pulled.clear()
    got: list[int] = []
    with pytest.raises(RuntimeError, match="listing failed"):
        async with prefetch(listing(4)) as items:
            async for i in items:
                got.append(i)
    assert got == [0, 1, 2, 3]
    async with prefetch(listing(None), buffer=2):
        pass  # a block that does not read: the listing stops with it


async def test_conflict_listing_by_prefix_in_order_and_stops_early() -> None:
    state = MemoryState("bkt")
    store = MemoryStore(state)
    prefixes = [f"t/p={i:03}/" for i in range(100)]
    for i, prefix in enumerate(prefixes):
        await store.put_object("bkt", prefix + f"mine-{JOB}.csv", b"ours")
        if i % 10 == 3:
            await store.put_object("bkt", prefix + "old.csv", b"theirs")
    store.latency = 0.001
    start = len(store.log)
    found = await first_foreign_in(store, DEST, prefixes, JOB, limit=3)
    assert found == ["t/p=003/old.csv", "t/p=013/old.csv", "t/p=023/old.csv"]
    lists = [r for r in store.log[start:] if r.op == "ListObjectsV2"]
    assert len(lists) <= 24 + LIST_CONCURRENCY  # not all 100: it stops once 3 are found
    assert await first_foreign_in(store, DEST, prefixes[:3], JOB) == []
