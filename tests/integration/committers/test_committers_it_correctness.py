"""The paper's correctness (reference 000, section VIII) on real servers: complete,
exclusive, nothing visible before job commit, abortable, continuity, concurrent jobs."""

from __future__ import annotations

import pytest
from committer_helpers import (
    committer,
    data_objects,
    dest_prefix,
    dest_uri,
    engine_for,
    objects,
    uploads,
    write,
)

from zerorename.committers import (
    JobCommitError,
    JobNotActive,
    JournalError,
    RecordFormatError,
    TaskAttemptError,
)
from zerorename.committers.codec.pending import (
    PENDINGSET_VERSION,
    PendingSetHeader,
    pendingset_bytes,
)
from zerorename.servers.targets import S3Target

#: tests of zerorename's own logic, which no store changes, run on moto only (the rule in
#: tests/conftest.py's docstring)
MOTO = pytest.mark.parametrize("s3", ["moto"], indirect=True)


def nothing_left(s3: S3Target, prefix: str) -> None:
    assert objects(s3, prefix) == {}
    assert uploads(s3, prefix) == []


@MOTO
async def test_attempt_failing_during_write_leaves_nothing(s3: S3Target) -> None:
    prefix = dest_prefix(s3)
    async with engine_for(s3) as eng:
        job = await committer("magic", eng, dest_uri(s3)).setup_job()
        bad = job.task_attempt(0, 0)
        await bad.setup()
        await write(bad, "ok first.csv", b"from attempt 0")
        with pytest.raises(RuntimeError):
            async with bad.open("broken.csv") as out:
                await out.write(b"half")
                raise RuntimeError("task died while writing")
        await bad.abort()  # the driver aborts the failed attempt
        good = job.task_attempt(0, 1)
        await good.setup()
        await write(good, "ok first.csv", b"from attempt 1")
        s = await good.commit()
        await job.commit([s])
    assert data_objects(s3, prefix) == {f"ok first-{job.job_id}.csv": b"from attempt 1"}
    assert uploads(s3, prefix) == []


