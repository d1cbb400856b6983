"""The ``zerorename`` Python data source: ``df.write.format("zerorename")``.

    from zerorename.spark_adapter import register, read_success
    register(spark)
    (df.write.format("zerorename").mode("append")          # or "overwrite"
       .option("partitionBy", "year,month")                # Spark 4 refuses .partitionBy()
       .option("endpoint", "http://127.0.0.1:9000")        # for S3-compatible stores
       .save("s3://bucket/table"))
    print(read_success("s3://bucket/table"))              # files, bytes, rows, duration

Where each part runs (Spark 4): ``writer()`` in a Python worker at planning time (it
sets the job up: a UUID job id and the job's marker); ``write()`` in every task attempt
(streams its files as deferred uploads and commits the attempt to a pendingset); the
writer object is pickled once and shared by tasks and commit; ``commit()``/``abort()``
in a Python worker the driver starts, with one message per partition from exactly the
attempts Spark accepted, so the job commit lists nothing. Nothing is visible before job
commit; ``abort()`` leaves nothing (failed attempts' uploads included).

``mode("overwrite")`` follows Spark's partition overwrite mode (the ``partitionOverwriteMode``
option, else the session's ``spark.sql.sources.partitionOverwriteMode``): dynamic replaces
only the partitions the job writes. Neither ``writer()`` nor ``commit()`` can see the
session (no SparkSession, no JVM in those workers; Spark passes them the write's options
and the overwrite flag only), but every task gets the session's SQL settings as local
properties: ``write()`` reads the setting there and its message carries it to the commit.
Streams append only: the setting does not concern them.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

from zerorename.spark_adapter.errors import OptionError
from zerorename.spark_adapter.workerpython import check_local_workers, guarded_reduce

if TYPE_CHECKING:
    # Each of Spark's Python processes imports what its step needs (a planning worker
    # that sets a job up or commits it needs no pyarrow, no file writer, no stream
    # code): these load in the methods below.
    import pyarrow as pa
    from pyspark.sql.types import StructType

    from zerorename.spark_adapter.options import WriteOptions
    from zerorename.spark_adapter.stream.writer import ZeroRenameStreamWriter
    from zerorename.spark_adapter.write import TaskResult

log = logging.getLogger("zerorename.spark")

NAME = "zerorename"


@dataclass
class ZeroRenameCommitMessage(WriterCommitMessage):  # type: ignore[misc]
    """One task attempt's result: counts and where its pendingset is (a few hundred bytes)."""

    result: TaskResult


def _check_spark_schema(schema: StructType, opts: WriteOptions) -> None:
    from pyspark.sql.types import StringType

    from zerorename.spark_adapter.files.partitioning import check_partition_columns

    check_partition_columns([f.name for f in schema.fields], opts.partition_by)
    data = [f for f in schema.fields if f.name not in opts.partition_by]
    if opts.format == "text" and (len(data) != 1 or not isinstance(data[0].dataType, StringType)):
        raise OptionError(
            "format text needs exactly one string column besides partition "
            f"columns; got {[f.simpleString() for f in data]}"
        )


