"""zerorename.aio: exception-group unwrapping and sync-or-async iteration."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zerorename.aio import aiter_any, batches, first_error, unwrapped


def test_first_error_is_the_first_real_failure_noting_the_others() -> None:
    first, second = ValueError("first"), ValueError("second")
    group = ExceptionGroup("parts", [ExceptionGroup("inner", [first]), second])
    assert first_error(group) is first
    assert first_error(group) is first  # the note is added once
    assert first.__notes__ == ["(1 more task(s) failed at the same time)"]
    alone = ValueError("alone")
    assert first_error(ExceptionGroup("one", [alone])) is alone
    assert not hasattr(alone, "__notes__")
    assert first_error(alone) is alone


def test_first_error_prefers_a_failure_over_cancellations() -> None:
    err = KeyError("k")
    group = BaseExceptionGroup("g", [asyncio.CancelledError(), ExceptionGroup("i", [err])])
    assert first_error(group) is err
    assert not hasattr(err, "__notes__")
    cancel = asyncio.CancelledError()
    assert first_error(BaseExceptionGroup("c", [cancel, asyncio.CancelledError()])) is cancel


def test_first_error_never_hides_an_interrupt() -> None:
    group = BaseExceptionGroup("x", [ValueError(), BaseExceptionGroup("y", [KeyboardInterrupt()])])
    assert first_error(group) is group


def test_unwrapped_raises_the_leaf_from_a_task_group() -> None:
    async def fail() -> None:
        raise LookupError("boom")

    async def main() -> None:
        async with unwrapped(), anyio.create_task_group() as tg:
            tg.start_soon(fail)
            await anyio.sleep(10)

    with pytest.raises(LookupError, match="boom"):
        anyio.run(main)


def test_aiter_any_reads_sync_and_async_sources() -> None:
    async def agen() -> AsyncIterator[int]:
        for i in range(3):
            yield i

    async def collect() -> tuple[list[int], list[int], list[int]]:
        a = [x async for x in aiter_any(agen())]
        b = [x async for x in aiter_any([0, 1, 2])]
        c = [x async for x in aiter_any(iter(range(3)))]
        return a, b, c

    assert anyio.run(collect) == ([0, 1, 2], [0, 1, 2], [0, 1, 2])


@given(st.lists(st.integers(), max_size=50), st.integers(min_value=1, max_value=7))
def test_batches_keep_order_and_size(items: list[int], size: int) -> None:
    async def collect() -> list[list[int]]:
        return [b async for b in batches(iter(items), size)]

    got = asyncio.run(collect())
    assert [x for b in got for x in b] == items
    assert all(1 <= len(b) <= size for b in got)
    assert all(len(b) == size for b in got[:-1])
