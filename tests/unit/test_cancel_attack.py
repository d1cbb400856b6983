"""Adversarial checks of zerorename.aio.to_the_end: a clean-up that runs to its end through
a cancel must not hide how it ended, and must end when the loop ends."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from zerorename.aio import to_the_end


async def test_a_clean_up_that_fails_while_interrupted_is_not_silently_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Ctrl-C lands in a rollback whose own request then fails: the interrupt ends the
    # caller, but what the rollback left undone must still be said somewhere
    release = asyncio.Event()

    async def rollback() -> None:
        await release.wait()
        raise OSError("abort of upload u1 refused: run `zerorename jobs abort`")

    waiter = asyncio.ensure_future(to_the_end(rollback()))
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.sleep(0)
    release.set()
    with (
        caplog.at_level(logging.INFO, logger="zerorename.aio"),
        pytest.raises(asyncio.CancelledError),
    ):
        await waiter
    assert "abort of upload u1 refused" in caplog.text


async def test_a_cancel_after_the_step_ended_still_returns_nothing_lost() -> None:
    # the step finished, then the cancel arrives before the waiter resumes: the step's
    # effect happened once, the caller ends cancelled
    done: list[int] = []

    async def step() -> int:
        done.append(1)
        return 1

    waiter = asyncio.ensure_future(to_the_end(step()))
    await asyncio.sleep(0)  # waiter is waiting; the step runs to its end here
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert done == [1]


def test_the_loops_end_cancels_a_step_that_stalls() -> None:
    # a second Ctrl-C ends asyncio.Runner's loop: a stalled clean-up must not keep the
    # process alive (the loop's end cancels it; the step sees the cancel)
    seen: list[str] = []

    async def stall() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def main() -> None:
        task = asyncio.ensure_future(to_the_end(stall()))
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.sleep(0)
        raise KeyboardInterrupt  # as Runner's second SIGINT does, out of the loop

    with pytest.raises(KeyboardInterrupt), asyncio.Runner() as runner:
        runner.run(main())
    assert seen == ["cancelled"]


def test_a_portal_caller_giving_up_leaves_the_clean_up_running_to_its_end() -> None:
    # the caller's future is cancelled (what LoopPortal.run does on a timeout or an
    # interrupt): the clean-up goes on in the loop thread and ends as it would have
    from zerorename.portal import LoopPortal

    portal = LoopPortal(name="attack-loop")
    started, ended = threading.Event(), threading.Event()
    box: list[asyncio.Event] = []

    async def clean_up() -> None:
        box.append(asyncio.Event())
        started.set()
        await box[0].wait()
        ended.set()

    try:
        fut = portal.start(to_the_end(clean_up()))
        assert started.wait(30)
        fut.cancel()
        portal.call_soon(box[0].set)
        assert ended.wait(30)  # an upper bound only: it ends as soon as it is let go
        assert fut.cancelled()
    finally:
        portal.close()
