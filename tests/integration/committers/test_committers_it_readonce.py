"""Job commit reads each pendingset from the store once (the scan spools it; the completion
works from what the scan kept), whichever way the scan kept it: parsed uploads, bytes in
the spill file, or a pendingset too large for memory parsed streaming. A truncated
pendingset still refuses the job before anything is completed. Requests are counted on
the wire by a FaultProxy (without rules it only forwards)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from committer_helpers import committer, data_objects, dest_prefix, dest_uri, uploads, write

from zerorename.committers import JobCommitError, TaskCommitSummary
from zerorename.committers.commit import spool as spool_mod
from zerorename.engine import UploadEngine
from zerorename.servers.faultproxy import FaultProxy
from zerorename.servers.targets import S3Target

#: tests of zerorename's own logic, which no store changes, run on moto only (the rule in
#: tests/conftest.py's docstring)
MOTO = pytest.mark.parametrize("s3", ["moto"], indirect=True)

TASKS = 4
FILES = 6

#: (KEEP_PARSED, SPOOL_MEMORY): everything kept parsed; everything parsed again from the
#: spill file (a line at a time); every pendingset "large", parsed streaming from disk
SPOOLING = {
    "kept": (None, None),
    "spilled": (0, None),
    "streamed": (0, 64),
}


def spooling(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    keep, memory = SPOOLING[mode]
    if keep is not None:
        monkeypatch.setattr(spool_mod, "KEEP_PARSED", keep)
    if memory is not None:
        monkeypatch.setattr(spool_mod, "SPOOL_MEMORY", memory)


@asynccontextmanager
async def tasks_committed(
    s3: S3Target, fault_proxy: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, mode: str
) -> AsyncIterator[tuple[FaultProxy, UploadEngine, Any, list[TaskCommitSummary]]]:
    """A magic job whose tasks committed, with an engine going through a FaultProxy."""
    spooling(monkeypatch, mode)
    assert s3.endpoint_url is not None
    proxy: FaultProxy = fault_proxy(s3.endpoint_url)
    async with UploadEngine(s3.with_endpoint(proxy.url).engine_config()) as eng:
        job = await committer("magic", eng, dest_uri(s3)).setup_job()
        yield proxy, eng, job, await run_tasks(job)


def expected_files() -> dict[str, bytes]:
    return {
        f"t{t}/part {i} ü#+%.bin": f"task {t} file {i}".encode() * (i + 1)
        for t in range(TASKS)
        for i in range(FILES)
    }


async def run_tasks(job: Any) -> list[TaskCommitSummary]:
    summaries = []
    for t in range(TASKS):
        ta = job.task_attempt(t)
        await ta.setup()
        for i in range(FILES):
            rel = f"t{t}/part {i} ü#+%.bin"
            await write(ta, rel, expected_files()[rel])
        summaries.append(await ta.commit())
    return summaries


def pendingset_reads(proxy: FaultProxy) -> dict[str, int]:
    reads: dict[str, int] = {}
    for r in proxy.stats.log():
        if r.operation == "GetObject" and ".pendingset" in r.path:
            reads[r.path] = reads.get(r.path, 0) + 1
    return reads


@pytest.mark.parametrize("mode", sorted(SPOOLING))
@MOTO
async def test_job_commit_reads_each_pendingset_once(
    s3: S3Target, fault_proxy: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    prefix = dest_prefix(s3)
    async with tasks_committed(s3, fault_proxy, monkeypatch, mode) as (proxy, _, job, summaries):
        proxy.stats.reset()
        result = await job.commit(summaries)
    assert result.files == TASKS * FILES
    reads = pendingset_reads(proxy)
    assert len(reads) == TASKS and set(reads.values()) == {1}, reads
    assert proxy.stats.requests("CompleteMultipartUpload") == TASKS * FILES
    want = {
        rel.replace(".bin", f"-{job.job_id}.bin"): data for rel, data in expected_files().items()
    }
    assert data_objects(s3, prefix) == want
    assert uploads(s3, prefix) == []


@pytest.mark.parametrize("mode", sorted(SPOOLING))
@MOTO
async def test_truncated_last_pendingset_refuses_before_any_complete(
    s3: S3Target, fault_proxy: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """The plan's last pendingset is cut short: the earlier ones parse and are kept, but
    nothing is completed, the error names the object, and nothing is changed (a bad
    record is no reason to roll back): the uploads wait for a fixed pendingset or an
    abort."""
    prefix = dest_prefix(s3)
    async with tasks_committed(s3, fault_proxy, monkeypatch, mode) as (proxy, eng, job, summaries):
        last = max(summaries, key=lambda s: s.task_id)
        key = last.pendingset.split("/", 3)[3]
        whole = await eng.get_object(s3.bucket, key)
        await eng.put_object(s3.bucket, key, whole[: len(whole) - 40])
        proxy.stats.reset()
        pending = uploads(s3, prefix)
        with pytest.raises(JobCommitError) as ei:
            await job.commit(summaries)
        assert not ei.value.rolled_back and await job.is_active()
        assert last.pendingset in str(ei.value) and "truncated" in str(ei.value)
        assert proxy.stats.requests("CompleteMultipartUpload") == 0
        assert proxy.stats.requests("AbortMultipartUpload") == 0
        assert data_objects(s3, prefix) == {}
        assert sorted(uploads(s3, prefix)) == sorted(pending) and pending
        await job.abort()
    assert uploads(s3, prefix) == []
