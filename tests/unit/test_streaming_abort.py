"""A stream batch's job rolled back by an operator (`zerorename jobs abort`, or the
committers' ``abort()`` it runs) while its intent is still in the query's log: Spark's
next run of the batch writes it again; it is never "adopted" with none of its files
(issue 20, finding 1). On the in-memory store, the driver dying at every complete."""

from __future__ import annotations

import pytest
from test_streaming_sink import (
    URI,
    B,
    check_clean,
    commit_batch,
    crashing,
    data_of,
    expected,
    log_of,
    run_tasks,
    sink,
)

from zerorename.committers import MagicCommitter
from zerorename.committers.errors import JournalError
from zerorename.testing.memstore import MemoryState, MemoryStore


async def completes_in_commit() -> int:
    """How many CompleteMultipartUpload requests batch 1's commit sends."""
    state = MemoryState(B)
    store = MemoryStore(state)
    await commit_batch(store, 0, "t0")
    job_id, results = await run_tasks(store, 1, "t1")
    start = len(store.log)
    await sink(store).commit(1, job_id, results)
    return sum(1 for r in store.log[start:] if r.op == "CompleteMultipartUpload")


@pytest.mark.parametrize("after", [False, True], ids=["before-effect", "after-effect"])
async def test_a_batch_aborted_by_the_operator_is_written_again(after: bool) -> None:
    total = await completes_in_commit()
    assert total >= 2
    for n in range(1, total + 1):
        state = MemoryState(B)
        store = MemoryStore(state)
        await commit_batch(store, 0, "t0")
        job_id, results = await run_tasks(store, 1, "t1")
        store.crash_at(n, op="CompleteMultipartUpload", after=after)
        await crashing(sink(store).commit(1, job_id, results))
        assert log_of(state)["pending"]["job_id"] == job_id
        # the operator rolls the job back (what `zerorename jobs abort` runs)
        try:
            await MagicCommitter(store.reopen(), URI).job(job_id).abort()
        except JournalError:  # every file was complete: abort refuses, changes nothing
            pytest.fail(f"complete {n}: abort refused a job that completed part of a batch")
        assert data_of(state) == expected(range(1)), n
        # Spark runs batch 1 again: it is written, not adopted with none of its files
        assert await commit_batch(store.reopen(), 1, "rerun") == "committed", n
        await commit_batch(store.reopen(), 2, "t2")
        assert data_of(state) == expected(range(3)), n
        check_clean(state)
        assert [e["batch"] for e in log_of(state)["recent"]] == [0, 1, 2]
