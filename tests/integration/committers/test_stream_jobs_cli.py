"""`zerorename jobs show|resume|abort` of a streaming query's batch job whose driver died in
its commit, through the real command on moto and Ceph RGW (issue 20, finding 1): abort
drops the batch from the log so Spark's next run writes it again (it used to be adopted
with none of its files); resume records the batch in the log and writes no _SUCCESS into
the stream's destination. The batch commit is the sink's own (its intent with the
journal, the batch recorded with ``succeeded``); the driver "dies" at its writes of the
log there (:mod:`driver_death`), as a process would between those requests."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from committer_helpers import data_objects, dest_prefix, dest_uri, engine_for, objects

from driver_death import batch_records, dying_committer
from zerorename.cli import main
from zerorename.committers import Destination, JobCommitError, MagicCommitter, TaskCommitSummary
from zerorename.engine import UploadEngine
from zerorename.servers.targets import S3Target
from zerorename.spark_adapter.options import WriteOptions
from zerorename.spark_adapter.stream.log import Intent, stream_job_id
from zerorename.spark_adapter.stream.sink import STREAM_COMMIT, StreamSink, ensure_job
from zerorename.spark_adapter.write import TaskResult, task_id_for

#: tests of zerorename's own logic, which no store changes, run on moto only (the rule in
#: tests/conftest.py's docstring)
MOTO = pytest.mark.parametrize("s3", ["moto"], indirect=True)

Q = "11111111-2222-4333-8444-555555555555"


def sink(eng: UploadEngine, uri: str) -> StreamSink:
    committer = MagicCommitter(eng, uri, conflict="append", options=STREAM_COMMIT)
    return StreamSink(WriteOptions(path=uri), Q, committer)


async def run_tasks(eng: UploadEngine, uri: str, batch: int, token: str) -> tuple[str, Any]:
    committer = MagicCommitter(eng, uri, conflict="append", options=STREAM_COMMIT)
    job_id = stream_job_id(Q, token, batch)
    results = []
    for t in range(2):
        await ensure_job(committer, job_id, Q, batch)
        ta = committer.job(job_id).task_attempt(task_id_for(t, t), 0)
        await ta.setup()
        data = f"batch {batch} task {t}\n".encode()
        async with ta.open(f"part-{t:05d}.csv") as out:
            await out.write(data)
        s = await ta.commit()
        results.append(TaskResult(t, 0, t, 1, 1, len(data), s.to_json()))
    return job_id, results


async def died_in_commit(s3: S3Target, uri: str, when: str) -> str:
    """Batch 0 committed; batch 1's driver died with its intent stored: before any
    complete (``when="intent"``) or after every complete (``when="completes"``)."""
    async with engine_for(s3) as eng:
        job0, res0 = await run_tasks(eng, uri, 0, "t0")
        assert (await sink(eng, uri).commit(0, job0, res0)).action == "committed"
        job_id, results = await run_tasks(eng, uri, 1, "t1")
        sk = sink(eng, uri)
        summaries = [TaskCommitSummary.from_json(r.summary) for r in results]
        log0 = await sk.read_log()
        sets = tuple(sorted(Destination.parse(s.pendingset).prefix for s in summaries))
        intent = log0.with_intent(Intent(1, job_id, sets, 2, 2, sum(s.bytes for s in summaries)))

        dying = dying_committer(sk, when)
        with pytest.raises(JobCommitError, match=r"after (the intent|every complete)"):
            await dying.job(job_id).commit(summaries, records=batch_records(sk, intent))
        assert (await sk.read_log()).pending is not None
        return job_id


def cli(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    got = capsys.readouterr()
    return code, got.out, got.err


def stream_data(s3: S3Target) -> list[bytes]:
    prefix = dest_prefix(s3)
    return sorted(
        v
        for k, v in data_objects(s3, prefix).items()
        if "_zerorename_streams" not in k and "__magic" not in k
    )


def log_of(s3: S3Target) -> dict[str, Any]:
    c = s3.boto3_client()
    key = f"{dest_prefix(s3)}_zerorename_streams/{Q}/log.json"
    return dict(json.loads(c.get_object(Bucket=s3.bucket, Key=key)["Body"].read()))


async def rerun(s3: S3Target, uri: str, batch: int) -> str:
    async with engine_for(s3) as eng:
        job_id, results = await run_tasks(eng, uri, batch, f"rerun{time.monotonic_ns()}")
        return (await sink(eng, uri).commit(batch, job_id, results)).action


def want(batches: range) -> list[bytes]:
    return sorted(f"batch {b} task {t}\n".encode() for b in batches for t in range(2))


@MOTO
def test_abort_of_a_stream_job_and_spark_writes_the_batch_again(
    s3: S3Target, aws_env: list[str], capsys: Any
) -> None:
    uri = dest_uri(s3)
    job_id = asyncio.run(died_in_commit(s3, uri, "intent"))
    code, out, err = cli(capsys, "jobs", "show", uri, job_id, *aws_env)
    assert code == 0, err
    shown = json.loads(out)["stream"]
    assert (shown["query"], shown["batch"], shown["inLog"]) == (Q, 1, "intent")
    code, out, err = cli(capsys, "jobs", "abort", uri, job_id, *aws_env)
    assert code == 0, err
    assert f"streaming query {Q}'s batch 1 job" in out and "writes it again" in out
    assert log_of(s3)["pending"] is None
    assert asyncio.run(rerun(s3, uri, 1)) == "committed"
    assert stream_data(s3) == want(range(2))  # batch 1 written again, not lost
    assert [e["batch"] for e in log_of(s3)["recent"]] == [0, 1]


def test_resume_of_a_stream_job_records_the_batch_and_writes_no_success(
    s3: S3Target, aws_env: list[str], capsys: Any
) -> None:
    uri = dest_uri(s3)
    job_id = asyncio.run(died_in_commit(s3, uri, "completes"))
    code, out, err = cli(capsys, "jobs", "resume", uri, job_id, *aws_env)
    assert code == 0, err
    assert "finds it committed" in out and "no _SUCCESS" in out
    assert f"{dest_prefix(s3)}_SUCCESS" not in objects(s3, dest_prefix(s3))
    lg = log_of(s3)
    assert (lg["last_batch"], lg["pending"]) == (1, None)
    assert stream_data(s3) == want(range(2))
    assert asyncio.run(rerun(s3, uri, 1)) == "duplicate"
    assert stream_data(s3) == want(range(2))
    # the job that committed the batch is never aborted
    code, out, err = cli(capsys, "jobs", "abort", uri, job_id, *aws_env)
    assert code == 1 and out == "" and err.count("\n") == 1
    assert stream_data(s3) == want(range(2))
