"""Dynamic partition overwrite on the in-memory store, through the committers' public API
and the Spark adapter's commit hook: a magic or directory job whose replace is judged by
partition deletes exactly the older objects of the partitions its tasks' records name;
every other object stays byte for byte. A job set up before the session's setting was
known (the data source's case) is committed by partition with its ``job.json`` rewritten
before the first complete, so a crash anywhere ends, after resume or abort, in the clean
commit's state or in the state before the job. No server, no Spark."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from zerorename.committers import (
    CommitOptions,
    CommitterError,
    JobNotFound,
    JournalError,
    MagicCommitter,
    PartitionedCommitter,
    StagingCommitter,
    TaskCommitSummary,
)
from zerorename.engine.results import ObjectInfo
from zerorename.spark_adapter.write import record_scope
from zerorename.testing.memfaults import ProcessCrashed
from zerorename.testing.memstore import MemoryState, MemoryStore

B = "bkt"
DEST = "out"
URI = f"s3://{B}/{DEST}"
KINDS: dict[str, Any] = {"magic": MagicCommitter, "directory": StagingCommitter}
#: before the job: two partitions it does not write (day=10 shares day=1's first
#: characters), the one it writes, a file at the root, a sibling destination's object
OLD = {
    f"{DEST}/day=0/old0.parquet": b"old0",
    f"{DEST}/day=1/old1.parquet": b"old1",
    f"{DEST}/day=10/old10.parquet": b"old10",
    f"{DEST}/root.parquet": b"root",
    "out10/day=1/x.parquet": b"x",
}


def committer(kind: str, store: MemoryStore, tmp: Path, scope: str | None) -> Any:
    opts = CommitOptions(staging_dir=tmp, progress_interval=0.05)
    return KINDS[kind](store, URI, conflict="replace", options=opts, scope=scope)


def data_of(state: MemoryState) -> dict[str, bytes]:
    return {
        k: v
        for k, v in state.objects(B).items()
        if "__magic" not in k and not k.endswith("/_SUCCESS")
    }


async def prepare(
    kind: str, tmp: Path, scope: str | None, rels: tuple[str, ...] = ("day=1/a{t}.parquet",)
) -> tuple[MemoryState, str, list[TaskCommitSummary], dict[str, bytes]]:
    """The older objects, then a job set up with ``scope`` whose two tasks committed
    ``rels`` each (``{t}``: the task); returns the state, the job id, the summaries and
    the job's files."""
    state = MemoryState(B)
    store = MemoryStore(state)
    for k, v in OLD.items():
        await store.put_object(B, k, v)
    job = await committer(kind, store, tmp, scope).setup_job()
    new: dict[str, bytes] = {}
    summaries = []
    for t in range(2):
        ta = job.task_attempt(t)
        await ta.setup()
        for rel in (r.format(t=t) for r in rels):
            data = f"task {t} {rel}".encode()
            async with ta.open(rel) as out:
                await out.write(data)
            new[f"{DEST}/{ta.final_rel(rel)}"] = data
        summaries.append(await ta.commit())
    return state, job.job_id, summaries, new


def dynamic_result(new: dict[str, bytes]) -> dict[str, bytes]:
    """What Spark's dynamic overwrite leaves: every object but day=1's older one."""
    return {**{k: v for k, v in OLD.items() if "/day=1/old1" not in k}, **new}


@pytest.mark.parametrize("kind", list(KINDS))
async def test_replace_by_partition_keeps_every_other_partition(kind: str, tmp_path: Path) -> None:
    state, job_id, summaries, new = await prepare(kind, tmp_path, "partitions")
    job = await committer(kind, MemoryStore(state), tmp_path, None).open_job(job_id)
    assert job.scope == "partitions"  # job.json holds it: any process opens the job so
    await job.commit(summaries)
    assert data_of(state) == dynamic_result(new)
    success = json.loads(state.objects(B)[f"{DEST}/_SUCCESS"])
    assert success["diagnostics"]["scope"] == "partitions"


@pytest.mark.parametrize("cls", [MagicCommitter, StagingCommitter, PartitionedCommitter])
async def test_a_replace_by_partition_of_no_file_keeps_everything(cls: Any, tmp_path: Path) -> None:
    """A job that wrote nothing (an overwrite with no rows) touches no partition: nothing
    replaced, the job committed (it was refused, its journal left behind: "the replace plan
    is missing", with the partitioned committer too)."""
    state = MemoryState(B)
    store = MemoryStore(state)
    for k, v in OLD.items():
        await store.put_object(B, k, v)
    opts = CommitOptions(staging_dir=tmp_path)
    job = await cls(store, URI, conflict="replace", options=opts, scope="partitions").setup_job()
    ta = job.task_attempt(0)
    await ta.setup()
    await job.commit([await ta.commit()])
    assert data_of(state) == OLD
    assert [k for k in state.objects(B) if "__magic" in k] == []


