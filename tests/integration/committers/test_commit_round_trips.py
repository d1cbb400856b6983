"""A job commit's sequential requests on moto behind the fault proxy (a latency on every
request) against the same job on the in-memory store: issue 12's goal holds on the fake
and, within one request, on a real server. Both jobs are built and committed through the
public Committer API; the proxy's timed log and the fake's log are read by the same
``testing.requestlog``. Run with -s to see both chains."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from zerorename.committers import (
    CommitOptions,
    MagicCommitter,
    StagingCommitter,
    TaskCommitSummary,
)
from zerorename.committers.objectstore import UploadStore
from zerorename.engine import UploadEngine
from zerorename.servers.faultproxy import FaultProxy, FaultRule
from zerorename.servers.requestlog import Request, describe, sequential_requests
from zerorename.servers.targets import S3Target
from zerorename.testing.memstore import MemoryState, MemoryStore

ProxyFactory = Callable[..., FaultProxy]
TASKS = 12
#: per request on both stores: requests sent together overlap by far more than the
#: jitter of a loaded machine, requests sent one after another do not (0.1 s was not: with
#: the tests running side by side in 4 workers on a loaded 2-core machine, two pendingset
#: reads sent together started more than 0.1 s apart and chained)
LATENCY = 0.3
#: what another writer holds in the destination before the job (a partition the job
#: writes, one it does not)
OLD = {"y=0/old.csv": b"old0", "z=9/keep.csv": b"z9"}
KINDS = {"magic": MagicCommitter, "staging": StagingCommitter}


def committer(kind: str, store: UploadStore, uri: str, conflict: str, tmp: Path) -> Any:
    tmp.mkdir(parents=True, exist_ok=True)
    options = CommitOptions(staging_dir=tmp, pending_records=kind != "magic")
    return KINDS[kind](store, uri, conflict=conflict, options=options)


async def prepare(
    kind: str, conflict: str, store: UploadStore, bucket: str, dest: str, tmp: Path
) -> tuple[str, list[TaskCommitSummary]]:
    """Old data at ``dest``, then a job of TASKS committed tasks of one file each and one
    failed attempt; returns (job id, the tasks' commit summaries)."""
    for rel, data in OLD.items():
        await store.put_object(bucket, f"{dest}/{rel}", data)
    job = await committer(kind, store, f"s3://{bucket}/{dest}", conflict, tmp).setup_job()
    summaries = []
    for t in range(TASKS):
        ta = job.task_attempt(t)
        await ta.setup()
        async with ta.open(f"y={t % 3}/part-{t:05d}.csv") as out:
            await out.write(f"task {t}".encode())
        summaries.append(await ta.commit())
    dead = job.task_attempt(0, 7)  # never committed: the job commit aborts its upload
    await dead.setup()
    async with dead.open("y=0/dead.csv") as out:
        await out.write(b"dead")
    return job.job_id, summaries


async def on_the_fake(kind: str, conflict: str, tmp: Path) -> list[Request]:
    """The job's commit on the in-memory store with LATENCY per request: its requests."""
    store = MemoryStore(MemoryState("bkt"))
    job_id, summaries = await prepare(kind, conflict, store, "bkt", "out", tmp)
    job = await committer(kind, store, "s3://bkt/out", conflict, tmp).open_job(job_id)
    store.latency = LATENCY
    start = len(store.log)
    await job.commit(summaries)
    return store.log[start:]


async def on_moto(
    kind: str, conflict: str, s3: S3Target, proxy: FaultProxy, tmp: Path
) -> list[Request]:
    """The same job's commit through the proxy with LATENCY on every request."""
    dest = f"{s3.prefix}out"
    uri = f"s3://{s3.bucket}/{dest}"
    async with UploadEngine(s3.with_endpoint(proxy.url).engine_config()) as engine:
        job_id, summaries = await prepare(kind, conflict, engine, s3.bucket, dest, tmp)
        job = await committer(kind, engine, uri, conflict, tmp).open_job(job_id)
        proxy.add_rule(FaultRule(fault="latency", delay=LATENCY))
        proxy.reset()
        await job.commit(summaries)
        log = proxy.log
    data = s3.boto3_client().list_objects_v2(Bucket=s3.bucket, Prefix=f"{dest}/")["Contents"]
    names = {o["Key"][len(dest) + 1 :] for o in data}
    assert "_SUCCESS" in names and sum(n.startswith("y=") for n in names) >= TASKS
    return log


@pytest.mark.parametrize(
    ("kind", "conflict"), [("magic", "append"), ("staging", "replace")], ids=["append", "replace"]
)
async def test_moto_chains_at_most_one_request_more_than_the_fake(
    kind: str, conflict: str, moto_s3: S3Target, fault_proxy: ProxyFactory, tmp_path: Path
) -> None:
    fake = await on_the_fake(kind, conflict, tmp_path / "fake")
    proxy = fault_proxy(moto_s3.endpoint_url)
    wire = await on_moto(kind, conflict, moto_s3, proxy, tmp_path / "moto")
    print(f"\n{kind} {conflict}, {TASKS} tasks, {LATENCY * 1000:.0f} ms per request")
    print(f"  fake: {describe(fake)}")
    print(f"  moto: {describe(wire)}")
    assert {r.op for r in wire} >= {"CompleteMultipartUpload", "PutObject"}
    # nothing failed on the wire (a 404 is an answer: a record that is not there yet)
    assert {r.error for r in wire} <= {None, "HTTP 404"}, [(r.op, r.error) for r in wire]
    assert sequential_requests(wire) <= sequential_requests(fake) + 1, (
        f"moto: {describe(wire)}\nfake: {describe(fake)}"
    )