def _arrow_schema(schema: StructType) -> pa.Schema | None:
    """The Arrow schema Spark's batches will have (timestamps in UTC), or None when pyspark
    cannot convert it (then no empty-output file is written)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    # pyspark 4.1 says timestamp_utc=True, later ones timezone="UTC"
    utc: dict[str, Any] = {"timezone": "UTC"}
    if "timezone" not in inspect.signature(to_arrow_schema).parameters:
        utc = {"timestamp_utc": True}
    try:
        return to_arrow_schema(schema, **utc)
    except Exception:
        log.warning("zerorename: no Arrow schema for %s; an empty write leaves no file", schema)
        return None


class ZeroRenameWriter(DataSourceArrowWriter):  # type: ignore[misc]
    """Pickled once on the driver side; ``write`` runs in tasks, ``commit``/``abort`` on
    the driver side. Holds only options (no credentials) and the job id."""

    #: the empty-output schema (below) in Arrow's IPC form: the writer is unpickled by the
    #: job commit's process too, which then needs no pyarrow
    _empty_schema_ipc: bytes | None = None

    @property
    def empty_schema(self) -> pa.Schema | None:
        """Arrow schema of the file partition 0 writes when it has no rows (Spark writes
        one for unpartitioned output); None: write nothing."""
        if self._empty_schema_ipc is None:
            return None
        import pyarrow as pa

        return pa.ipc.read_schema(pa.py_buffer(self._empty_schema_ipc))

    @empty_schema.setter
    def empty_schema(self, schema: pa.Schema | None) -> None:
        self._empty_schema_ipc = None if schema is None else schema.serialize().to_pybytes()

    def __init__(self, opts: WriteOptions, job_id: str) -> None:
        self.opts = opts
        self.job_id = job_id
        self.created = time.time()

    def __reduce__(self) -> Any:
        """Unpickled through a loader that names the fix when a worker lacks zerorename."""
        return guarded_reduce(self)

    def checkpoint(self, stage: str, partition: int, attempt: int) -> None:
        """A hook for subclasses (fault tests, the harness's timing): called at "batch" (after
        each batch), "files_closed" (uploads pending, before the task commit) and
        "committed". Does nothing here."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ZeroRenameCommitMessage:
        from pyspark import TaskContext

        from zerorename.spark_adapter.options import SESSION_OVERWRITE_KEY
        from zerorename.spark_adapter.write import TaskWriter

        tc = TaskContext.get()
        partition = tc.partitionId() if tc is not None else 0
        attempt = tc.attemptNumber() if tc is not None else 0
        task_attempt_id = tc.taskAttemptId() if tc is not None else 0
        # the session's setting reaches tasks only (Spark sets it as a local property
        # for the write's execution); the job commit uses what its tasks report
        session = (tc.getLocalProperty(SESSION_OVERWRITE_KEY) or "") if tc is not None else None
        writer = TaskWriter(
            self.opts,
            self.job_id,
            partition,
            attempt,
            task_attempt_id,
            session_overwrite=session,
        )
        try:
            for batch in iterator:
                writer.write(batch)
                self.checkpoint("batch", partition, attempt)
            empty = self.empty_schema if partition == 0 and writer.rows == 0 else None
            if empty is not None:
                writer.write_empty(empty)  # as Spark: readable empty output
            writer.close_files()
            self.checkpoint("files_closed", partition, attempt)
            result = writer.commit()
            self.checkpoint("committed", partition, attempt)
        except BaseException:
            writer.abort()
            raise
        return ZeroRenameCommitMessage(result)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        from zerorename.spark_adapter.write import commit_job, iter_results

        outcome = commit_job(
            self.opts,
            self.job_id,
            list(iter_results(messages)),
            started=self.created,
            sql_write=True,
        )
        log.info(
            "zerorename: job %s wrote %d files, %d bytes, %d rows to %s (job commit %.2fs)",
            outcome.job_id,
            outcome.files,
            outcome.bytes,
            outcome.rows,
            outcome.destination,
            outcome.commit_seconds,
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        from zerorename.spark_adapter.write import abort_job

        abort_job(self.opts, self.job_id)


class ZeroRenameDataSource(DataSource):  # type: ignore[misc]
    """``format("zerorename")``: zero-rename writes to S3 through the committers."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def writer_class(self) -> type[ZeroRenameWriter]:
        """The writer to build (subclasses swap it, e.g. for fault-injection tests)."""
        return ZeroRenameWriter

    def writer(self, schema: StructType, overwrite: bool) -> ZeroRenameWriter:
        from zerorename.spark_adapter.files.formats import check_schema
        from zerorename.spark_adapter.options import WriteOptions
        from zerorename.spark_adapter.write import setup_job

        opts = WriteOptions.parse(dict(self.options), overwrite=overwrite)
        if opts.unknown:
            log.warning("zerorename: ignoring unknown options %s", ", ".join(opts.unknown))
        _check_spark_schema(schema, opts)
        arrow = _arrow_schema(schema)
        if arrow is not None:
            check_schema(arrow, opts)  # a column the format cannot hold: refused before any task
        job_id = setup_job(opts)
        writer = self.writer_class()(opts, job_id)
        if not opts.partition_by:
            writer.empty_schema = arrow
        return writer

    def stream_writer_class(self) -> type[ZeroRenameStreamWriter]:
        """The streaming writer to build (subclasses swap it, e.g. for fault tests)."""
        from zerorename.spark_adapter.stream.writer import ZeroRenameStreamWriter

        return ZeroRenameStreamWriter

    def streamWriter(self, schema: StructType, overwrite: bool) -> ZeroRenameStreamWriter:
        """``df.writeStream.format("zerorename")``: one job per micro-batch, append only
        (see :mod:`zerorename.spark_adapter.stream.writer`). Called per batch, without I/O."""
        from zerorename.spark_adapter.options import WriteOptions
        from zerorename.spark_adapter.stream.writer import check_stream_options

        opts = WriteOptions.parse(dict(self.options), overwrite=overwrite)
        check_stream_options(opts, overwrite)
        if opts.unknown:
            log.warning("zerorename: ignoring unknown options %s", ", ".join(opts.unknown))
        _check_spark_schema(schema, opts)
        return self.stream_writer_class()(opts)


def register(spark: Any) -> None:
    """Register the ``zerorename`` data source with a SparkSession; in local mode, first
    check that Spark's Python workers can import zerorename (OptionError naming the fix)."""
    check_local_workers(spark)
    spark.dataSource.register(ZeroRenameDataSource)


def activate(spark: Any) -> None:
    """Make ``spark`` the active session of the calling thread's JVM thread.

    Spark 4 looks Python data sources up in the *active* session, which the JVM keeps
    per thread: a write from another Python thread fails with DATA_SOURCE_NOT_FOUND
    unless that thread calls this first.
    """
    jvm = spark._jvm
    try:
        jvm.org.apache.spark.sql.classic.SparkSession.setActiveSession(spark._jsparkSession)
    except Exception:  # Spark before 4.0 has no "classic" package
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
