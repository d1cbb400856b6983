"""A caller's records are values the job commit sends in its own rounds (issue 21, "hooks
become data"): written with the journal before the first complete, with ``succeeded``
after the last (a body made from the commit's figures when it is sent), keys deleted
with the journal; a record whose write fails fails the commit as the journal's write
there would. On the in-memory store, no server."""

from __future__ import annotations

import pytest

from zerorename.committers import JobCommitError, MagicCommitter, TaskCommitSummary
from zerorename.committers.commit.result import CommitProgress, CommitRecords, RecordWrite
from zerorename.committers.context import CommitOptions
from zerorename.engine.errors import ConfigError
from zerorename.testing.memstore import MemoryState, MemoryStore

B = "bkt"
URI = f"s3://{B}/out"
OPTS = CommitOptions(write_success=False, rollback_on_failure=False)


async def committed_tasks(
    store: MemoryStore,
) -> tuple[MagicCommitter, str, list[TaskCommitSummary]]:
    committer = MagicCommitter(store, URI, conflict="append", options=OPTS)
    job = await committer.setup_job()
    summaries = []
    for t in range(2):
        ta = job.task_attempt(t)
        await ta.setup()
        async with ta.open(f"part-{t}.csv") as out:
            await out.write(b"x" * (t + 3))
        summaries.append(await ta.commit())
    return committer, job.job_id, summaries


def completed(state: MemoryState) -> int:
    return sum(k.startswith("out/part-") for k in state.objects(B))


async def test_the_commit_sends_the_records_in_its_rounds() -> None:
    state = MemoryState(B)
    store = MemoryStore(state)
    committer, job_id, summaries = await committed_tasks(store)
    await store.put_object(B, "out/_notes/gone.json", b"{}")
    seen: list[CommitProgress] = []

    def final(p: CommitProgress) -> bytes:
        seen.append(p)
        # every complete was answered before this record is made and sent
        assert completed(state) == 2
        return f"{p.uploads_total} {p.bytes_total}".encode()

    records = CommitRecords(
        with_journal=(RecordWrite("out/_notes/intent.json", b"intent"),),
        with_succeeded=(RecordWrite("out/_notes/done.txt", final, "text/plain"),),
        release_also=("out/_notes/gone.json",),
    )
    result = await committer.job(job_id).commit(summaries, records=records)
    objects = state.objects(B)
    assert (result.files, result.bytes) == (2, 7)
    assert objects["out/_notes/intent.json"] == b"intent"
    assert objects["out/_notes/done.txt"] == b"2 7" and len(seen) == 1
    assert "out/_notes/gone.json" not in objects


async def test_a_record_the_store_refuses_fails_the_commit_before_any_complete() -> None:
    state = MemoryState(B)
    store = MemoryStore(state)
    committer, job_id, summaries = await committed_tasks(store)
    too_long = "out/_notes/" + "k" * 1100  # a key S3 refuses
    records = CommitRecords(with_journal=(RecordWrite(too_long, b"intent"),))
    with pytest.raises(JobCommitError) as info:
        await committer.job(job_id).commit(summaries, records=records)
    assert isinstance(info.value.__cause__, ConfigError)
    assert "1024" in str(info.value) or "long" in str(info.value)
    assert completed(state) == 0