@pytest.mark.parametrize("kind", ["magic", "staging"])
@MOTO
async def test_attempt_failing_during_task_commit_leaves_nothing(
    s3: S3Target, kind: str, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """An attempt whose task commit fails (here: its job was aborted under it) aborts its
    own uploads and makes nothing visible."""
    prefix = dest_prefix(s3)
    async with engine_for(s3) as eng:
        job = await committer(kind, eng, dest_uri(s3), tmp=tmp_path).setup_job()
        ta = job.task_attempt(1, 0)
        await ta.setup()
        await write(ta, "a.bin", b"a" * 100)
        await write(ta, "b.bin", b"b" * 100)
        await job.abort()
        with pytest.raises(JobNotActive):
            await ta.commit()
        with pytest.raises(TaskAttemptError):
            ta.open("c.bin")  # a failed attempt takes no more output
    nothing_left(s3, prefix)


@MOTO
async def test_magic_commit_with_open_output_fails_and_aborts(s3: S3Target) -> None:
    prefix = dest_prefix(s3)
    async with engine_for(s3) as eng:
        job = await committer("magic", eng, dest_uri(s3)).setup_job()
        ta = job.task_attempt(2, 0)
        await ta.setup()
        await write(ta, "done.bin", b"d")
        out = ta.open("still open.bin")
        async with out:
            await out.write(b"x")
            with pytest.raises(TaskAttemptError, match="open outputs"):
                await ta.commit()
        await job.abort()
    nothing_left(s3, prefix)


async def test_attempt_failing_after_task_commit_last_commit_wins(s3: S3Target) -> None:
    """Attempt 0 commits, is then considered failed; attempt 1 of the same task commits
    too (overwriting the pendingset, never an error). Only attempt 1's output appears;
    attempt 0's uploads are aborted by the job commit."""
    prefix = dest_prefix(s3)
    async with engine_for(s3) as eng:
        job = await committer("magic", eng, dest_uri(s3)).setup_job()
        a0 = job.task_attempt(5, 0)
        await a0.setup()
        await write(a0, "x/out0.bin", b"attempt 0")
        s0 = await a0.commit()
        a1 = job.task_attempt(5, 1)
        await a1.setup()
        await write(a1, "x/out1.bin", b"attempt 1")
        s1 = await a1.commit()
        assert s0.pendingset == s1.pendingset
        assert len(uploads(s3, prefix)) == 2
        res = await job.commit([s1])
    assert res.files == 1
    assert data_objects(s3, prefix) == {f"x/out1-{job.job_id}.bin": b"attempt 1"}
    assert uploads(s3, prefix) == []


async def test_recommitted_attempt_with_listing(s3: S3Target, tmp_path) -> None:  # type: ignore[no-untyped-def]
    prefix = dest_prefix(s3)
    async with engine_for(s3) as eng:
        job = await committer("staging", eng, dest_uri(s3), tmp=tmp_path).setup_job()
        for attempt in (0, 1, 2):
            ta = job.task_attempt("t", attempt)
            await ta.setup()
            await write(ta, f"f{attempt}.txt", b"%d" % attempt)
            await ta.commit()
        await job.commit()  # lists the pendingsets: the last attempt's is there
    assert data_objects(s3, prefix) == {f"f2-{job.job_id}.txt": b"2"}
    assert uploads(s3, prefix) == []


#: every stage on moto; on RGW the stages whose abort finds the job's uploads and records by
#: listing the store (before the job's records list them, and after)
STAGES_ON = [
    *(
        pytest.param("moto", stage, id=f"moto-{stage}")
        for stage in ["setup", "written", "task_committed", "commit_failed"]
    ),
    *(
        pytest.param("rgw", stage, marks=pytest.mark.rgw, id=f"rgw-{stage}")
        for stage in ["written", "task_committed"]
    ),
]


@pytest.mark.parametrize(("s3", "stage"), STAGES_ON, indirect=["s3"])
async def test_job_aborted_at_each_stage_leaves_nothing(s3: S3Target, stage: str) -> None:
    prefix = dest_prefix(s3)
    async with engine_for(s3) as eng:
        job = await committer("magic", eng, dest_uri(s3)).setup_job()
        summaries = []
        if stage != "setup":
            for t in range(3):
                ta = job.task_attempt(t)
                await ta.setup()
                await write(ta, f"p=1/t{t}.bin", b"z" * (t + 1))
                if stage != "written":
                    summaries.append(await ta.commit())
        if stage == "commit_failed":
            # a corrupt pendingset: the job commit refuses and changes nothing (a bad
            # record is no reason to roll back); the driver then aborts the job
            key = summaries[2].pendingset.split("/", 3)[3]
            await eng.put_object(
                s3.bucket,
                key,
                b'{"version":1,"jobId":"' + job.job_id.encode() + b'","commits":[{"trunc',
            )
            before = (objects(s3, prefix), uploads(s3, prefix))
            with pytest.raises(JobCommitError) as ei:
                await job.commit(summaries)
            assert not ei.value.rolled_back
            assert isinstance(ei.value.__cause__, RecordFormatError)
            assert key in str(ei.value.__cause__)
            assert (objects(s3, prefix), uploads(s3, prefix)) == before
        await job.abort()
        assert data_objects(s3, prefix) == {}
        await job.cleanup()
    nothing_left(s3, prefix)


@MOTO
async def test_corrupt_pendingset_completes_nothing(s3: S3Target) -> None:
    """A pendingset that is valid for a while and then truncated: its records that did
    parse are never completed (the commit refuses and changes nothing)."""
    prefix = dest_prefix(s3)
    async with engine_for(s3) as eng:
        job = await committer("magic", eng, dest_uri(s3)).setup_job()
        ta = job.task_attempt(0)
        await ta.setup()
        for i in range(5):
            await write(ta, f"f{i}.bin", b"q")
        s = await ta.commit()
        key = s.pendingset.split("/", 3)[3]
        whole = await eng.get_object(s3.bucket, key)
        await eng.put_object(s3.bucket, key, whole[: int(len(whole) * 0.8)])
        before = (objects(s3, prefix), uploads(s3, prefix))
        with pytest.raises(JobCommitError) as ei:
            await job.commit([s])
        assert not ei.value.rolled_back and "truncated" in str(ei.value)
        assert (objects(s3, prefix), uploads(s3, prefix)) == before
        assert len(before[1]) == 5 and await job.is_active()
        await job.abort()
        # and a listed pendingset of another version is refused the same way
        job2 = await committer("magic", eng, dest_uri(s3)).setup_job()
        header = PendingSetHeader(job2.job_id, "00000", 0)
        k2 = job2.layout.pendingset(0)
        await eng.put_object(
            s3.bucket,
            k2,
            pendingset_bytes(header, []).replace(
                b'"version":%d' % PENDINGSET_VERSION, b'"version":9'
            ),
        )
        with pytest.raises(JobCommitError) as ei:
            await job2.commit()
        assert "version 9" in str(ei.value) and not ei.value.rolled_back
        await job2.abort()
    nothing_left(s3, prefix)


async def test_straggler_after_job_commit_makes_nothing_visible(s3: S3Target) -> None:
    prefix = dest_prefix(s3)
    async with engine_for(s3) as eng:
        job = await committer("magic", eng, dest_uri(s3)).setup_job()
        winner = job.task_attempt(0, 0)
        straggler = job.task_attempt(0, 1)
        await winner.setup()
        await straggler.setup()
        await write(winner, "w.bin", b"winner")
        await job.commit([await winner.commit()])
        before = data_objects(s3, prefix)
        # the straggler goes on writing after the job committed: its upload checks the job
        # once it exists, finds it finished and aborts itself; its commit is refused
        with pytest.raises(JobNotActive, match="finished while task attempt"):
            await write(straggler, "late.bin", b"late")
        with pytest.raises(JobNotActive):
            await straggler.commit()
        assert data_objects(s3, prefix) == before and uploads(s3, prefix) == []
        # one killed between its upload's create and that check leaves a pending upload,
        # which never becomes visible and is removed by cleanup by age
        dead = f"{prefix}dead-{job.job_id}.bin"
        s3.boto3_client().create_multipart_upload(Bucket=s3.bucket, Key=dead)
        assert data_objects(s3, prefix) == before
        assert [k for k in uploads(s3, prefix)] == [dead]
        assert await job.cleanup(older_than=0) == 1
        with pytest.raises(JobNotActive):
            await job.task_attempt(0, 3).setup()
    assert data_objects(s3, prefix) == {f"w-{job.job_id}.bin": b"winner"}
    assert uploads(s3, prefix) == []
    assert [k for k in objects(s3, prefix) if "__magic" in k] == []


async def test_two_concurrent_jobs_same_destination(s3: S3Target) -> None:
    prefix = dest_prefix(s3)
    async with engine_for(s3) as eng:
        a = await committer("magic", eng, dest_uri(s3)).setup_job()
        b = await committer("magic", eng, dest_uri(s3)).setup_job()
        assert a.job_id != b.job_id
        sa, sb = [], []
        for t in range(2):
            for job, out in ((a, sa), (b, sb)):
                ta = job.task_attempt(t)
                await ta.setup()
                await write(ta, f"part{t}.csv", job.job_id.encode())
                out.append(await ta.commit())
        # B also has an uncommitted straggler upload pending when A commits and cleans up
        extra = b.task_attempt(9)
        await extra.setup()
        await write(extra, "pending.csv", b"b")
        await a.commit(sa)
        assert len([u for u in uploads(s3, prefix) if b.job_id in u]) == 3
        await b.commit(sb)
    data = data_objects(s3, prefix)
    assert sorted(data) == sorted(f"part{t}-{j.job_id}.csv" for j in (a, b) for t in range(2))
    assert uploads(s3, prefix) == []


async def test_dataset1_never_touches_dataset10(s3: S3Target) -> None:
    base = f"s3://{s3.bucket}/{s3.prefix}"
    async with engine_for(s3) as eng:
        j10 = await committer("magic", eng, base + "dataset10").setup_job()
        t10 = j10.task_attempt(0)
        await t10.setup()
        await write(t10, "x.bin", b"10")
        s10 = await t10.commit()
        j1 = await committer("magic", eng, base + "dataset1").setup_job()
        t1 = j1.task_attempt(0)
        await t1.setup()
        await write(t1, "x.bin", b"1")
        await j1.commit([await t1.commit()])
        await j1.cleanup(older_than=0)  # even age-based cleanup stays in dataset1/
        aborted = j1.committer.job(j10.job_id)
        with pytest.raises(JournalError, match=j10.job_id):  # dataset1 has no such job
            await aborted.resume()
        assert len(uploads(s3, s3.prefix + "dataset10/")) == 1
        await j10.commit([s10])
    assert data_objects(s3, s3.prefix + "dataset10/") == {f"x-{j10.job_id}.bin": b"10"}
    assert data_objects(s3, s3.prefix + "dataset1/") == {f"x-{j1.job_id}.bin": b"1"}
