"""The Structured Streaming sink: ``df.writeStream.format("zerorename")``, one zerorename
job per micro-batch, exactly once across restarts.

Where each part runs (Spark 4.1+, observed on 4.3): for every micro-batch Spark calls
``streamWriter()`` in a planning Python worker and pickles the writer to the tasks, then
calls ``streamWriter()`` again in a commit worker and ``commit(messages, batchId)`` (or
``abort``) on that fresh writer. So nothing is set up at planning: each writer carries a
random token; a task learns the query id and batch id from Spark's local properties
(``sql.streaming.queryId``, ``streaming.sql.batchId``) and derives the batch's job id
from (query, token, batch), the same in every task of that batch and new for every run of
it. The first task that writes sets the job up; the commit learns the job from the
messages. The commit worker is reused across batches, so its engine and connections stay
warm.

The commit of batch B (:mod:`streamlog` decides; this module does the I/O): read the
query's log; a B already committed aborts this run's uploads (success, nothing twice);
otherwise the log stores the intent (job, pendingsets), the job commits from the accepted
attempts' summaries (no listing, no ``_SUCCESS``: the log is the record), and the log
records B. A driver that died during a commit leaves the intent: the next commit of B
resumes, adopts or discards that job first.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from zerorename.committers import (
    CommitOptions,
    Committer,
    CommitterError,
    Destination,
    Job,
    TaskCommitSummary,
    committer_class,
)
from zerorename.committers.paths import JobLayout
from zerorename.committers.store import read_optional
from zerorename.spark_adapter.bridge import get_bridge
from zerorename.spark_adapter.errors import CommitMessageError, OptionError
from zerorename.spark_adapter.jobs import TaskResult, TaskWriter, engine_for
from zerorename.spark_adapter.options import WriteOptions
from zerorename.spark_adapter.router import BatchRouter
from zerorename.spark_adapter.streamlog import (
    BatchEntry,
    Intent,
    Recovery,
    Step,
    StreamLog,
    check_query_id,
    decide,
    log_key,
    parse_log,
    recover,
)

log = logging.getLogger("zerorename.spark")

#: the namespace of batch job ids (uuid5 of query id, writer token and batch id)
STREAM_NAMESPACE = uuid.UUID("6f6c2f1e-6d0b-4c55-9a55-7a65726f7265")
QUERY_ID_KEY = "sql.streaming.queryId"
BATCH_ID_KEY = "streaming.sql.batchId"
#: a batch's job: no _SUCCESS (the stream log records batches) and no rollback on a failed
#: commit (its journal stays, so the batch's next commit resumes it: nothing twice)
STREAM_COMMIT = CommitOptions(write_success=False, rollback_on_failure=False)


def stream_job_id(query_id: str, token: str, batch_id: int) -> str:
    """The job id of one run of a batch: every task of the batch derives the same one."""
    return str(uuid.uuid5(STREAM_NAMESPACE, f"{query_id}/{token}/{batch_id}"))


def check_stream_options(opts: WriteOptions, overwrite: bool) -> None:
    """Refuse what a stream cannot do: output modes but append, conflicts but append."""
    if overwrite:
        raise OptionError(
            "zerorename streams support outputMode('append') only; "
            "complete/update would rewrite the destination every batch"
        )
    if opts.conflict != "append":
        raise OptionError(
            f"conflict={opts.conflict!r} is not for streams: every batch appends "
            "(drop the conflict option)"
        )


@dataclass
class StreamCommitMessage(WriterCommitMessage):  # type: ignore[misc]
    """One task attempt's result in one micro-batch (small)."""

    result: TaskResult
    query_id: str
    batch_id: int
    job_id: str


@dataclass(frozen=True)
class BatchOutcome:
    """What the commit of one micro-batch did."""

    query_id: str
    batch_id: int
    job_id: str
    #: committed | duplicate (aborted: the batch was committed before) | adopted | empty
    action: str
    files: int
    rows: int
    bytes: int
    seconds: float


def stream_committer(opts: WriteOptions) -> Committer:
    cls = committer_class(opts.committer)
    return cls(engine_for(opts), opts.path, conflict="append", options=STREAM_COMMIT)


async def _ensure_job(committer: Committer, job_id: str) -> None:
    """Set the batch's job up unless another task of the batch did (they race: the marker
    is the same whoever writes it)."""
    job = committer.job(job_id)
    if await job.is_active():
        return
    try:
        await committer.setup_job(job_id)
    except CommitterError:
        if not await job.is_active():
            raise


