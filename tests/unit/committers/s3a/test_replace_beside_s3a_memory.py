"""A replace commit never deletes part of an S3A job that is committing beside it
(simulation default seeds 250 and 540): Hadoop's S3A commits take no lock, so a replace
refuses, with nothing changed, while an S3A job's directory is under the destination;
it commits once that job finished (its directory deleted). On the in-memory store."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zerorename.committers import CommitOptions, ConflictError, MagicCommitter
from zerorename.committers.commit.scan import s3a_job_of
from zerorename.committers.paths import Destination
from zerorename.testing.memstate import MemoryState
from zerorename.testing.memstore import MemoryStore
from zerorename.testing.s3acrash import lay_out_on

B = "bkt"
URI = f"s3://{B}/out"
X = "3f2a9c1e-6c0b-4d57-9a59-0123456789ab"
Y = "9d7c1b2a-1111-4222-8333-444455556666"


async def test_a_replace_refuses_while_an_s3a_job_may_be_committing(tmp_path: Path) -> None:
    state = MemoryState(B)
    store = MemoryStore(state)
    layout, _ = await lay_out_on(store, URI, X)  # X's tasks committed; its commit may run
    p = await store.upload(B, f"out/part-00000-{X}-c000.csv", b"x's half\n", defer=True)
    assert (await store.complete_many([p])).ok  # one of X's files is visible already
    opts = CommitOptions(staging_dir=tmp_path, lock_wait=0.0)
    committer = MagicCommitter(store, URI, conflict="replace", options=opts)
    job = await committer.setup_job()
    ta = job.task_attempt(0)
    await ta.setup()
    async with ta.open("new.csv") as out:
        await out.write(b"new\n")
    summary = await ta.commit()
    before = dict(state.objects(B))
    with pytest.raises(ConflictError, match=rf"S3A job {X} .*nothing changed") as refused:
        await job.commit([summary])
    assert "\n" not in str(refused.value) and refused.value.rolled_back
    after = dict(state.objects(B))
    assert {k: v for k, v in after.items() if job.job_id not in k} == {
        k: v for k, v in before.items() if job.job_id not in k
    }, "the refused replace changed another writer's object"
    assert not [k for k in after if job.job_id in k and "__magic" not in k]
    await store.delete_objects(B, [k for k in after if k.startswith(layout.root)])  # X ended
    job2 = await committer.setup_job()
    ta2 = job2.task_attempt(0)
    await ta2.setup()
    async with ta2.open("new.csv") as out:
        await out.write(b"new\n")
    await job2.commit([await ta2.commit()])
    assert f"out/part-00000-{X}-c000.csv" not in state.objects(B)  # replaced, X whole


def test_s3a_job_of_names_only_an_s3a_jobs_own_records() -> None:
    dest = Destination.parse(URI)
    assert s3a_job_of(dest, f"out/__magic_job-{X}/job-{X}/00/t.pendingset") == X
    assert s3a_job_of(dest, f"out/__magic_job-{X}/job.json") is None  # zerorename's layout
    assert s3a_job_of(dest, f"out/__magic_job-{X}/job-{Y}/00/") is None
    assert s3a_job_of(dest, f"out10/__magic_job-{X}/job-{X}/x") is None
    assert s3a_job_of(dest, f"out/p=0/__magic_job-{X}/job-{X}/x") is None


@given(st.text(max_size=120))
def test_s3a_job_of_any_key_is_none_or_the_id_in_both_places(rel: str) -> None:
    job = s3a_job_of(Destination.parse(URI), "out/" + rel)
    assert job is None or rel.startswith((f"__magic_job-{job}/job-{job}/", f"__magic/job-{job}/"))
