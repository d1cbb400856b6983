"""Attacks on a stream batch's records as values (helper attack5; db6ea4a: CommitRecords
and RecordWrite carry the intent, the log entry and the note's delete in the job commit's
own rounds). On the in-memory store: a crash at every request of a batch commit and of a
resume, the state the dead process leaves checked before anything recovers it (the log
names a batch at most once, and only once its files are all complete); a failure or a lost
answer at each record PUT; a body function that raises; a resume after a crash between
the journal's ``succeeded`` and the log's write; two drivers of one query."""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from typing import Any

import pytest

from unit.committers.test_commit_records import OPTS, URI, committed_tasks, completed
from unit.spark_adapter.stream.test_attack4 import before, journal_of, log_key, resume
from unit.spark_adapter.stream.test_streaming_sink import (
    NO_WAIT,
    B,
    Q,
    check_clean,
    commit_batch,
    crashing,
    data_of,
    expected,
    run_tasks,
    sink,
)
from unit.spark_adapter.stream.test_streaming_sink import (
    URI as SURI,
)
from zerorename.committers import MagicCommitter
from zerorename.committers.commit.result import CommitProgress, CommitRecords, RecordWrite
from zerorename.engine.errors import RetriesExhausted
from zerorename.spark_adapter.options import WriteOptions
from zerorename.spark_adapter.stream.sink import StreamSink
from zerorename.testing.memstate import MemoryState
from zerorename.testing.memstore import MemoryStore


def logged(state: MemoryState) -> list[int]:
    """The batches the stream log names as committed (none when it has no log yet)."""
    data = state.objects(B).get(log_key())
    if data is None:
        return []
    return [e["batch"] for e in json.loads(data)["recent"]]


def named_only_whole(state: MemoryState, batches: int) -> None:
    """The log names each batch at most once, and a batch only when all its files are
    visible (batches ``0..batches-1`` were committed cleanly before)."""
    names = logged(state)
    assert all(n == 1 for n in Counter(names).values()), names
    have = data_of(state)
    for b in set(names):
        assert all(have[k] >= 1 for k in expected(range(b, b + 1))), (b, names)


async def batch1_setup() -> tuple[MemoryState, MemoryStore, str, Any]:
    state = MemoryState(B)
    store = MemoryStore(state)
    await commit_batch(store, 0, "t0")
    job_id, results = await run_tasks(store, 1, "t1")
    return state, store, job_id, results


async def recovered(state: MemoryState, store: MemoryStore) -> None:
    """The restarted query runs batch 1 again, then batch 2: both land once, nothing of
    any job is left."""
    assert await commit_batch(store.reopen(), 1, "rerun") in ("committed", "adopted", "duplicate")
    assert await commit_batch(store.reopen(), 2, "t2") == "committed"
    assert data_of(state) == expected(range(3))
    assert logged(state) == [0, 1, 2]
    check_clean(state)


async def commit_requests() -> int:
    _, store, job_id, results = await batch1_setup()
    n = store.requests
    assert (await sink(store).commit(1, job_id, results)).action == "committed"
    return store.requests - n


async def test_a_driver_dead_at_any_request_leaves_the_log_naming_the_batch_only_whole() -> None:
    total = await commit_requests()
    for n in range(1, total + 1):
        for after in (False, True):
            state, store, job_id, results = await batch1_setup()
            store.crash_at(n, after=after)
            await crashing(sink(store).commit(1, job_id, results))
            named_only_whole(state, 1)
            await recovered(state, store)


# -- the records' PUTs fail, or their answers are lost ----------------------------------


def at_log_put(store: MemoryStore, which: int, after: bool) -> list[int]:
    """The ``which``-th PUT of the log (1: the intent with the journal, 2: the batch's
    entry with ``succeeded``) fails past the retry budget (``after``: it took effect and
    its answer was lost)."""
    seen: list[int] = []

    async def gate(op: str, bucket: str, key: str) -> None:
        if op == "PutObject" and key == log_key():
            seen.append(1)
            if len(seen) == which:
                store.fail_at(
                    1, RetriesExhausted("500 past the budget", code="InternalError"), after=after
                )

    store.gate = gate  # type: ignore[assignment]
    return seen


@pytest.mark.parametrize("after", [False, True])
@pytest.mark.parametrize("which", [1, 2])
async def test_a_failed_or_lost_log_put_then_the_rerun_lands_the_batch_once(
    which: int, after: bool
) -> None:
    state, store, job_id, results = await batch1_setup()
    seen = at_log_put(store, which, after)
    with contextlib.suppress(Exception):
        await sink(store).commit(1, job_id, results)
    store.gate = None
    assert len(seen) >= which
    named_only_whole(state, 1)
    await recovered(state, store)


# -- the body function raises -----------------------------------------------------------


class BodyBroke(Exception):
    pass


def broken(p: CommitProgress) -> bytes:
    raise BodyBroke("the caller's body function failed")


@pytest.mark.parametrize("where", ["with_journal", "with_succeeded"])
async def test_a_body_function_that_raises_fails_the_commit_and_a_resume_finishes(
    where: str,
) -> None:
    """With the journal: nothing was completed, nothing of the record sent, and an abort
    leaves nothing. With ``succeeded``: every upload was completed; a resume (no records)
    finishes the job. Either way nothing is pending and no record of the job is left."""
    state = MemoryState(B)
    store = MemoryStore(state)
    committer, job_id, summaries = await committed_tasks(store)
    rec = (RecordWrite("out/_notes/r.json", broken),)
    records = CommitRecords(**{where: rec})  # type: ignore[arg-type]
    with pytest.raises(Exception) as info:
        await committer.job(job_id).commit(summaries, records=records)
    chain = [info.value, info.value.__cause__, info.value.__context__]
    assert any(isinstance(e, BodyBroke) for e in chain), info.value
    assert "out/_notes/r.json" not in state.objects(B)
    job = MagicCommitter(store.reopen(), URI, options=OPTS).job(job_id)
    if where == "with_journal":
        # as a round-2 write that failed: its journal is kept (no rollback asked for),
        # nothing completed, no plan: the operator's abort leaves nothing
        assert completed(state) == 0
        await job.abort()
        assert completed(state) == 0
    else:
        assert completed(state) == 2
        res = await job.resume()
        assert res.files == 2 and completed(state) == 2
    assert state.pending(B) == []
    assert [k for k in state.objects(B) if "__magic" in k] == []


