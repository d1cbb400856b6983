"""``jobs list|show|resume|abort --json`` of the jobs that are not zerorename's own committers':
a Hadoop S3A magic job (``__magic_job-<id>/``: crashed with uploads pending, and committed
with its cleanup undone) and a streaming query's batch job left by a driver that died in
its commit. Each document is checked against the README's ``json cli-schema`` block, a
refusal is one line on stderr with nothing on stdout (issue 25, item 3). In-process, on
moto; the jobs are laid out by the records writers the S3A and stream tests use (no
Hadoop, no Spark)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from cli_helpers import check_document, run, use_target
from driver_death import batch_records, dying_committer
from zerorename.committers import (
    Destination,
    JobCommitError,
    MagicCommitter,
    PartitionedCommitter,
    TaskCommitSummary,
)
from zerorename.engine import UploadEngine
from zerorename.servers.targets import S3Target
from zerorename.spark_adapter.options import WriteOptions
from zerorename.spark_adapter.stream.log import Intent, stream_job_id
from zerorename.spark_adapter.stream.sink import STREAM_COMMIT, StreamSink, ensure_job
from zerorename.spark_adapter.write import TaskResult, task_id_for
from zerorename.testing.s3acrash import lay_out_on

S3A_JOB = "3f2a9c1e-6c0b-4d57-9a59-0123456789ab"
QUERY = "11111111-2222-4333-8444-555555555555"

Cli = Any  # (*argv) -> (code, stdout, stderr)


@pytest.fixture
def cli(
    moto_s3: S3Target, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Cli:
    use_target(moto_s3, monkeypatch)

    def go(*argv: str) -> tuple[int, str, str]:
        return run(capsys, *argv, "--json")

    return go


def refused(got: tuple[int, str, str]) -> str:
    code, out, err = got
    assert (code, out) == (1, "") and err.count("\n") == 1, got
    return err


# -- S3A -------------------------------------------------------------------------------


async def crashed_s3a(s3: S3Target, uri: str, *, committed: bool = False) -> None:
    """S3A's job commit died after completing task 0's uploads (task 1's pending, task 2
    never committed); ``committed``: it died after completing every committed task's
    upload, before deleting its directory."""
    async with UploadEngine(s3.engine_config()) as eng:
        _, pendingsets = await lay_out_on(eng, uri, S3A_JOB)
    if not committed:
        return
    c = s3.boto3_client()
    for name, data in pendingsets.items():
        if name.startswith("task_202601010000_0000_m_000000"):
            continue  # task 0's: completed by the crashed commit
        for rec in json.loads(data)["commits"]:
            parts = [{"ETag": e, "PartNumber": i + 1} for i, e in enumerate(rec["etags"])]
            c.complete_multipart_upload(
                Bucket=rec["bucket"],
                Key=rec["destinationKey"],
                UploadId=rec["uploadId"],
                MultipartUpload={"Parts": parts},
            )


def test_s3a_job_crashed_pending(moto_s3: S3Target, cli: Cli) -> None:
    uri = f"s3://{moto_s3.bucket}/{moto_s3.prefix}s3a"
    asyncio.run(crashed_s3a(moto_s3, uri))
    stray = f"{moto_s3.prefix}s3a/another-writers.csv"  # no record of the job names it
    moto_s3.boto3_client().create_multipart_upload(Bucket=moto_s3.bucket, Key=stray)
    code, out, err = cli("jobs", "list", uri)
    assert code == 0, err
    doc = check_document(out)
    assert [(j["jobId"], j["kind"]) for j in doc["jobs"]] == [(S3A_JOB, "s3a/magic")]
    code, out, err = cli("jobs", "show", uri, S3A_JOB)
    assert code == 0, err
    doc = check_document(out)
    job = doc["job"]
    assert (doc["kind"], job["jobId"], job["committed"]) == ("s3a/magic", S3A_JOB, False)
    assert job["uploads"] == {"pending": 2, "completed": 2, "missing": 0}
    code, out, err = cli("jobs", "abort", uri, S3A_JOB)
    assert code == 0, err
    doc = check_document(out)
    assert (doc["jobId"], doc["kind"], doc["rolledBack"]) == (S3A_JOB, "s3a/magic", True)
    assert doc["uploadsAborted"] == 4 and len(doc["kept"]) == 2  # task 0's two objects
    assert doc["objectsDeleted"] > 0 and doc["otherPendingUploads"] == 1  # the stray, left
    # gone: resume and abort refuse in one line
    refused(cli("jobs", "resume", uri, S3A_JOB))
    refused(cli("jobs", "abort", uri, S3A_JOB))
    assert check_document(cli("jobs", "list", uri)[1])["jobs"] == []


def test_s3a_job_resumed(moto_s3: S3Target, cli: Cli) -> None:
    uri = f"s3://{moto_s3.bucket}/{moto_s3.prefix}s3a"
    asyncio.run(crashed_s3a(moto_s3, uri))
    code, out, err = cli("jobs", "resume", uri, S3A_JOB)
    assert code == 0, err
    doc = check_document(out)
    assert (doc["jobId"], doc["kind"], doc["files"]) == (S3A_JOB, "s3a/magic", 4)
    assert doc["bytes"] == sum(len(f"task {t}, file {n}\n") for t in range(2) for n in range(2))
    # what its line says: task 1's completed now, task 0's before; task 2's aborted
    counts = ("completedNow", "alreadyCompleted", "uploadsAborted", "successWritten")
    assert [doc[k] for k in counts] == [2, 2, 2, True]
    assert doc["objectsDeleted"] > 0


def test_s3a_job_committed_cleanup_undone(moto_s3: S3Target, cli: Cli) -> None:
    uri = f"s3://{moto_s3.bucket}/{moto_s3.prefix}s3a"
    asyncio.run(crashed_s3a(moto_s3, uri, committed=True))
    code, out, err = cli("jobs", "list", uri)
    assert code == 0, err
    assert [j["jobId"] for j in check_document(out)["jobs"]] == [S3A_JOB]
    code, out, err = cli("jobs", "show", uri, S3A_JOB)
    assert code == 0, err
    doc = check_document(out)
    job = doc["job"]
    assert (doc["kind"], job["committed"], job["uploads"]["completed"]) == ("s3a/magic", True, 4)
    assert "committed" in refused(cli("jobs", "abort", uri, S3A_JOB))
    code, out, err = cli("jobs", "resume", uri, S3A_JOB)
    assert code == 0, err
    doc = check_document(out)
    assert (doc["jobId"], doc["kind"], doc["files"]) == (S3A_JOB, "s3a/magic", 4)
    assert (doc["completedNow"], doc["alreadyCompleted"], doc["uploadsAborted"]) == (0, 4, 2)


# -- a streaming query's batch job -------------------------------------------------------


async def crashed_batch(s3: S3Target, uri: str, when: str) -> str:
    """Batch 0 of the query, one task; its driver died in the commit with its intent
    stored: before any complete (``when="intent"``) or after every one (``"completes"``)."""
    async with UploadEngine(s3.engine_config()) as eng:
        committer = MagicCommitter(eng, uri, conflict="append", options=STREAM_COMMIT)
        job_id = stream_job_id(QUERY, "t0", 0)
        await ensure_job(committer, job_id, QUERY, 0)
        ta = committer.job(job_id).task_attempt(task_id_for(0, 0), 0)
        await ta.setup()
        async with ta.open("part-00000.csv") as out:
            await out.write(b"batch 0\n")
        summary = await ta.commit()
        result = TaskResult(0, 0, 0, 1, 1, 8, summary.to_json())
        sink = StreamSink(WriteOptions(path=uri), QUERY, committer)
        summaries = [TaskCommitSummary.from_json(result.summary)]
        sets = tuple(Destination.parse(s.pendingset).prefix for s in summaries)
        intent = (await sink.read_log()).with_intent(Intent(0, job_id, sets, 1, 1, 8))

        dying = dying_committer(sink, when)
        with pytest.raises(JobCommitError, match="after"):
            await dying.job(job_id).commit(summaries, records=batch_records(sink, intent))
        return job_id


def test_stream_batch_job_aborted(moto_s3: S3Target, cli: Cli) -> None:
    uri = f"s3://{moto_s3.bucket}/{moto_s3.prefix}stream"
    job_id = asyncio.run(crashed_batch(moto_s3, uri, "intent"))
    code, out, err = cli("jobs", "list", uri)
    assert code == 0, err
    # the kind jobs show|resume|abort report (it was zerorename/magic here)
    assert [(j["jobId"], j["kind"]) for j in check_document(out)["jobs"]] == [(job_id, "stream")]
    code, out, err = cli("jobs", "show", uri, job_id)
    assert code == 0, err
    doc = check_document(out)
    job, stream = doc["job"], doc["job"]["stream"]
    assert (doc["kind"], job["jobId"], job["commit"]["state"]) == ("stream", job_id, "completing")
    assert (stream["query"], stream["batch"], stream["inLog"]) == (QUERY, 0, "intent")
    code, out, err = cli("jobs", "abort", uri, job_id)
    assert code == 0, err
    doc = check_document(out)
    assert (doc["jobId"], doc["kind"]) == (job_id, "stream")
    assert any("writes it again" in m for m in doc["messages"]), doc


def test_stream_batch_job_resumed(moto_s3: S3Target, cli: Cli) -> None:
    uri = f"s3://{moto_s3.bucket}/{moto_s3.prefix}stream"
    job_id = asyncio.run(crashed_batch(moto_s3, uri, "completes"))
    code, out, err = cli("jobs", "resume", uri, job_id)
    assert code == 0, err
    doc = check_document(out)
    assert (doc["jobId"], doc["kind"]) == (job_id, "stream")
    assert any("no _SUCCESS" in m for m in doc["messages"]), doc
    # committed by this job: abort is refused, in one line
    assert "committed" in refused(cli("jobs", "abort", uri, job_id))


# -- a zerorename job whose job.json is gone --------------------------------------------


async def staging_job_without_marker(s3: S3Target, uri: str) -> str:
    """A partitioned job with one committed task, its ``job.json`` then deleted: the records
    no longer say which committer wrote them."""
    async with UploadEngine(s3.engine_config()) as eng:
        committer = PartitionedCommitter(eng, uri)
        job = await committer.setup_job()
        ta = job.task_attempt(task_id_for(0, 0), 0)
        await ta.setup()
        async with ta.open("day=1/part-00000.csv") as out:
            await out.write(b"row\n")
        await ta.commit()
        dest = Destination.parse(uri)
        await eng.delete_object(dest.bucket, job.layout.marker)
        return job.job_id


def test_a_job_without_its_marker_is_of_unknown_kind_everywhere(
    moto_s3: S3Target, cli: Cli
) -> None:
    """``jobs list`` said ``zerorename/?`` of such a job, and ``jobs show|abort`` said
    ``zerorename/magic`` (the committer that opened it, not the one that wrote it)."""
    uri = f"s3://{moto_s3.bucket}/{moto_s3.prefix}nomarker"
    job_id = asyncio.run(staging_job_without_marker(moto_s3, uri))
    code, out, err = cli("jobs", "list", uri)
    assert code == 0, err
    kinds = [(j["jobId"], j["kind"]) for j in check_document(out)["jobs"]]
    assert kinds == [(job_id, "zerorename/?")]
    code, out, err = cli("jobs", "show", uri, job_id)
    assert code == 0, err
    assert check_document(out)["kind"] == "zerorename/?"
    code, out, err = cli("jobs", "abort", uri, job_id)
    assert code == 0, err
    doc = check_document(out)
    assert (doc["jobId"], doc["kind"]) == (job_id, "zerorename/?")
    assert (
        moto_s3.boto3_client()
        .list_objects_v2(Bucket=moto_s3.bucket, Prefix=f"{moto_s3.prefix}nomarker")
        .get("KeyCount")
        == 0
    )
