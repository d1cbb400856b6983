"""Adversarial review of Hadoop 3.3 S3A jobs (``dest/__magic/job-<id>/``) on the in-memory
store: a crash at each request of abort and resume, then a second run finishing it; a
concurrent 3.3 job writing into the shared ``__magic/`` while an abort lists and deletes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

# the 3.3 layout and its three jobs, as the 3.3 layout's own tests lay them out
from unit.committers.s3a.test_s3a_layout33_memory import (
    DEST,
    JOB,
    MAGIC,
    NEW,
    OTHER,
    B,
    lay33,
    of,
    three_jobs,
)
from zerorename.committers import CommitOptions, MagicCommitter
from zerorename.committers.codec.success import SuccessData
from zerorename.committers.commit.journal import Journal
from zerorename.committers.commit.storage import success_names_commit
from zerorename.committers.errors import JobNotFound
from zerorename.committers.paths import Destination
from zerorename.committers.s3a.jobs import abort_s3a_job, job_committed, resume_s3a_job
from zerorename.testing.memfaults import Fault
from zerorename.testing.memstate import MemoryState
from zerorename.testing.memstore import MemoryStore


async def _requests(action: str) -> int:
    state = await three_jobs()
    store = MemoryStore(state)
    await (abort_s3a_job if action == "abort" else resume_s3a_job)(store, DEST, JOB)
    return store.requests


@pytest.mark.parametrize("action", ["abort", "resume"])
async def test_a_crash_at_any_request_then_a_second_run_finishes_it(action: str) -> None:
    run = abort_s3a_job if action == "abort" else resume_s3a_job
    total = await _requests(action)
    for n in range(1, total + 1):
        for after in (False, True):
            state = await three_jobs()
            others = of(state, OTHER), of(state, NEW)
            store = MemoryStore(state)
            store.crash_at(n, after=after)
            with pytest.raises(BaseException) as info:
                await run(store, DEST, JOB)
            assert store.crashed, info.value
            gone = not [k for k in of(state, JOB)[0] if k.startswith(MAGIC)]
            try:
                await run(MemoryStore(state), DEST, JOB)
            except JobNotFound:
                assert gone, f"crash at request {n} (after={after}): refused with records left"
            objs, ups = of(state, JOB)
            where = f"crash at request {n} (after={after})"
            assert ups == [], where
            assert not [k for k in objs if k.startswith(MAGIC)], where
            if action == "resume":
                assert len([k for k in objs if k.endswith(".csv")]) == 4, where
                assert json.loads(state.objects(B)["s3a/out/_SUCCESS"])["jobId"] == JOB, where
            assert (of(state, OTHER), of(state, NEW)) == others, where
            assert MAGIC in state.objects(B), where  # OTHER still lives in it


async def test_an_abort_beside_a_33_job_that_writes_meanwhile_keeps_its_records() -> None:
    state = await three_jobs()
    store = MemoryStore(state)
    # delete every other 3.3 job's records first: JOB's abort is then the last job, and
    # OTHER (a re-run) starts writing while the abort lists and deletes
    await abort_s3a_job(MemoryStore(state), DEST, OTHER)
    writer = MemoryStore(state)
    late = f"{lay33(OTHER).root}tasks/attempt_1_0000_m_000009_0/__base/p.csv.pending"
    wrote: list[str] = []

    async def gate(op: str, bucket: str, key: str) -> Fault | None:
        if op in ("ListObjectsV2", "DeleteObjects") and not wrote:
            wrote.append(op)
            await writer.put_object(B, late, b"{}")
        return None

    store.gate = gate
    await abort_s3a_job(store, DEST, JOB)
    assert wrote and late in state.objects(B)
    assert not [k for k in of(state, JOB)[0] if k.startswith(MAGIC)]


# -- a _SUCCESS naming the job that is not this commit's -------------------------------------
async def _run(store: MemoryStore, tmp_path: Path, job_id: str, names: list[str]) -> Any:
    committer = MagicCommitter(
        store, f"s3://{B}/z", conflict="append", options=CommitOptions(staging_dir=tmp_path)
    )
    job = await committer.setup_job(job_id)
    summaries = []
    for t, name in enumerate(names):
        ta = job.task_attempt(t)
        await ta.setup()
        async with ta.open(name) as out:
            await out.write(name.encode())
        summaries.append(await ta.commit())
    return committer, job, summaries


async def test_a_stale_success_of_an_earlier_run_of_the_id_does_not_block_the_abort(
    tmp_path: Path,
) -> None:
    # run 1 of job id J committed (its _SUCCESS names J); J is set up again (a re-run with
    # the same id) and its commit dies after its first complete: the journal says
    # completing. That old _SUCCESS is no proof that this commit finished: abort rolls
    # the re-run back instead of refusing it as committed
    state = MemoryState(B)
    rid = "0b5f3f5e-9a3c-4c2e-8d41-7f0c2f6a1b11"
    _, job1, sums1 = await _run(MemoryStore(state), tmp_path / "1", rid, ["a.csv"])
    await job1.commit(sums1)
    store = MemoryStore(state)
    _, job2, sums2 = await _run(store, tmp_path / "2", rid, ["b.csv", "c.csv"])
    store.crash_at(1, op="CompleteMultipartUpload", after=True)
    with pytest.raises(BaseException):  # noqa: B017 - the crash, however it is wrapped
        await job2.commit(sums2)
    assert [k for k in state.objects(B) if k.startswith(("z/b-", "z/c-"))]  # one complete
    # nor may a resume take an abort's command claim over on that proof
    assert not await job_committed(MemoryStore(state), Destination.parse(f"s3://{B}/z"), rid)
    reopened = await MagicCommitter(MemoryStore(state), f"s3://{B}/z").open_job(rid)
    await reopened.abort()
    data = sorted(k for k in state.objects(B) if k.endswith(".csv"))
    assert data == [f"z/a-{rid}.csv"]  # run 1's file stays, nothing of the re-run is visible
    assert state.pending(B) == []


def test_a_success_is_judged_by_the_id_alone_where_nothing_more_can_be_read() -> None:
    dest = Destination.parse(f"s3://{B}/z")
    rid = "0b5f3f5e-9a3c-4c2e-8d41-7f0c2f6a1b11"
    j = Journal(job_id=rid, filenames=["b.csv"])
    assert not success_names_commit(b'{"jobId": "other"}', dest, rid, j)
    assert success_names_commit(f'not json "{rid}"'.encode(), dest, rid, j)  # refuse, not delete
    assert success_names_commit(f'{{"jobId": "{rid}"}}'.encode(), dest, rid, None)
    for names in (["/z/b.csv"], ["b.csv"]):  # as this commit writes it, or zerorename 0.1
        data = SuccessData(job_id=rid, committer="magic", filenames=names).to_json()
        assert success_names_commit(data, dest, rid, j)
    data = SuccessData(job_id=rid, committer="magic", filenames=["/z/a.csv"]).to_json()
    assert not success_names_commit(data, dest, rid, j)  # an earlier run's