# -- a crash between the journal's succeeded and the log's write -------------------------


async def died_before_the_log_entry() -> tuple[MemoryState, MemoryStore, str]:
    """Batch 1's driver dies at the log's second PUT, sent with the journal's
    ``succeeded``: the journal says succeeded, the log still holds the intent."""
    state, store, job_id, results = await batch1_setup()
    puts: list[int] = []

    async def gate(op: str, bucket: str, key: str) -> None:
        if op == "PutObject" and key == log_key():
            puts.append(1)
            if len(puts) == 2:
                store.crash_at(1)

    store.gate = gate  # type: ignore[assignment]
    await crashing(sink(store).commit(1, job_id, results))
    assert json.loads(state.objects(B)[journal_of(job_id)])["state"] == "succeeded"
    assert logged(state) == [0]
    assert data_of(state) == expected(range(2))
    return state, store, job_id


async def test_jobs_resume_after_a_death_before_the_log_entry_records_the_batch() -> None:
    state, store, job_id = await died_before_the_log_entry()
    out = await resume(state, job_id)
    assert not isinstance(out, BaseException), out
    assert logged(state) == [0, 1]
    await recovered(state, store)


async def test_jobs_resume_dying_at_any_request_after_a_death_before_the_log_entry() -> None:
    base, _, job_id = await died_before_the_log_entry()
    probe = MemoryStore(base.copy())
    await resume(probe.state, job_id, probe)
    total = probe.requests
    assert total >= 2
    for n in range(1, total + 1):
        for after in (False, True):
            state = base.copy()
            store = MemoryStore(state)
            store.crash_at(n, after=after)
            await crashing(resume(state, job_id, store))
            named_only_whole(state, 1)
            # the operator runs the command again (it deletes the dead run's claim)
            again = await resume(state, job_id)
            assert not isinstance(again, BaseException), (n, after, again)
            named_only_whole(state, 1)
            await recovered(state, store)


# -- two drivers of one query ------------------------------------------------------------


def no_wait_sink(store: MemoryStore) -> Any:
    """The other driver's sink: it does not wait for a held lock (its wait would be on
    the first driver, paused in the gate that runs it)."""
    committer = MagicCommitter(store, SURI, conflict="append", options=NO_WAIT)
    return StreamSink(WriteOptions(path=SURI), Q, committer)


async def two_drivers(n: int) -> tuple[MemoryState, MemoryStore, str, list[str]]:
    """Another driver of the query (its own run of batch 1, its own job) commits whole
    before the ``n``-th request of the first driver's commit of batch 1."""
    state, store, job_id, results = await batch1_setup()
    other = store.reopen()
    other_job, other_results = await run_tasks(other, 1, "other driver")
    outcomes: list[str] = []

    async def second() -> None:
        try:
            outcomes.append((await no_wait_sink(other).commit(1, other_job, other_results)).action)
        except Exception as exc:
            outcomes.append(type(exc).__name__)

    store.gate = before(n, second)
    try:
        outcomes.append((await sink(store).commit(1, job_id, results)).action)
    except Exception as exc:
        outcomes.append(type(exc).__name__)
    store.gate = None
    if not outcomes:
        await second()
    return state, store, job_id, outcomes


async def test_a_second_driver_committing_the_batch_before_each_request_of_the_first() -> None:
    """Whatever early request of the first driver the second one's whole commit lands before,
    batch 1's files are there once and the log names it at most once and only whole."""
    # up to the first driver's round 2 (the 8th request and later: the second driver's
    # settle waits for the first one's lock while the first waits in this test's gate, a
    # deadlock of the test's own making, not analysed further)
    for n in range(1, 8):
        state, _, _, outcomes = await two_drivers(n)
        assert len(outcomes) == 2
        named_only_whole(state, 1)
        assert data_of(state) == expected(range(2)), (n, outcomes)


@pytest.mark.xfail(
    strict=True,
    reason="defect left (older than this session: the intent's PUT was as unconditional "
    "in the closure it replaced): the stream log is written blindly, so a driver whose "
    "commit read the log before another driver of the query committed the batch whole "
    "overwrites that commit's entry with its own intent (a lost update); its commit then "
    "fails, the next batch is refused, and after the operator's abort of its job the "
    "rerun lands the batch a second time. A fix needs the log written If-Match the ETag "
    "it was read with (the engine's put_object has only If-None-Match)",
)
async def test_a_second_driver_committing_before_the_firsts_intent_keeps_its_entry() -> None:
    from zerorename.spark_adapter.stream.jobs import stream_job_action

    state, store, job_id, outcomes = await two_drivers(2)
    assert outcomes[0] == "committed"  # the second driver's commit, whole
    assert data_of(state) == expected(range(2))
    op = store.reopen()
    if logged(state) != [0, 1]:  # the entry is lost: the operator aborts the stuck job
        await stream_job_action(op, sink(op).dest, job_id, "abort")
    await commit_batch(store.reopen(), 1, "rerun")
    assert data_of(state) == expected(range(2))  # batch 1 once
    assert logged(state) == [0, 1]
