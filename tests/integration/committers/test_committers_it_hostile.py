"""Hand-made hostile records in a real job's directory (issue 10 items 3, 5, 6): the job
commit and resume refuse them before anything changes; a full listing of the bucket
(every object byte for byte, every pending upload) is the same afterwards."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from typing import Any

import pytest
from committer_helpers import bucket_state, committer, dest_prefix, dest_uri, engine_for, write

from zerorename.cli.jobs import main as cli_main
from zerorename.committers import JobCommitError, RecordFormatError, SuccessData
from zerorename.committers.codec.pending import (
    PendingRecord,
    PendingSetHeader,
    pendingset_bytes,
    read_pendingset,
)
from zerorename.committers.commit.journal import CommitPlan, Journal, PlannedSet, State
from zerorename.engine.results import PartInfo, PendingUpload
from zerorename.servers.targets import S3Target

#: tests of zerorename's own logic, which no store changes, run on moto only (the rule in
#: tests/conftest.py's docstring)
MOTO = pytest.mark.parametrize("s3", ["moto"], indirect=True)


async def committed_job(eng: Any, s3: Any, tasks: int = 2) -> tuple[Any, list[Any]]:
    """A magic job whose ``tasks`` tasks committed one file each."""
    job = await committer("magic", eng, dest_uri(s3)).setup_job()
    sums = []
    for t in range(tasks):
        ta = job.task_attempt(t)
        await ta.setup()
        await write(ta, f"good {t}.csv", b"good %d" % t)
        sums.append(await ta.commit())
    return job, sums


async def records_of(eng: Any, s3: S3Target, summary: Any) -> list[PendingRecord]:
    key = summary.pendingset.split("/", 3)[3]
    return read_pendingset(await eng.get_object(s3.bucket, key), summary.pendingset)[1]


def real_upload(s3: S3Target, key: str, data: bytes) -> PendingUpload:
    """A multipart upload with its one part uploaded, not completed (boto3)."""
    c = s3.boto3_client()
    uid = c.create_multipart_upload(Bucket=s3.bucket, Key=key)["UploadId"]
    etag = c.upload_part(Bucket=s3.bucket, Key=key, UploadId=uid, PartNumber=1, Body=data)["ETag"]
    return PendingUpload(s3.bucket, key, uid, (PartInfo(1, etag, len(data)),), len(data))


async def put_pendingset(eng: Any, job: Any, task: int, recs: list[PendingRecord]) -> None:
    header = PendingSetHeader(job.job_id, f"{task:05d}", 0)
    body = pendingset_bytes(header, [dataclasses.replace(r, task_id=f"{task:05d}") for r in recs])
    await eng.put_object(job.dest.bucket, job.layout.pendingset(task), body)


HOSTILE = {
    "dotdot": "../x-{J}.txt",
    "own journal": "__magic_job-{J}/journal.json",
    "record suffix": "y-{J}.pendingset",
    "empty segment": "a//z-{J}.txt",
    "dot segment": "./w-{J}.txt",
    "root _SUCCESS": "_SUCCESS",
}

#: every hostile key on moto; on RGW too the keys whose path segments a store may normalize
#: or refuse ('..', '.', an empty segment); the other refusals are zerorename's own
HOSTILE_ON = [
    *(pytest.param("moto", case, id=f"moto-{case}") for case in sorted(HOSTILE)),
    *(
        pytest.param("rgw", case, marks=pytest.mark.rgw, id=f"rgw-{case}")
        for case in ("dot segment", "dotdot", "empty segment")
    ),
]


@pytest.mark.parametrize(("s3", "case"), HOSTILE_ON, indirect=["s3"])
async def test_pendingset_key_outside_the_output_rules_is_refused(s3: S3Target, case: str) -> None:
    async with engine_for(s3) as eng:
        job, _ = await committed_job(eng, s3)
        key = dest_prefix(s3) + HOSTILE[case].format(J=job.job_id)
        try:
            up = real_upload(s3, key, b"hostile")
        except Exception:  # a store that refuses the key itself: a made-up upload id
            up = PendingUpload(s3.bucket, key, "made-up", (PartInfo(1, '"e"', 7),), 7)
        rec = PendingRecord(up, job.job_id, "00005", 0)
        await put_pendingset(eng, job, 5, [rec])
        before = bucket_state(s3)
        with pytest.raises(JobCommitError) as ei:
            await job.commit()  # plan from the listing: the hostile pendingset included
        assert not ei.value.rolled_back and isinstance(ei.value.__cause__, RecordFormatError)
        assert "00005.pendingset" in str(ei.value) and "\n" not in str(ei.value)
        assert bucket_state(s3) == before
        assert await job.is_active()


@MOTO
async def test_upload_of_another_bucket_is_refused(s3: S3Target) -> None:
    async with engine_for(s3) as eng:
        job, sums = await committed_job(eng, s3)
        rec = (await records_of(eng, s3, sums[0]))[0]
        other = dataclasses.replace(rec.upload, bucket=s3.bucket + "-x")
        await put_pendingset(eng, job, 5, [dataclasses.replace(rec, upload=other)])
        before = bucket_state(s3)
        with pytest.raises(JobCommitError, match="outside the destination"):
            await job.commit()
        assert bucket_state(s3) == before


@pytest.mark.parametrize("how", ["same upload in one set", "same key", "same upload id"])
@MOTO
async def test_the_same_upload_twice_is_a_record_error_before_any_complete(
    s3: S3Target, how: str
) -> None:
    async with engine_for(s3) as eng:
        job, sums = await committed_job(eng, s3)
        rec = (await records_of(eng, s3, sums[1]))[0]
        if how == "same upload in one set":
            await put_pendingset(eng, job, 1, [rec, rec])
        elif how == "same key":  # another real upload to task 1's destination key
            twin = real_upload(s3, rec.upload.key, b"twin")
            await put_pendingset(eng, job, 5, [dataclasses.replace(rec, upload=twin)])
        else:  # task 1's upload id under another key of the job
            key = rec.upload.key.replace("good 1", "good 9")
            await put_pendingset(
                eng,
                job,
                5,
                [dataclasses.replace(rec, upload=dataclasses.replace(rec.upload, key=key))],
            )
        before = bucket_state(s3)
        # within one set the pendingset's parser refuses the second commit to a destination
        # (as S3A does); across sets the job-commit scan finds the twin
        twice = "more than one commit" if how == "same upload in one set" else "appears twice"
        with pytest.raises(JobCommitError, match=twice) as ei:
            await job.commit()
        assert not ei.value.rolled_back and "KeyError" not in str(ei.value)
        assert bucket_state(s3) == before


async def journal_in_completing(eng: Any, job: Any, sums: list[Any]) -> dict[str, Any]:
    """The plan and journal a crashed commit leaves (state completing, nothing done yet)."""
    plan = CommitPlan(
        job.job_id,
        tuple(PlannedSet(s.pendingset.split("/", 3)[3], s.task_id, s.attempt) for s in sums),
        "summaries",
    )
    j = Journal(job.job_id, State.COMPLETING, pendingsets_total=len(sums), window=4)
    j.uploads_total = len(sums)
    await eng.put_object(job.dest.bucket, job.layout.plan, plan.to_json())
    d: dict[str, Any] = json.loads(j.to_json())
    return d


BAD_JOURNALS = {
    "watermark as text": ("watermark", "0"),
    "huge watermark": ("watermark", 10**30),
    "negative watermark": ("watermark", -1),
    "window 0": ("window", 0),
    "processes not a number": ("processes", "x"),
    "unknown state": ("state", "finished"),
    "error not a string": ("error", ["x"]),
    "bool uploads": ("uploads_total", True),
}


#: every malformed journal on moto; one on RGW too (the journal's parse is the server's
#: no matter: RGW holds the job, its refusal changing nothing and the abort after it; the
#: CLI test below refuses a malformed journal on both servers)
MALFORMED_ON = [
    *(pytest.param("moto", case, id=f"moto-{case}") for case in sorted(BAD_JOURNALS)),
    pytest.param("rgw", "watermark as text", marks=pytest.mark.rgw, id="rgw-watermark as text"),
]


@pytest.mark.parametrize(("s3", "case"), MALFORMED_ON, indirect=["s3"])
async def test_malformed_journal_makes_resume_refuse_and_change_nothing(
    s3: S3Target, case: str
) -> None:
    field, value = BAD_JOURNALS[case]
    async with engine_for(s3) as eng:
        job, sums = await committed_job(eng, s3)
        d = await journal_in_completing(eng, job, sums)
        d[field] = value
        await eng.put_object(s3.bucket, job.layout.journal, json.dumps(d).encode())
        before = bucket_state(s3)
        with pytest.raises(RecordFormatError) as ei:
            await job.resume()
        msg = str(ei.value)
        assert msg.startswith(f"journal.json of job {job.job_id} is malformed: {field}: ")
        assert "zerorename jobs abort" in msg and "\n" not in msg
        assert bucket_state(s3) == before
        # abort still works (append mode, job active, no _SUCCESS): nothing of it is left
        await job.abort()
        objs, ups = bucket_state(s3)
        assert [k for k in objs if job.job_id in k] == [] and ups == []


#: every cut on moto; on RGW the one a store that resolves '..' would turn into the job's
#: own pendingsets directory (the plan's check is zerorename's own)
CUTS_ON = [
    *(
        pytest.param("moto", cut, id=f"moto-{cut}")
        for cut in ["../../", "pendingsets/../", "other-"]
    ),
    pytest.param("rgw", "pendingsets/../", marks=pytest.mark.rgw, id="rgw-pendingsets/../"),
]


@pytest.mark.parametrize(("s3", "cut"), CUTS_ON, indirect=["s3"])
async def test_plan_naming_a_pendingset_outside_the_job_refuses_resume(
    s3: S3Target, cut: str
) -> None:
    async with engine_for(s3) as eng:
        job, sums = await committed_job(eng, s3)
        d = await journal_in_completing(eng, job, sums)
        await eng.put_object(s3.bucket, job.layout.journal, json.dumps(d).encode())
        outside = job.layout.pendingsets_dir + cut + "00000.pendingset"
        if cut == "other-":
            outside = dest_prefix(s3) + "00000.pendingset"
        # a copy of task 0's pendingset where the plan points (a store may refuse '..')
        copy = await eng.get_object(s3.bucket, job.layout.pendingset(0))
        with contextlib.suppress(Exception):
            await eng.put_object(s3.bucket, outside, copy)
        plan = CommitPlan(
            job.job_id, (PlannedSet(outside), PlannedSet(job.layout.pendingset(1))), "listing"
        )
        await eng.put_object(s3.bucket, job.layout.plan, plan.to_json())
        before = bucket_state(s3)
        with pytest.raises(RecordFormatError, match=f"plan.json of job {job.job_id} is malformed"):
            await job.resume()
        assert bucket_state(s3) == before


async def test_cli_jobs_resume_with_a_malformed_journal_is_one_line(
    s3: S3Target, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3.access_key or "")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3.secret_key or "")
    monkeypatch.setenv("AWS_DEFAULT_REGION", s3.region)
    async with engine_for(s3) as eng:
        job, sums = await committed_job(eng, s3)
        d = await journal_in_completing(eng, job, sums)
        d["watermark"] = "0"
        await eng.put_object(s3.bucket, job.layout.journal, json.dumps(d).encode())
    before = bucket_state(s3)
    argv = ["jobs", "resume", dest_uri(s3), job.job_id, "--endpoint-url", s3.endpoint_url]
    code = await asyncio.to_thread(cli_main, [*argv, "--addressing-style", "path"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert f"journal.json of job {job.job_id} is malformed: watermark: " in err
    assert bucket_state(s3) == before


async def test_succeeded_journal_with_nothing_completed_completes_before_success(
    s3: S3Target,
) -> None:
    """A journal that says 'succeeded' while no upload was completed: resume completes
    every planned upload (verified), then writes _SUCCESS; no data is lost."""
    async with engine_for(s3) as eng:
        job, sums = await committed_job(eng, s3, tasks=3)
        d = await journal_in_completing(eng, job, sums)
        d.update(state="succeeded", watermark=len(sums))
        await eng.put_object(s3.bucket, job.layout.journal, json.dumps(d).encode())
        res = await job.resume()
    assert res.resumed
    objs, ups = bucket_state(s3)
    prefix = dest_prefix(s3)
    data = {k[len(prefix) :]: v for k, v in objs.items() if "__magic" not in k}
    assert SuccessData.from_json(data.pop("_SUCCESS")).job_id == job.job_id
    assert data == {f"good {t}-{job.job_id}.csv": b"good %d" % t for t in range(3)}
    assert ups == []


async def test_succeeded_journal_whose_upload_is_gone_writes_no_success(s3: S3Target) -> None:
    """One planned upload neither completed nor pending: resume fails, writes no
    _SUCCESS, aborts nothing; the other uploads are completed (verified claims)."""
    async with engine_for(s3) as eng:
        job, sums = await committed_job(eng, s3, tasks=2)
        gone = (await records_of(eng, s3, sums[0]))[0].upload
        s3.boto3_client().abort_multipart_upload(
            Bucket=s3.bucket, Key=gone.key, UploadId=gone.upload_id
        )
        d = await journal_in_completing(eng, job, sums)
        d.update(state="succeeded", watermark=len(sums))
        await eng.put_object(s3.bucket, job.layout.journal, json.dumps(d).encode())
        with pytest.raises(JobCommitError) as ei:
            await job.resume()
        assert not ei.value.rolled_back
    objs, _ = bucket_state(s3)
    prefix = dest_prefix(s3)
    assert prefix + "_SUCCESS" not in objs
    assert prefix + f"good 1-{job.job_id}.csv" in objs
    assert job.layout.journal in objs and job.layout.marker in objs


@MOTO
async def test_cli_inspect_reads_the_job_records_a_refusal_points_to(
    s3: S3Target, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """A refusal says 'inspect it with zerorename inspect': inspect reads journal.json,
    plan.json and job.json, and names the bad field of a malformed one in one line."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3.access_key or "")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3.secret_key or "")
    monkeypatch.setenv("AWS_DEFAULT_REGION", s3.region)
    opts = ["--endpoint-url", str(s3.endpoint_url), "--addressing-style", "path"]
    async with engine_for(s3) as eng:
        job, sums = await committed_job(eng, s3)
        d = await journal_in_completing(eng, job, sums)
        await eng.put_object(s3.bucket, job.layout.journal, json.dumps(d).encode())
        await eng.put_object(
            s3.bucket, job.layout.plan, CommitPlan(job.job_id, (), "summaries").to_json()
        )
    for name, kind in (("journal", "journal"), ("plan", "plan"), ("marker", "job")):
        uri = f"s3://{s3.bucket}/{getattr(job.layout, name)}"
        code = await asyncio.to_thread(cli_main, ["inspect", uri, *opts])
        out = capsys.readouterr().out
        assert code == 0 and out.startswith(f"{kind}: {uri}") and job.job_id in out, out
    d["watermark"] = -1
    async with engine_for(s3) as eng:
        await eng.put_object(s3.bucket, job.layout.journal, json.dumps(d).encode())
    uri = f"s3://{s3.bucket}/{job.layout.journal}"
    code = await asyncio.to_thread(cli_main, ["inspect", uri, *opts])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "watermark" in err, err
    # outside a job's directory the names mean nothing
    stray = f"s3://{s3.bucket}/{dest_prefix(s3)}journal.json"
    async with engine_for(s3) as eng:
        await eng.put_object(s3.bucket, stray.split("/", 3)[3], json.dumps(d).encode())
    assert await asyncio.to_thread(cli_main, ["inspect", stray, *opts]) == 1
    assert "not a _SUCCESS" in capsys.readouterr().err
