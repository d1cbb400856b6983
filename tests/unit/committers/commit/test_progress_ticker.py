"""The job commit's progress ticker (jobresult.ProgressTicker): it reports while its block
runs, stops with it, and lets every exception out as it was (its exit never swallows one,
which is what lets JobCommitRun._run return from inside it)."""

from __future__ import annotations

import anyio
import pytest

from zerorename.committers.commit.result import ProgressTicker


async def test_it_reports_while_the_block_runs_and_stops_with_it() -> None:
    calls: list[int] = []

    async def report() -> None:
        calls.append(len(calls))

    async def run() -> str:
        async with ProgressTicker(report, 3600):
            await anyio.lowlevel.checkpoint()  # the ticker's first report runs here
            return "done"

    assert await run() == "done"
    assert calls == [0]
    for _ in range(3):
        await anyio.lowlevel.checkpoint()
    assert calls == [0]  # cancelled with the block


async def test_an_error_leaves_it_as_itself_not_in_a_group() -> None:
    async def report() -> None:
        pass

    with pytest.raises(ValueError, match="stopped"):
        async with ProgressTicker(report, 3600):
            await anyio.lowlevel.checkpoint()
            raise ValueError("stopped")


async def test_a_failing_report_fails_the_block() -> None:
    async def report() -> None:
        raise OSError("report broke")

    with pytest.raises(OSError, match="report broke"):
        async with ProgressTicker(report, 3600):
            await anyio.sleep(3600)
