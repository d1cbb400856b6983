"""A protocol's round trips counted without a clock.

Against a remote store a commit costs its chain of dependent requests times the round trip
(:mod:`~zerorename.servers.requestlog`). Measuring that chain with a real latency per
request needs requests sent together to overlap far beyond the event loop's jitter, and a
loaded machine's jitter has no bound: a test that reads the clock can chain two requests
that were sent together. :func:`rounds` makes the latency virtual instead.

Rules (every request of a :class:`~zerorename.testing.memstore.MemoryStore` handle):
1. A request waits at the gate until every task is parked: nothing ready to run on the
   loop and no worker thread busy (:func:`settle`).
2. Then every request waiting at the gate starts, all at the current round ``now``.
3. Once every task is parked again and no request waits at the gate, ``now`` moves on by
   one and every request in flight ends at it: each took exactly one round.
4. A request sent by code that an ended request woke starts at that same ``now``, so it
   chains after it; requests sent together start and end together and never chain.

The request log then holds start and end in rounds, and
:func:`~zerorename.servers.requestlog.sequential_requests` is the number of rounds: the
same count on a quiet machine and on a loaded one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

if TYPE_CHECKING:
    from zerorename.testing.memfaults import Fault
    from zerorename.testing.memstore import MemoryStore


async def settle() -> None:
    """Return once every other task is parked: nothing ready on the loop, no thread busy
    (three passes in a row find nothing to run). While a worker thread is busy the caller
    pauses on the real clock, not the loop's: a loop whose clock is virtual
    (:mod:`zerorename.sim.clock`) moves it only when every task is parked."""
    loop = asyncio.get_running_loop()
    limiter = anyio.to_thread.current_default_thread_limiter()
    quiet = 0
    while quiet < 3:
        await asyncio.sleep(0)
        ready = len(getattr(loop, "_ready", ()))
        if limiter.borrowed_tokens:
            quiet = 0
            time.sleep(0.0002)  # noqa: ASYNC251 - the thread's time, whatever the loop's clock
        elif ready:
            quiet = 0
        else:
            quiet += 1


class Rounds:
    """Virtual time for one or more store handles: :meth:`gate`, :meth:`delay` and
    :meth:`clock` are what :func:`rounds` installs on them; :meth:`drive` moves time."""

    def __init__(self) -> None:
        self.now = 0
        self._arrived: list[asyncio.Future[None]] = []
        self._in_flight: list[asyncio.Future[None]] = []

    def clock(self) -> float:
        return float(self.now)

    async def gate(self, op: str, bucket: str, key: str) -> Fault | None:
        await self._park(self._arrived)
        return None

    async def delay(self) -> None:
        await self._park(self._in_flight)

    @staticmethod
    async def _park(queue: list[asyncio.Future[None]]) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue.append(fut)
        try:
            await fut
        finally:  # cancelled (a sibling request failed): no longer waiting
            if fut in queue:
                queue.remove(fut)

    @staticmethod
    def _release(queue: list[asyncio.Future[None]]) -> None:
        batch = list(queue)
        queue.clear()
        for fut in batch:
            if not fut.done():
                fut.set_result(None)

    async def drive(self) -> None:
        """Start what arrived, else end what is in flight one round later; forever (the
        caller cancels it when the code under test is done)."""
        while True:
            await settle()
            if self._arrived:
                self._release(self._arrived)
            elif self._in_flight:
                self.now += 1
                self._release(self._in_flight)
            else:  # nothing parked here: a task sleeps on a timer, or all is done
                await asyncio.sleep(0.001)


@asynccontextmanager
async def rounds(*stores: MemoryStore) -> AsyncIterator[Rounds]:
    """Run the block with every request of ``stores`` taking one virtual round; the
    stores' gate, delay and clock are restored after it."""
    r = Rounds()
    saved = [(s.gate, s.delay, s.clock) for s in stores]
    for s in stores:
        s.gate, s.delay, s.clock = r.gate, r.delay, r.clock
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(r.drive)
            try:
                yield r
            finally:
                tg.cancel_scope.cancel()
    finally:
        for s, (gate, delay, clock) in zip(stores, saved, strict=True):
            s.gate, s.delay, s.clock = gate, delay, clock


__all__ = ["Rounds", "rounds", "settle"]
