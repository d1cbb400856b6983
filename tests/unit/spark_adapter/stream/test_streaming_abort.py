"""A stream batch's job rolled back by an operator (`zerorename jobs abort`, or the
committers' ``abort()`` it runs) while its intent is still in the query's log: Spark's
next run of the batch writes it again; it is never "adopted" with none of its files
(issue 20, finding 1). On the in-memory store, the driver dying at every complete."""

from __future__ import annotations

import pytest

from unit.spark_adapter.stream.test_streaming_sink import (
    DEST,
    URI,
    B,
    Q,
    check_clean,
    commit_batch,
    crashing,
    data_of,
    expected,
    log_of,
    run_tasks,
    sink,
)
from zerorename.committers import Destination, MagicCommitter
from zerorename.committers.errors import CommitterError, JournalError
from zerorename.spark_adapter.stream.jobs import stream_job_action
from zerorename.spark_adapter.stream.log import (
    KEEP,
    MAX_LOG_BYTES,
    BatchEntry,
    InLog,
    Intent,
    StreamLog,
    in_log,
    parse_log,
)
from zerorename.testing.memstore import MemoryState, MemoryStore

DEST_ = Destination.parse(URI)
NOBODY = "00000000-0000-4000-8000-000000000000"


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


async def died_at_a_complete(n: int = 1) -> tuple[MemoryState, MemoryStore, str]:
    """Batch 0 committed; batch 1's driver died at its ``n``-th complete (the intent and
    the journal stored)."""
    state = MemoryState(B)
    store = MemoryStore(state)
    await commit_batch(store, 0, "t0")
    job_id, results = await run_tasks(store, 1, "t1")
    store.crash_at(n, op="CompleteMultipartUpload", after=True)
    await crashing(sink(store).commit(1, job_id, results))
    return state, store.reopen(), job_id


async def test_jobs_abort_of_a_stream_job_drops_its_intent_and_the_batch_is_written_again() -> None:
    state, store, job_id = await died_at_a_complete()
    shown = await stream_job_action(store, DEST_, job_id, "show")
    assert shown is not None and shown.show is not None
    assert (shown.show["query"], shown.show["batch"], shown.show["inLog"]) == (Q, 1, "intent")
    reply = await stream_job_action(store, DEST_, job_id, "abort")
    assert reply is not None and any("writes it again" in line for line in reply.lines)
    assert log_of(state)["pending"] is None and log_of(state)["last_batch"] == 0
    assert data_of(state) == expected(range(1))
    assert not any(job_id in k for k in state.objects(B))  # records and note gone
    assert await commit_batch(store.reopen(), 1, "rerun") == "committed"
    assert data_of(state) == expected(range(2))
    check_clean(state)


@pytest.mark.parametrize("n", [1, 2])
async def test_jobs_resume_of_a_stream_job_records_the_batch_and_writes_no_success(n: int) -> None:
    state, store, job_id = await died_at_a_complete(n)
    reply = await stream_job_action(store, DEST_, job_id, "resume")
    assert reply is not None and any("finds it committed" in line for line in reply.lines)
    assert f"{DEST}/_SUCCESS" not in state.objects(B)
    lg = log_of(state)
    assert (lg["last_batch"], lg["pending"]) == (1, None)
    assert data_of(state) == expected(range(2))
    check_clean(state)
    assert await commit_batch(store.reopen(), 1, "rerun") == "duplicate"
    assert data_of(state) == expected(range(2))


async def test_jobs_resume_dying_before_its_log_write_is_finished_by_the_next_run() -> None:
    """The operator's resume dies at the log's write (the journal still there): Spark's
    next run resumes the job itself; the batch once."""
    state, store, job_id = await died_at_a_complete()
    store.crash_at(1, op="PutObject")
    await crashing(stream_job_action(store, DEST_, job_id, "resume"))
    assert await commit_batch(store.reopen(), 1, "rerun") == "adopted"
    await commit_batch(store.reopen(), 2, "t2")
    assert data_of(state) == expected(range(3))
    check_clean(state)


async def test_a_committed_stream_job_is_never_aborted() -> None:
    """The driver died in the release: the log records the batch, the job's records stay."""
    state = MemoryState(B)
    store = MemoryStore(state)
    job_id, results = await run_tasks(store, 0, "t0")
    store.crash_at(1, op="DeleteObjects")
    await crashing(sink(store).commit(0, job_id, results))
    store = store.reopen()
    before = dict(state.objects(B))
    with pytest.raises(CommitterError, match=r"records it as committed.*jobs resume"):
        await stream_job_action(store, DEST_, job_id, "abort")
    assert state.objects(B) == before
    reply = await stream_job_action(store, DEST_, job_id, "resume")
    assert reply is not None and "committed already" in reply.lines[0]
    assert data_of(state) == expected(range(1))
    check_clean(state)


async def test_a_run_the_log_does_not_name_is_not_resumed() -> None:
    state = MemoryState(B)
    store = MemoryStore(state)
    await commit_batch(store, 0, "t0")
    job_id, _ = await run_tasks(store, 1, "never-committed")
    before = dict(state.objects(B))
    with pytest.raises(CommitterError, match=r"does not name it.*jobs abort"):
        await stream_job_action(store, DEST_, job_id, "resume")
    assert state.objects(B) == before
    await stream_job_action(store, DEST_, job_id, "abort")
    assert data_of(state) == expected(range(1))
    check_clean(state)
    assert (
        await stream_job_action(store, DEST_, "0" * 8 + "-0000-4000-8000-" + "0" * 12, "show")
        is None
    )


async def test_the_intent_does_not_grow_with_the_tasks() -> None:
    """Issue 20: the intent listed every accepted pendingset, so a batch of ~30,000 tasks
    wrote a log over its 4 MiB cap, which no later commit could read. It now holds the job
    and counts only (the journal and plan list the pendingsets)."""
    state, _, job_id = await died_at_a_complete()
    pending = log_of(state)["pending"]
    assert pending["job_id"] == job_id and pending["pendingsets"] == []
    assert pending["files"] == 2


def test_a_full_log_with_an_intent_stays_far_below_its_cap() -> None:
    lg = StreamLog(Q)
    for b in range(KEEP + 5):
        lg = lg.with_commit(BatchEntry(b, NOBODY, 10**9, 10**12, 10**15, 1.8e9))
    big = lg.with_intent(Intent(KEEP + 5, NOBODY, (), 10**9, 10**12, 10**15))
    data = big.to_json()
    assert len(data) < MAX_LOG_BYTES // 100
    assert parse_log(data, query_id=Q, where="log.json", pendingset_prefix="p/{job}/") == big


def test_where_the_log_has_a_job() -> None:
    """A committed batch whose entry left the log's window: which job committed it is no
    longer known, so its job is never aborted (OLD), unlike a duplicate run of a batch the
    window shows committed by another job (SUPERSEDED)."""
    lg = StreamLog(Q)
    for b in range(KEEP + 5):
        lg = lg.with_commit(BatchEntry(b, NOBODY, 1, 1, 1, 1.0))
    other = "11111111-0000-4000-8000-000000000000"
    assert in_log(lg, NOBODY, 3) is InLog.COMMITTED
    assert in_log(lg, other, 3) is InLog.OLD
    assert in_log(lg, other, KEEP + 4) is InLog.SUPERSEDED
    assert in_log(lg, other, KEEP + 5) is InLog.ABSENT
    assert in_log(lg, other, None) is InLog.ABSENT
    pending = lg.with_intent(Intent(KEEP + 5, other, (), 1, 1, 1))
    assert in_log(pending, other, KEEP + 5) is InLog.INTENT
