"""Conflict modes fail/append/replace, per destination and per touched partition."""

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

from zerorename.committers import ConflictError, PathError, RecordFormatError
from zerorename.committers.commit.storage import plan_replacement, run_replacement
from zerorename.committers.conflict import OldObject, replace_plan_record
from zerorename.servers.targets import S3Target

#: tests of zerorename's own logic, which no store changes, run on moto only (the rule in
#: tests/conftest.py's docstring)
MOTO = pytest.mark.parametrize("s3", ["moto"], indirect=True)

OLD = {"y=1/old.csv": b"old 1", "y=2/old.csv": b"old 2"}


def seed(s3: S3Target, prefix: str) -> None:
    c = s3.boto3_client()
    for k, v in OLD.items():
        c.put_object(Bucket=s3.bucket, Key=prefix + k, Body=v)


async def run_job(s3: S3Target, kind: str, conflict: str, tmp, files: dict[str, bytes]):  # type: ignore[no-untyped-def]
    async with engine_for(s3) as eng:
        job = await committer(kind, eng, dest_uri(s3), conflict=conflict, tmp=tmp).setup_job()
        ta = job.task_attempt(0)
        await ta.setup()
        for rel, data in files.items():
            await write(ta, rel, data)
        s = await ta.commit()
        try:
            await job.commit([s])
        finally:
            pass
        return job


#: both kinds on moto, the magic one on RGW: the refusal follows the store's listing, the
#: same for both kinds (their difference, when the parts go up, is zerorename's own); no
#: HTTPS doubling (TLS is no part of the claim; test_replace_destination keeps a job over it)
FAIL_ON = [
    pytest.param("moto", "magic", id="magic-moto"),
    pytest.param("moto", "staging", id="staging-moto"),
    pytest.param("rgw", "magic", marks=pytest.mark.rgw, id="magic-rgw"),
]


@pytest.mark.parametrize(("s3", "kind"), FAIL_ON, indirect=["s3"])
async def test_fail_refuses_before_completing_anything(  # type: ignore[no-untyped-def]
    s3: S3Target, fault_proxy, kind: str, tmp_path
) -> None:
    prefix = dest_prefix(s3)
    seed(s3, prefix)
    proxy = fault_proxy(s3.endpoint_url)
    with pytest.raises(ConflictError) as ei:
        await run_job(s3.with_endpoint(proxy.url), kind, "fail", tmp_path, {"y=3/new.csv": b"new"})
    assert ei.value.rolled_back and ei.value.conflicts
    # "before": the refusal came before any complete (a complete then a rollback ends the same)
    assert proxy.stats.requests("UploadPart") >= 1  # the job did write its file
    assert proxy.stats.requests("CompleteMultipartUpload") == 0
    assert data_objects(s3, prefix) == OLD  # untouched, and nothing of the job
    assert uploads(s3, prefix) == []
    assert [k for k in objects(s3, prefix) if "__magic" in k] == []


@MOTO
async def test_fail_on_empty_destination_commits(s3: S3Target, tmp_path) -> None:  # type: ignore[no-untyped-def]
    job = await run_job(s3, "magic", "fail", tmp_path, {"a.csv": b"a"})
    assert data_objects(s3, dest_prefix(s3)) == {f"a-{job.job_id}.csv": b"a"}


async def test_partitioned_fail_judges_touched_partitions_only(s3: S3Target, tmp_path) -> None:  # type: ignore[no-untyped-def]
    prefix = dest_prefix(s3)
    seed(s3, prefix)
    job = await run_job(s3, "partitioned", "fail", tmp_path, {"y=3/new.csv": b"new"})
    assert data_objects(s3, prefix) == {**OLD, f"y=3/new-{job.job_id}.csv": b"new"}
    with pytest.raises(ConflictError) as ei:
        await run_job(s3, "partitioned", "fail", tmp_path, {"y=2/new.csv": b"x", "y=4/n.csv": b"y"})
    assert ei.value.conflicts == (prefix + "y=2/old.csv",)
    assert data_objects(s3, prefix) == {**OLD, f"y=3/new-{job.job_id}.csv": b"new"}
    assert uploads(s3, prefix) == []


@MOTO
async def test_append_keeps_old_files(s3: S3Target, tmp_path) -> None:  # type: ignore[no-untyped-def]
    prefix = dest_prefix(s3)
    seed(s3, prefix)
    j1 = await run_job(s3, "magic", "append", tmp_path, {"y=1/old.csv": b"same name"})
    j2 = await run_job(s3, "magic", "append", tmp_path, {"y=1/old.csv": b"again"})
    assert data_objects(s3, prefix) == {
        **OLD,
        f"y=1/old-{j1.job_id}.csv": b"same name",
        f"y=1/old-{j2.job_id}.csv": b"again",
    }