class StreamTaskWriter(TaskWriter):
    """A task attempt of one micro-batch: sets the batch's job up on its first rows."""

    def _start(self, schema: pa.Schema) -> BatchRouter:
        self._bridge.run(_ensure_job(stream_committer(self.opts), self.job_id))
        return super()._start(schema)


def _task_context() -> tuple[str, int, int, int, int]:
    """(query id, batch id, partition, attempt number, task attempt id) of this task."""
    from pyspark import TaskContext

    tc = TaskContext.get()
    if tc is None:
        raise CommitMessageError("a zerorename stream writer ran outside a Spark task")
    query = tc.getLocalProperty(QUERY_ID_KEY)
    batch = tc.getLocalProperty(BATCH_ID_KEY)
    if query is None or batch is None:
        raise CommitMessageError(
            "Spark did not say which streaming query and batch this task writes "
            f"({QUERY_ID_KEY}={query!r}, {BATCH_ID_KEY}={batch!r}); not writing"
        )
    return (
        check_query_id(query),
        int(batch),
        tc.partitionId(),
        tc.attemptNumber(),
        tc.taskAttemptId(),
    )


def batch_of(messages: Sequence[Any], batch_id: int) -> tuple[str, str, list[TaskResult]] | None:
    """(query id, job id, accepted results) from Spark's messages, checked: one job, this
    batch, one attempt per partition. None when the batch had no task."""
    got = [m for m in messages if isinstance(m, StreamCommitMessage)]
    if len(got) != len(messages):
        raise CommitMessageError(f"batch {batch_id}: a task has no commit message; not committing")
    if not got:
        return None
    keys = {(m.query_id, m.batch_id, m.job_id) for m in got}
    if len(keys) != 1:
        raise CommitMessageError(
            f"batch {batch_id}: messages of {len(keys)} jobs or batches; not committing"
        )
    query_id, b, job_id = keys.pop()
    if b != batch_id:
        raise CommitMessageError(f"Spark commits batch {batch_id} with messages of batch {b}")
    parts = [m.result.partition for m in got]
    if len(set(parts)) != len(parts):
        raise CommitMessageError(f"batch {batch_id}: two accepted attempts of one partition")
    return check_query_id(query_id), job_id, [m.result for m in got]


class StreamSink:
    """The driver side of one query's micro-batches at one destination (async I/O)."""

    def __init__(self, opts: WriteOptions, query_id: str) -> None:
        self.opts = opts
        self.query_id = query_id
        self.committer = stream_committer(opts)
        self.dest: Destination = self.committer.dest
        self.key = log_key(self.dest.list_prefix, query_id)

    @property
    def store(self) -> Any:
        return self.committer.engine

    async def read_log(self) -> StreamLog:
        data = await read_optional(self.store, self.dest.bucket, self.key)
        if data is None:
            return StreamLog(self.query_id)
        prefix = JobLayout(self.dest, "{job}").pendingsets_dir
        return parse_log(
            data,
            query_id=self.query_id,
            where=self.dest.uri_of(self.key),
            pendingset_prefix=prefix,
        )

    async def write_log(self, new: StreamLog) -> None:
        await self.store.put_object(
            self.dest.bucket, self.key, new.to_json(), content_type="application/json"
        )

    async def _present(self, job: Job, names: Sequence[str]) -> frozenset[str]:
        found = set()
        async for obj in self.store.list_objects(self.dest.bucket, job.layout.pendingsets_dir):
            found.add(obj.key)
        return frozenset(found & set(names))

    async def _settle(self, log_: StreamLog, job_id: str) -> tuple[StreamLog, BatchEntry | None]:
        """A commit of the intent's batch found another run's intent: resume, adopt or
        discard that job. Returns the log to go on from and the entry when it was adopted."""
        intent = log_.pending
        assert intent is not None
        job = self.committer.job(intent.job_id)
        status = await job.status()
        present = await self._present(job, intent.pendingsets)
        fate = recover(intent, journal=status.journal is not None, present=present)
        log.warning(
            "zerorename stream %s: batch %d was being committed by job %s (%s); %s",
            self.query_id,
            intent.batch,
            intent.job_id,
            "journal" if status.journal is not None else f"{len(present)} pendingsets left",
            fate.value,
        )
        if fate is Recovery.DISCARD:
            if intent.job_id != job_id:
                await job.abort()
            return log_.without_intent(), None
        if fate is Recovery.RESUME:
            await job.resume()
        entry = BatchEntry(
            intent.batch, intent.job_id, intent.files, intent.rows, intent.bytes, time.time()
        )
        return log_.with_commit(entry), entry

    async def commit(
        self, batch_id: int, job_id: str, results: Sequence[TaskResult]
    ) -> BatchOutcome:
        t0 = time.monotonic()
        summaries = [TaskCommitSummary.from_json(r.summary) for r in results if r.summary]
        rows = sum(r.rows for r in results)

        def outcome(action: str, files: int, n_rows: int, n_bytes: int) -> BatchOutcome:
            return BatchOutcome(
                self.query_id,
                batch_id,
                job_id,
                action,
                files,
                n_rows,
                n_bytes,
                time.monotonic() - t0,
            )

        if not summaries:
            return outcome("empty", 0, rows, 0)
        current = await self.read_log()
        step = decide(current, batch_id, job_id)
        if step is Step.RECOVER:
            current, adopted = await self._settle(current, job_id)
            if adopted is not None:
                await self.write_log(current)
                if adopted.job_id != job_id:
                    await self.committer.job(job_id).abort()
                return outcome("adopted", adopted.files, adopted.rows, adopted.bytes)
        elif step is Step.DUPLICATE:
            await self.committer.job(job_id).abort()
            return outcome("duplicate", 0, 0, 0)
        job = self.committer.job(job_id)
        sets = tuple(sorted(Destination.parse(s.pendingset).prefix for s in summaries))
        files, n_bytes = sum(s.files for s in summaries), sum(s.bytes for s in summaries)
        await self.write_log(
            current.with_intent(Intent(batch_id, job_id, sets, files, rows, n_bytes))
        )
        result = await job.commit(summaries, extra_metrics={"rows": rows, "batch": batch_id})
        entry = BatchEntry(batch_id, job_id, result.files, rows, result.bytes, time.time())
        await self.write_log(current.with_commit(entry))
        return outcome("committed", result.files, rows, result.bytes)

    async def abort(self, batch_id: int, job_id: str) -> None:
        """Abort this run's job of the batch, unless the log says it is (being) committed:
        Spark also aborts after a commit that raised, which the batch's next run settles."""
        current = await self.read_log()
        p = current.pending
        if (p is not None and p.job_id == job_id) or any(
            e.job_id == job_id for e in current.recent
        ):
            log.warning(
                "zerorename stream %s: batch %d's job %s is in the log; not aborting it",
                self.query_id,
                batch_id,
                job_id,
            )
            return
        await self.committer.job(job_id).abort()


