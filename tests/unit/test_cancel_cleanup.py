"""A cancel that lands inside a clean-up does not cut it short (zerorename.aio.to_the_end).

Ctrl-C reaches a CLI command as asyncio's own ``Task.cancel()`` of its main task
(``asyncio.Runner``), and a portal's caller that gives up cancels the same way. anyio's
shielded scopes do not stop that kind of cancel: an abort or a rollback that was running
when it came stopped at its next request, leaving uploads pending that nothing would
abort. Here the in-memory store's gate cancels the running task at the first request of the
clean-up; the clean-up must still end as it would have, and the task then ends cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from zerorename.aio import to_the_end
from zerorename.cli.dirupload import upload_directory
from zerorename.committers import CommitOptions, MagicCommitter
from zerorename.engine.errors import AccessDenied
from zerorename.testing.memfaults import Fault
from zerorename.testing.memstore import MemoryState, MemoryStore

B = "bkt"


# -- the helper alone ------------------------------------------------------------------
async def test_a_cancelled_waiter_lets_the_step_finish_then_is_cancelled() -> None:
    done: list[str] = []
    release = asyncio.Event()

    async def step() -> str:
        await release.wait()
        await asyncio.sleep(0)
        done.append("step")
        return "result"

    waiter = asyncio.ensure_future(to_the_end(step()))
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.sleep(0)
    waiter.cancel()  # a second cancel does not stop it either
    await asyncio.sleep(0)
    assert not waiter.done()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert done == ["step"]


async def test_a_step_that_fails_after_the_cancel_ends_as_cancelled() -> None:
    release = asyncio.Event()

    async def step() -> None:
        await release.wait()
        raise OSError("the clean-up's request failed")

    waiter = asyncio.ensure_future(to_the_end(step()))
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.sleep(0)
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await waiter


async def test_without_a_cancel_the_steps_result_or_error_passes_through() -> None:
    async def ok() -> int:
        await asyncio.sleep(0)
        return 7

    async def bad() -> int:
        await asyncio.sleep(0)
        raise OSError("no")

    assert await to_the_end(ok()) == 7
    with pytest.raises(OSError, match="no"):
        await to_the_end(bad())


# -- the clean-ups that use it, on the in-memory store -----------------------------------
def cancel_at(op: str) -> tuple[Callable[[str, str, str], Awaitable[Fault | None]], list[Any]]:
    """A gate that cancels the task in ``box[0]`` when the store first sees ``op``."""
    box: list[Any] = []

    async def gate(operation: str, bucket: str, key: str) -> Fault | None:
        if operation == op and box and not box[0].done() and len(box) == 1:
            box[0].cancel()
            box.append(operation)
        return None

    return gate, box


async def run_cancelled(store: MemoryStore, op: str, work: Awaitable[Any]) -> None:
    gate, box = cancel_at(op)
    store.gate = gate
    task = asyncio.ensure_future(work)
    box.append(task)
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(box) == 2, f"the store never saw {op}: the clean-up did not run"
    store.gate = None


async def test_a_directory_upload_cancelled_in_its_abort_leaves_nothing_pending(
    tmp_path: Path,
) -> None:
    for i in range(12):
        (tmp_path / f"f{i}").write_bytes(b"z" * (i + 1))
    store = MemoryStore(MemoryState(B))
    store.fail_at(8, OSError("connection reset"), op="UploadPart")
    # the job's abort starts by listing the job's uploads: Ctrl-C lands there
    await run_cancelled(
        store, "ListMultipartUploads", upload_directory(store, tmp_path, f"s3://{B}/up")
    )
    assert [u async for u in store.list_uploads(B, "")] == []
    assert [o.key async for o in store.list_objects(B, "")] == []


async def test_a_task_commit_cancelled_in_its_abort_leaves_nothing_pending(
    tmp_path: Path,
) -> None:
    store = MemoryStore(MemoryState(B))
    committer = MagicCommitter(
        store, f"s3://{B}/out", conflict="fail", options=CommitOptions(staging_dir=tmp_path)
    )
    job = await committer.setup_job()
    ta = job.task_attempt(0)
    await ta.setup()
    for name in ("a.csv", "b.csv", "c.csv"):
        async with ta.open(name) as out:
            await out.write(name.encode())
    assert len([u async for u in store.list_uploads(B, "")]) == 3
    # the attempt's pendingset cannot be written: the commit fails and aborts its uploads
    store.fail_at(1, AccessDenied("denied", code="AccessDenied"), op="PutObject")
    await run_cancelled(store, "AbortMultipartUpload", ta.commit())
    assert [u async for u in store.list_uploads(B, "")] == []


async def test_a_job_commit_cancelled_in_its_rollback_rolls_back_whole(
    tmp_path: Path,
) -> None:
    store = MemoryStore(MemoryState(B))
    committer = MagicCommitter(
        store, f"s3://{B}/out", conflict="append", options=CommitOptions(staging_dir=tmp_path)
    )
    job = await committer.setup_job()
    summaries = []
    for t in range(3):
        ta = job.task_attempt(t)
        await ta.setup()
        async with ta.open(f"part-{t}.csv") as out:
            await out.write(b"x" * (t + 1))
        summaries.append(await ta.commit())
    # the second complete is refused: the commit rolls back (the first file is deleted,
    # the others aborted); Ctrl-C lands at the rollback's first request
    store.fail_at(2, AccessDenied("denied", code="AccessDenied"), op="CompleteMultipartUpload")
    await run_cancelled(store, "AbortMultipartUpload", job.commit(summaries))
    assert [u async for u in store.list_uploads(B, "")] == []
    data = [o.key async for o in store.list_objects(B, "out/") if o.key.endswith(".csv")]
    assert data == []
