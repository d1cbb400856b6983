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

The commit of batch B (:mod:`.log` decides; this module does the I/O): read the
query's log; a B already committed aborts this run's uploads (success, nothing twice);
otherwise the log stores the intent (job, pendingsets), the job commits from the accepted
attempts' summaries (no listing, no ``_SUCCESS``: the log is the record), and the log
records B. A driver that died during a commit leaves the intent: the next commit of B
resumes, adopts or discards that job first.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from zerorename.spark_adapter.commitopts import refuse_for_stream
from zerorename.spark_adapter.errors import CommitMessageError, OptionError
from zerorename.spark_adapter.options import WriteOptions
from zerorename.spark_adapter.stream.log import check_query_id, stream_job_id

if TYPE_CHECKING:
    # pyarrow and the file writers load with a task's first batch (TaskWriter._start): the
    # process that commits a micro-batch needs neither. The task writer (stream.task), the
    # bridge and the sink (committers, engine, aiohttp, botocore) load where a task writes
    # or a batch commits: Spark's planning process that builds and pickles this writer
    # (write_into_data_source) needs none of them.
    import pyarrow as pa

    from zerorename.spark_adapter.write import TaskResult

log = logging.getLogger("zerorename.spark")

QUERY_ID_KEY = "sql.streaming.queryId"
BATCH_ID_KEY = "streaming.sql.batchId"


def check_stream_options(opts: WriteOptions, overwrite: bool) -> None:
    """Refuse what a stream cannot do: output modes but append, conflicts but append."""
    if overwrite:
        raise OptionError(
            "zerorename streams support outputMode('append') only; "
            "complete/update would rewrite the destination every batch"
        )
    refuse_for_stream(opts.commit)
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


class ZeroRenameStreamWriter(DataSourceStreamArrowWriter):  # type: ignore[misc]
    """Made per micro-batch (planning) and per commit; holds options and a random token."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts
        self.token = str(uuid.uuid4())

    def __reduce__(self) -> Any:
        """Unpickled through a loader that names the fix when a worker lacks zerorename."""
        from zerorename.spark_adapter.workerpython import guarded_reduce

        return guarded_reduce(self)

    def checkpoint(self, stage: str, batch_id: int, partition: int, attempt: int) -> None:
        """A hook for fault tests: "committed" (a task's attempt) and "batch_committed"
        (the sink committed the batch, Spark has not recorded it). Does nothing here."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StreamCommitMessage:
        from zerorename.spark_adapter.stream.task import StreamTaskWriter

        query_id, batch_id, partition, attempt, task_attempt_id = _task_context()
        job_id = stream_job_id(query_id, self.token, batch_id)
        writer = StreamTaskWriter(self.opts, job_id, partition, attempt, task_attempt_id)
        writer.query_id, writer.batch_id = query_id, batch_id
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
        from zerorename.spark_adapter.bridge import get_bridge
        from zerorename.spark_adapter.stream.sink import StreamSink

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
        from zerorename.spark_adapter.bridge import get_bridge
        from zerorename.spark_adapter.stream.sink import StreamSink

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
    "StreamCommitMessage",
    "ZeroRenameStreamWriter",
    "batch_of",
    "check_stream_options",
    "stream_job_id",
]
