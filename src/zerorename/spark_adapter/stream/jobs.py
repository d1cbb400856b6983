"""``zerorename jobs show|resume|abort`` of a streaming query's batch job: the query's log
and the destination are kept consistent, and the command says what Spark's next run of
the batch will do (the committers' CLI calls :func:`stream_job_action` through its hook;
:func:`~zerorename.spark_adapter.stream.log.in_log` decides, this module does the I/O).

A batch job is found by the query's note of it (``_zerorename_streams/<query>/jobs/``) or
by a log that names it. Then, by where the log has it:

- its intent (a driver died in its commit): ``resume`` finishes the commit without a
  ``_SUCCESS`` (the log records batches) and records the batch before the journal goes;
  ``abort`` rolls the job back, then drops the intent, so Spark's next run writes the
  batch again (a log whose intent names a job with no journal discards it: the same);
- committed by it, or its batch committed before the log's window (which job did is no
  longer known): ``resume`` finishes its cleanup (no file touched); ``abort`` is refused;
- its batch committed by another job, or not in the log: nothing of it counts; ``abort``
  removes it, ``resume`` is refused (it would publish the batch twice or outside the log).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from zerorename.committers import Destination, MagicCommitter
from zerorename.committers.commit.result import CommitRecords, RecordWrite
from zerorename.committers.errors import CommitterError, InvalidJobId
from zerorename.committers.objectstore import MARKER_CAP
from zerorename.committers.objectstore import UploadStore as Store
from zerorename.committers.paths import check_job_id
from zerorename.committers.store import gather, read_optional
from zerorename.spark_adapter.stream.log import (
    BatchEntry,
    InLog,
    StreamLog,
    in_log,
    jobs_prefix,
    log_key,
    started_job,
    started_key,
)
from zerorename.spark_adapter.stream.read import read_log, stream_queries
from zerorename.spark_adapter.stream.sink import STREAM_COMMIT, drop_job


@dataclass(frozen=True)
class StreamJobReply:
    """What this hook of ``zerorename jobs show|resume|abort`` did with a streaming query's
    batch job: for ``show``, what goes into its ``stream`` field; for ``resume``/``abort``,
    the lines to print (the command's ``jobargs.StreamJobs`` names this type)."""

    lines: tuple[str, ...] = ()
    show: dict[str, Any] | None = None


@dataclass(frozen=True)
class StreamJob:
    """A batch job of a query at a destination, and where the query's log has it."""

    query_id: str
    job_id: str
    batch: int | None
    log: StreamLog
    where: InLog


def _note_batch(data: bytes | None) -> int | None:
    """The batch a query's note of a job names (None: no note, or not readable)."""
    try:
        doc = json.loads(data) if data is not None else None
    except ValueError:
        return None
    batch = doc.get("batch") if isinstance(doc, dict) else None
    return batch if type(batch) is int and batch >= 0 else None


async def find_stream_job(store: Store, dest: Destination, job_id: str) -> StreamJob | None:
    """The query whose note or log names ``job_id`` (None: no stream's job). The id is
    compared in its canonical spelling, as the sink writes it (a batch's job id is a UUID:
    upper case or without hyphens names the same job; anything else is no stream's)."""
    try:
        job_id = check_job_id(job_id)
    except InvalidJobId:
        return None
    for query in await stream_queries(store, dest):
        note, found = await gather(
            read_optional(
                store,
                dest.bucket,
                started_key(dest.list_prefix, query, job_id),
                max_size=MARKER_CAP,  # a job note is a few hundred bytes, like a marker
            ),
            read_log(store, dest, query),
        )
        lg = found if found is not None else StreamLog(query)
        batch = _note_batch(note)
        if batch is None and lg.pending is not None and lg.pending.job_id == job_id:
            batch = lg.pending.batch
        if batch is None:
            batch = next((e.batch for e in lg.recent if e.job_id == job_id), None)
        where = in_log(lg, job_id, batch)
        if note is not None or where is not InLog.ABSENT:
            return StreamJob(query, job_id, batch, lg, where)
    return None


def _batch(sj: StreamJob) -> str:
    return f"batch {sj.batch}" if sj.batch is not None else "a batch"


def next_run(sj: StreamJob) -> str:
    """What Spark's next run of the batch does, as things stand (pure)."""
    b = _batch(sj)
    if sj.where is InLog.INTENT:
        return (
            f"finishes {b} with this job if its journal is there (resume), else writes {b} "
            "again with a new job"
        )
    if sj.where is InLog.COMMITTED:
        return f"finds {b} committed and writes nothing twice"
    if sj.where is InLog.SUPERSEDED:
        return f"finds {b} committed (by another job): this job's files never count"
    if sj.where is InLog.OLD:
        return f"finds {b} committed (by this job or another: older than the log's window)"
    return f"writes {b} with a new job and cleans this one up"


async def _write_log(store: Store, dest: Destination, new: StreamLog) -> None:
    await store.put_object(
        dest.bucket,
        log_key(dest.list_prefix, new.query_id),
        new.to_json(),
        content_type="application/json",
    )


async def _forget(store: Store, dest: Destination, sj: StreamJob) -> None:
    await drop_job(store, dest, sj.query_id, sj.job_id)  # its note, marker, late uploads


async def _resume(store: Store, dest: Destination, sj: StreamJob) -> list[str]:
    head = f"job {sj.job_id} is streaming query {sj.query_id}'s {_batch(sj)} job"
    job = MagicCommitter(store, dest.uri, conflict="append", options=STREAM_COMMIT).job(sj.job_id)
    if sj.where in (InLog.COMMITTED, InLog.OLD):
        await job.release()  # deletes records and aborts leftover uploads, never data
        await _forget(store, dest, sj)
        return [f"{head}: its batch is committed already; its records cleaned up, no file touched"]
    if sj.where is not InLog.INTENT:
        why = (
            f"{_batch(sj)} is committed by another job"
            if sj.where is InLog.SUPERSEDED
            else "the stream log does not name it (its commit never began)"
        )
        raise CommitterError(
            f"{head}: {why}; resuming it would publish the batch outside the log; "
            f"`zerorename jobs abort` removes it (Spark's next run {next_run(sj)})"
        )
    intent = sj.log.pending
    assert intent is not None
    entry = BatchEntry(
        intent.batch, sj.job_id, intent.files, intent.rows, intent.bytes, time.time()
    )
    # the batch is recorded before the release deletes the journal (as the sink does)
    done = sj.log.with_commit(entry)
    record = RecordWrite(log_key(dest.list_prefix, done.query_id), done.to_json())
    res = await job.resume(records=CommitRecords(with_succeeded=(record,)))
    await _forget(store, dest, sj)
    return [
        f"{head}: committed, {res.files} files, {res.bytes} bytes; the stream log records "
        f"batch {intent.batch} (no _SUCCESS: the log records a stream's batches); Spark's "
        f"next run of batch {intent.batch}, if any, finds it committed and writes nothing twice"
    ]


async def _abort(store: Store, dest: Destination, sj: StreamJob) -> list[str]:
    head = f"job {sj.job_id} is streaming query {sj.query_id}'s {_batch(sj)} job"
    if sj.where in (InLog.COMMITTED, InLog.OLD):
        raise CommitterError(
            f"{head} and the stream log records it as committed (or cannot tell: the batch "
            "is older than its window): abort would delete a committed batch; "
            "`zerorename jobs resume` finishes its cleanup"
        )
    job = MagicCommitter(store, dest.uri, conflict="append", options=STREAM_COMMIT).job(sj.job_id)
    res = await job.abort()
    lines = [
        f"job {res.job_id} aborted: {res.uploads_aborted} uploads aborted, "
        f"{res.objects_deleted} objects deleted"
    ]
    if sj.where is InLog.INTENT:
        # the job is gone before the log stops naming it: a log whose intent names a job
        # with no journal discards it, so a crash in between changes nothing
        now = await read_log(store, dest, sj.query_id)
        if now is not None and now.pending is not None and now.pending.job_id == sj.job_id:
            await _write_log(store, dest, now.without_intent())
        lines.append(
            f"{head}: its commit is dropped from the stream log; Spark's next run of "
            f"{_batch(sj)} writes it again with a new job"
        )
    else:
        lines.append(f"{head}: the stream log does not count it; Spark's next run is unchanged")
    await _forget(store, dest, sj)
    return lines


async def stream_job_ids(store: Store, dest: Destination) -> frozenset[str]:
    """Every job a query at ``dest`` noted or its log names (its intent, or a batch it
    recorded): what ``jobs list`` shows as ``stream``, as ``jobs show`` does."""
    queries = await stream_queries(store, dest)

    async def of(query: str) -> set[str]:
        prefix = jobs_prefix(dest.list_prefix, query)
        ids = set()
        async for obj in store.list_objects(dest.bucket, prefix):
            job = started_job(prefix, obj.key)
            if job is not None:
                ids.add(job)
        lg = await read_log(store, dest, query)
        if lg is not None:
            if lg.pending is not None:
                ids.add(lg.pending.job_id)
            ids.update(e.job_id for e in lg.recent)
        return ids

    found: set[str] = set()
    for ids in await gather(*(of(q) for q in queries)):
        found |= ids
    return frozenset(found)


async def stream_job_action(
    store: Store, dest: Destination, job_id: str, action: str
) -> StreamJobReply | None:
    """``jobs show|resume|abort`` of ``job_id`` if it is a stream batch's job (else None:
    the committers' CLI goes on as for any job)."""
    sj = await find_stream_job(store, dest, job_id)
    if sj is None:
        return None
    if action == "show":
        info: dict[str, Any] = {
            "query": sj.query_id,
            "batch": sj.batch,
            "inLog": sj.where.value,
            "nextRun": next_run(sj),
        }
        return StreamJobReply(show=info)
    if action == "resume":
        return StreamJobReply(lines=tuple(await _resume(store, dest, sj)))
    return StreamJobReply(lines=tuple(await _abort(store, dest, sj)))
