"""The gate that the engine's batches (``complete_many``, which the job commit feeds its
records through) pull records under: one holder at a time, a newcomer takes an open gate
at once even while others wait (no convoy), and a waiter cancelled after its wake-up
passes the wake-up on."""

from __future__ import annotations

import asyncio

from zerorename.engine.ops.completion import _Gate


async def test_one_holder_at_a_time() -> None:
    gate = _Gate()
    inside = 0
    most = 0

    async def user(i: int) -> None:
        nonlocal inside, most
        for _ in range(5):
            async with gate:
                inside += 1
                most = max(most, inside)
                await asyncio.sleep(0.001 * (i % 3))
                inside -= 1

    await asyncio.gather(*(user(i) for i in range(12)))
    assert most == 1 and inside == 0


async def test_a_newcomer_takes_an_open_gate_while_others_wait() -> None:
    gate = _Gate()
    order: list[str] = []

    async def waiter(name: str) -> None:
        async with gate:
            order.append(name)

    await gate.__aenter__()
    waiters = [asyncio.ensure_future(waiter(f"w{i}")) for i in range(3)]
    await asyncio.sleep(0)  # all three wait now
    await gate.__aexit__(None, None, None)
    # the woken waiter has not run yet: a newcomer enters without waiting behind it (an
    # asyncio.Lock would make it wait for the three)
    await gate.__aenter__()
    assert order == []
    order.append("newcomer")
    await gate.__aexit__(None, None, None)
    await asyncio.wait_for(asyncio.gather(*waiters), 2)
    assert order[0] == "newcomer" and sorted(order[1:]) == ["w0", "w1", "w2"]


async def test_a_cancelled_waiter_passes_its_wake_up_on() -> None:
    gate = _Gate()
    got: list[str] = []

    async def waiter(name: str) -> None:
        async with gate:
            got.append(name)

    await gate.__aenter__()
    first = asyncio.ensure_future(waiter("first"))
    second = asyncio.ensure_future(waiter("second"))
    await asyncio.sleep(0)
    await gate.__aexit__(None, None, None)  # wakes "first"...
    first.cancel()  # ...which is cancelled before it runs
    await asyncio.wait_for(second, 2)  # "second" still gets the gate
    assert got == ["second"] and first.cancelled()
    async with gate:  # and the gate is open again
        pass