# and once over TLS, RGW's own (a replace's listing and deletes over HTTPS; no doubling on moto)
@pytest.mark.parametrize(
    "s3",
    [
        "moto",
        pytest.param("rgw", marks=pytest.mark.rgw),
        pytest.param("rgw-https", marks=[pytest.mark.rgw, pytest.mark.https]),
    ],
    indirect=True,
)
async def test_replace_destination(s3: S3Target, tmp_path) -> None:  # type: ignore[no-untyped-def]
    prefix = dest_prefix(s3)
    seed(s3, prefix)
    job = await run_job(s3, "staging", "replace", tmp_path, {"z=9/new.csv": b"n"})
    assert data_objects(s3, prefix) == {f"z=9/new-{job.job_id}.csv": b"n"}
    assert prefix + "_SUCCESS" in objects(s3, prefix)


async def test_replace_touched_partitions_only(s3: S3Target, tmp_path) -> None:  # type: ignore[no-untyped-def]
    prefix = dest_prefix(s3)
    seed(s3, prefix)
    job = await run_job(
        s3,
        "partitioned",
        "replace",
        tmp_path,
        {"y=2/a.csv": b"a", "y=2/b.csv": b"b", "y=5/c.csv": b"c"},
    )
    assert data_objects(s3, prefix) == {
        "y=1/old.csv": b"old 1",
        f"y=2/a-{job.job_id}.csv": b"a",
        f"y=2/b-{job.job_id}.csv": b"b",
        f"y=5/c-{job.job_id}.csv": b"c",
    }
    assert [k for k in objects(s3, prefix) if "__magic" in k] == []


@MOTO
async def test_partitioned_needs_partition_directories(s3: S3Target, tmp_path) -> None:  # type: ignore[no-untyped-def]
    async with engine_for(s3) as eng:
        job = await committer("partitioned", eng, dest_uri(s3), tmp=tmp_path).setup_job()
        ta = job.task_attempt(0)
        await ta.setup()
        with pytest.raises(PathError):
            ta.open("top-level.csv")
        await job.abort()


async def test_replace_plan_deletes_only_what_it_listed(s3: S3Target, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The replace plan is listed before completing; afterwards only its objects that are
    still the same go: a late object, a rewritten one and other jobs' records stay."""
    prefix = dest_prefix(s3)
    seed(s3, prefix)
    c = s3.boto3_client()
    async with engine_for(s3) as eng:
        job = await committer("magic", eng, dest_uri(s3), conflict="replace").setup_job()
        other = "11111111-2222-4333-8444-555555555555"
        c.put_object(Bucket=s3.bucket, Key=prefix + f"__magic_job-{other}/job.json", Body=b"{}")
        c.put_object(Bucket=s3.bucket, Key=prefix + f"mine-{job.job_id}.csv", Body=b"mine")
        prefixes = (prefix + "y=1/", prefix + "y=2/", prefix)  # overlapping on purpose
        assert len(await plan_replacement(job.context, prefixes)) == 2
        c.put_object(Bucket=s3.bucket, Key=prefix + "y=1/late.csv", Body=b"late")
        c.put_object(Bucket=s3.bucket, Key=prefix + "y=2/old.csv", Body=b"rewritten")
        assert await run_replacement(job.context, prefixes) == 1
        assert data_objects(s3, prefix) == {
            "y=1/late.csv": b"late",
            "y=2/old.csv": b"rewritten",
            f"mine-{job.job_id}.csv": b"mine",
        }
        # a tampered plan (naming this job's file, a record, or outside) deletes nothing
        before = objects(s3, prefix)
        for key in (
            prefix + f"mine-{job.job_id}.csv",
            prefix + f"__magic_job-{other}/job.json",
            s3.prefix + "elsewhere.csv",
        ):
            plan = replace_plan_record(
                [OldObject(prefix + "y=1/late.csv", "x"), OldObject(key, "x")]
            )
            await eng.put_object(s3.bucket, job.layout.replace, plan)
            with pytest.raises(RecordFormatError):
                await run_replacement(job.context, prefixes)
            assert objects(s3, prefix) == {**before, job.layout.replace: plan}
        await eng.delete_objects(s3.bucket, [job.layout.replace])
        with pytest.raises(RecordFormatError, match="missing"):
            await run_replacement(job.context, prefixes)
        await job.abort()
    assert data_objects(s3, prefix) == {
        "y=1/late.csv": b"late",
        "y=2/old.csv": b"rewritten",
        f"mine-{job.job_id}.csv": b"mine",  # not in the job's records: not its to delete
    }
