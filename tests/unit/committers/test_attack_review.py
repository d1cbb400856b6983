"""Adversarial review of Hadoop 3.3 S3A jobs (``dest/__magic/job-<id>/``) on the in-memory
store: a crash at each request of abort and resume, then a second run finishing it; a
concurrent 3.3 job writing into the shared ``__magic/`` while an abort lists and deletes."""

from __future__ import annotations

import json

import pytest
from tests.unit.committers.test_s3a_layout33_memory import (
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

from zerorename.committers.errors import JobNotFound
from zerorename.committers.s3ajobs import abort_s3a_job, resume_s3a_job
from zerorename.testing.memfaults import Fault
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