@pytest.mark.parametrize("kind", list(KINDS))
async def test_replace_of_the_destination_is_as_before(kind: str, tmp_path: Path) -> None:
    """Static (and any committer without a scope given): the whole destination."""
    state, job_id, summaries, new = await prepare(kind, tmp_path, None)
    job = await committer(kind, MemoryStore(state), tmp_path, None).open_job(job_id)
    assert job.scope == "destination"
    await job.commit(summaries)
    assert data_of(state) == {"out10/day=1/x.parquet": b"x", **new}


@pytest.mark.parametrize("loose", ["loose{t}.parquet", "sub/loose{t}.parquet"])
async def test_a_file_outside_a_partition_refuses_a_replace_by_partition(
    loose: str, tmp_path: Path
) -> None:
    """Set up before the scope was known, a task wrote at the root or in a directory that
    is no ``k=v`` partition: the commit by partition refuses before anything is completed
    or deleted (its partitions record could not name that directory)."""
    state, job_id, summaries, _ = await prepare(
        "magic", tmp_path, None, ("day=1/a{t}.parquet", loose)
    )
    before = data_of(state)
    job = committer("magic", MemoryStore(state), tmp_path, "partitions").job(job_id)
    with pytest.raises(CommitterError, match="k=v"):
        await job.commit(summaries)
    assert data_of(state) == before


def crashed(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return any(crashed(e) for e in exc.exceptions)
    return isinstance(exc, ProcessCrashed) or (exc.__cause__ is not None and crashed(exc.__cause__))


async def dynamic_commit(kind: str, store: MemoryStore, tmp: Path, job_id: str, s: Any) -> None:
    """The data source's commit of a job set up as static whose tasks saw dynamic: the
    handle by partition, job.json rewritten with the journal."""
    job = committer(kind, store, tmp, "partitions").job(job_id)
    await job.commit(s, records=record_scope(job, None))


async def test_the_commit_records_the_scope_before_the_first_complete(tmp_path: Path) -> None:
    state, job_id, summaries, new = await prepare("magic", tmp_path, None)
    store = MemoryStore(state)
    store.crash_at(1, op="CompleteMultipartUpload")
    with pytest.raises(BaseException) as died:
        await dynamic_commit("magic", store, tmp_path, job_id, summaries)
    assert crashed(died.value)
    job = await committer("magic", MemoryStore(state), tmp_path, None).open_job(job_id)
    assert job.scope == "partitions"  # a new process resumes what was being committed
    await job.resume()
    assert data_of(state) == dynamic_result(new)


@pytest.mark.parametrize("after", [False, True], ids=["before-effect", "after-effect"])
@pytest.mark.parametrize("kind", list(KINDS))
async def test_crash_at_every_request_then_resume_or_abort(
    kind: str, after: bool, tmp_path: Path
) -> None:
    state0, job_id, summaries, new = await prepare(kind, tmp_path, None)
    clean = state0.copy()
    counted = MemoryStore(clean)
    await dynamic_commit(kind, counted, tmp_path, job_id, summaries)
    assert data_of(clean) == dynamic_result(new)
    ends = {"committed": 0, "aborted": 0}
    for n in range(1, counted.requests + 1):
        state = state0.copy()
        dying = MemoryStore(state)
        dying.crash_at(n, after=after)
        with pytest.raises(BaseException) as died:
            await dynamic_commit(kind, dying, tmp_path, job_id, summaries)
        assert crashed(died.value), f"crash at request {n}: {died.value!r}"
        # a new process: resume the journal, or abort (no journal yet: Spark aborts the
        # write; a journal cut short before its first complete: resume refuses)
        try:
            job = await committer(kind, MemoryStore(state), tmp_path, None).open_job(job_id)
        except JobNotFound:
            job = None
        if job is not None:
            status = await job.status()
            try:
                if status.journal is None:
                    raise JournalError("no journal")
                await job.resume()
            except JournalError:
                await job.abort()
        data = data_of(state)
        assert data in (dynamic_result(new), OLD), f"crash at request {n}"
        ends["committed" if data != OLD else "aborted"] += 1
        assert [k for k, _ in state.pending(B)] == []
        assert [k for k in state.objects(B) if f"__magic_job-{job_id}" in k] == []
    assert ends["committed"] and ends["aborted"]


class WideListingStore(MemoryStore):
    """A gateway that drops a listed prefix's trailing '/' ("out/day=1/" is listed as
    "out/day=1"), so a listing of day=1/ also returns day=10's objects (found by a review)."""

    async def list_objects(  # type: ignore[override]
        self, bucket: str, prefix: str = "", *, delimiter: str | None = None
    ) -> AsyncIterator[ObjectInfo]:
        async for o in super().list_objects(bucket, prefix.rstrip("/"), delimiter=delimiter):
            yield o


@pytest.mark.parametrize("kind", ["magic", "directory"])
async def test_a_listing_wider_than_asked_never_widens_the_replace(
    kind: str, tmp_path: Path
) -> None:
    state, job_id, summaries, new = await prepare(kind, tmp_path, None)
    await dynamic_commit(kind, WideListingStore(state), tmp_path, job_id, summaries)
    assert f"{DEST}/day=10/old10.parquet" in data_of(state)
    assert data_of(state) == dynamic_result(new)