class ZeroRenameStreamWriter(DataSourceStreamArrowWriter):  # type: ignore[misc]
    """Made per micro-batch (planning) and per commit; holds options and a random token."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts
        self.token = str(uuid.uuid4())

    def checkpoint(self, stage: str, batch_id: int, partition: int, attempt: int) -> None:
        """A hook for fault tests: "committed" (a task's attempt) and "batch_committed"
        (the sink committed the batch, Spark has not recorded it). Does nothing here."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StreamCommitMessage:
        query_id, batch_id, partition, attempt, task_attempt_id = _task_context()
        job_id = stream_job_id(query_id, self.token, batch_id)
        writer = StreamTaskWriter(self.opts, job_id, partition, attempt, task_attempt_id)
        try:
            for batch in iterator:
                writer.write(batch)
            result = writer.commit()
            self.checkpoint("committed", batch_id, partition, attempt)
        except BaseException:
            writer.abort()
            raise
        return StreamCommitMessage(result, query_id, batch_id, job_id)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        got = batch_of(messages, batchId)
        if got is None:
            return
        query_id, job_id, results = got
        sink = StreamSink(self.opts, query_id)
        out = get_bridge().run(sink.commit(batchId, job_id, results))
        log.info(
            "zerorename stream %s batch %d: %s, job %s, %d files, %d rows, %d bytes in %.3fs",
            query_id,
            batchId,
            out.action,
            job_id,
            out.files,
            out.rows,
            out.bytes,
            out.seconds,
        )
        self.checkpoint("batch_committed", batchId, -1, -1)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        got = [m for m in messages if isinstance(m, StreamCommitMessage)]
        jobs = {(m.query_id, m.job_id) for m in got}
        for query_id, job_id in sorted(jobs):
            get_bridge().run(StreamSink(self.opts, check_query_id(query_id)).abort(batchId, job_id))
        log.info(
            "zerorename stream batch %d aborted (%d jobs, %d of %d tasks had finished)",
            batchId,
            len(jobs),
            len(got),
            len(messages),
        )


__all__ = [
    "BatchOutcome",
    "StreamCommitMessage",
    "StreamSink",
    "ZeroRenameStreamWriter",
    "batch_of",
    "check_stream_options",
    "stream_job_id",
]
