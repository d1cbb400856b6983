"""The rename baseline for the ``spark`` perf scenario, and the commit timing both share.

``format("zerorename_rename_baseline")`` does on S3 what Hadoop's FileOutputCommitter
(algorithm v1, Spark's default) does through S3A, where a rename is a server-side copy
followed by a delete:

- job setup (``writer()``, planning time): creates the ``dest/_temporary/0/`` directory
  marker, as S3A's mkdirs does;
- each task attempt routes its batches into exactly the files the ``zerorename`` writer
  produces (the same :class:`~zerorename.spark_adapter.files.router.BatchRouter`: same Parquet
  writer, compression, row groups, Hive partition directories and file names), buffers
  each file on local disk (S3A's default ``fast.upload.buffer=disk``) and uploads it
  when it closes to ``dest/_temporary/0/_temporary/attempt_<id>/<file>`` with boto3's
  managed ``upload_file`` (multipart in ``partSize`` parts, ``concurrency`` threads: the
  same budget as the zerorename task writers; the write phase is not what the scenario
  compares);
- task commit "renames" the attempt directory to ``dest/_temporary/0/task_<id>/``: lists
  the attempt directory, deletes an earlier committed copy of the task if any, copies
  every file, then deletes the sources in ``DeleteObjects`` batches;
- job commit "renames" every committed task's files into ``dest/`` (copy, then batched
  delete of the sources), deletes what is left under ``_temporary/`` (cleanupJob) and
  writes an empty ``_SUCCESS`` (markSuccessfulOutputDir), in that order.

Every copy goes through one s3transfer ``TransferManager`` per commit (the machinery
behind ``client.copy``) with S3A's defaults: one ``CopyObject`` below
``copyThreshold`` (``fs.s3a.multipart.threshold``, 128M), else a multipart copy in
``copyPartSize`` parts (``fs.s3a.multipart.size``, 64M) copied in parallel;
``renameConcurrency`` requests in flight in total (default 16). Sizes and ETags come from
the listing, so no HEAD precedes a copy. This is more generous than Hadoop v1, whose
``mergePaths`` walks task directories one after another (S3A parallelises only inside one
directory rename): here all files of the job are copied at once. Aborts delete the
attempt directory (task) or ``_temporary/`` (job).

What a copy costs depends on the store: AWS S3 copies the bytes either way, Ceph RGW
shares a whole object's data for ``CopyObject`` within a bucket but copies the bytes of
``UploadPartCopy`` parts, so on RGW the baseline's commit time depends on
``copyThreshold`` (BENCHMARKS.md, Spark).

Timing (:class:`CommitTiming`): both this writer and :class:`TimedZeroRenameWriter` (the
``zerorename`` writer unchanged, wrapped) time the whole driver-side
``DataSourceWriter.commit`` and each task attempt's task commit, and write the figures
to a local JSON file named by the ``perfTimingFile`` option (Spark runs locally in the
scenario, so the commit's Python worker shares the file system with the measuring
process).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from zerorename.committers import Destination
from zerorename.spark_adapter import (
    BatchRouter,
    OptionError,
    WriteOptions,
    ZeroRenameCommitMessage,
    ZeroRenameDataSource,
    ZeroRenameWriter,
)
from zerorename.units import GiB, MiB, parse_size

log = logging.getLogger("zerorename.perf.scenarios.rename_baseline")

NAME = "zerorename_rename_baseline"
TIMED_NAME = "zerorename_timed"
#: option naming the local JSON file the commit writes its timing to (lower-cased by Spark)
TIMING_OPTION = "perfTimingFile"
#: keys per DeleteObjects request (the S3 maximum)
DELETE_BATCH = 1000


# ---------------------------------------------------------------- timing (both writers)


@dataclass(frozen=True)
class CommitTiming:
    """What a job commit reports to the measuring process."""

    client: str
    #: wall seconds of the whole DataSourceWriter.commit
    commit_s: float
    #: task commit seconds summed over the accepted task attempts
    task_commit_s: float
    #: files and bytes the commit made visible (0 when the writer does not count them)
    files: int
    bytes: int
    rows: int
    tasks: int
    #: the largest peak RSS (MB) of the Python workers at the end of their tasks (0: not
    #: measured)
    task_peak_rss_mb: float = 0.0

    def save(self, path: str) -> None:
        tmp = f"{path}.tmp-{os.getpid()}"
        Path(tmp).write_text(json.dumps(asdict(self)))
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str) -> CommitTiming:
        return cls(**json.loads(Path(path).read_text()))


def _pop_timing_option(options: Any) -> str | None:
    """Take the timing option out of a data source's options (Spark lower-cases keys)."""
    value = None
    for key in list(options.keys()):
        if str(key).lower() == TIMING_OPTION.lower():
            value = options.pop(key)
    return str(value) if value else None


# ---------------------------------------------------------------- zerorename, timed


@dataclass
class TimedCommitMessage(ZeroRenameCommitMessage):
    """The zerorename message plus the attempt's task commit seconds."""

    task_commit_s: float = 0.0
    #: the worker's peak RSS in MB when the task ended
    peak_rss_mb: float = 0.0


class TimedZeroRenameWriter(ZeroRenameWriter):
    """The ``zerorename`` writer, unchanged, with its task and job commits timed."""

    timing_file: str | None = None
    _t_closed = 0.0
    _task_commit_s = 0.0

    def checkpoint(self, stage: str, partition: int, attempt: int) -> None:
        if stage == "files_closed":
            self._t_closed = time.perf_counter()
        elif stage == "committed":
            self._task_commit_s = time.perf_counter() - self._t_closed

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TimedCommitMessage:
        self._task_commit_s = 0.0
        import resource

        msg = super().write(iterator)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6  # KiB on Linux
        return TimedCommitMessage(msg.result, self._task_commit_s, peak)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        t0 = time.perf_counter()
        super().commit(messages)
        elapsed = time.perf_counter() - t0
        if self.timing_file:
            results = [m.result for m in messages if isinstance(m, ZeroRenameCommitMessage)]
            CommitTiming(
                client=self.opts.committer,
                commit_s=elapsed,
                task_commit_s=sum(getattr(m, "task_commit_s", 0.0) for m in messages),
                files=sum(r.files for r in results),
                bytes=sum(r.bytes for r in results),
                rows=sum(r.rows for r in results),
                tasks=len(results),
                task_peak_rss_mb=max(
                    (getattr(m, "peak_rss_mb", 0.0) for m in messages), default=0.0
                ),
            ).save(self.timing_file)


class TimedZeroRenameDataSource(ZeroRenameDataSource):  # type: ignore[misc]
    """``format("zerorename_timed")``: ``zerorename`` plus the ``perfTimingFile`` option."""

    @classmethod
    def name(cls) -> str:
        return TIMED_NAME

    def writer_class(self) -> type[ZeroRenameWriter]:
        return TimedZeroRenameWriter

    def writer(self, schema: StructType, overwrite: bool) -> ZeroRenameWriter:
        timing_file = _pop_timing_option(self.options)
        w = super().writer(schema, overwrite)
        w.timing_file = timing_file  # type: ignore[attr-defined]
        return w


# ---------------------------------------------------------------- the baseline's S3 side


@dataclass(frozen=True)
class Layout:
    """FileOutputCommitter v1's paths under a destination (application attempt 0)."""

    dest: Destination
    job_stamp: str

    @property
    def temporary(self) -> str:
        return self.dest.key("_temporary/")

    @property
    def committed_root(self) -> str:
        return self.dest.key("_temporary/0/")

    def task_name(self, partition: int) -> str:
        return f"task_{self.job_stamp}_m_{partition:06d}"

    def task_dir(self, partition: int) -> str:
        return f"{self.committed_root}{self.task_name(partition)}/"

    def attempt_dir(self, partition: int, attempt: int) -> str:
        return (
            f"{self.committed_root}_temporary/attempt_{self.job_stamp}_m_{partition:06d}_{attempt}/"
        )


@dataclass(frozen=True)
class S3Object:
    key: str
    size: int
    etag: str | None


_clients: dict[tuple[Any, ...], Any] = {}
_clients_lock = threading.Lock()


@dataclass(frozen=True)
class RenameSettings:
    """How the baseline copies. The defaults are S3A's: ``fs.s3a.multipart.threshold``
    (128M) and ``fs.s3a.multipart.size`` (64M) decide between one CopyObject and a
    multipart copy."""

    #: copy requests in flight in one task or job commit, across all files
    concurrency: int = 16
    #: objects at least this large are copied with UploadPartCopy parts
    copy_threshold: int = 128 * MiB
    copy_part_size: int = 64 * MiB

    #: option name -> field
    OPTIONS: ClassVar[dict[str, str]] = {
        "renameconcurrency": "concurrency",
        "copythreshold": "copy_threshold",
        "copypartsize": "copy_part_size",
    }

    @classmethod
    def pop_from(cls, options: dict[str, str]) -> RenameSettings:
        """Take ``renameConcurrency``, ``copyThreshold`` and ``copyPartSize`` (sizes with
        k/m/g suffixes) out of ``options``."""
        values: dict[str, int] = {}
        for key in list(options):
            name = cls.OPTIONS.get(key.lower())
            if name is None:
                continue
            text = options.pop(key)
            try:
                values[name] = int(text) if name == "concurrency" else parse_size(text, key)
            except ValueError as exc:
                why = f"{key} must be an integer, got {text!r}" if name == "concurrency" else exc
                raise OptionError(str(why)) from None
        out = cls(**values)
        if out.concurrency < 1:
            raise OptionError("renameConcurrency must be >= 1")
        if not 5 * MiB <= out.copy_part_size <= 5 * GiB:
            raise OptionError("copyPartSize must be between 5m and 5g")
        return out

    def transfer_config(self) -> Any:
        return transfer_config(self.copy_threshold, self.copy_part_size, self.concurrency)


def client_for(opts: WriteOptions, rename: RenameSettings) -> Any:
    """This process's boto3 client for the write's settings (credentials: the AWS chain)."""
    pool = max(opts.concurrency, rename.concurrency) + 4
    key = (os.getpid(), opts.endpoint, opts.region, opts.profile, opts.addressing_style, pool)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            import boto3
            from botocore.config import Config

            session = boto3.session.Session(profile_name=opts.profile)
            client = session.client(
                "s3",
                endpoint_url=opts.endpoint,
                region_name=opts.region,
                config=Config(
                    s3={"addressing_style": opts.addressing_style},
                    max_pool_connections=pool,
                    retries={"mode": "standard", "max_attempts": 5},
                ),
            )
            _clients[key] = client
        return client


def transfer_config(threshold: int, part_size: int, concurrency: int) -> Any:
    from boto3.s3.transfer import TransferConfig

    return TransferConfig(
        multipart_threshold=threshold,
        multipart_chunksize=part_size,
        max_concurrency=concurrency,
        use_threads=True,
    )


def list_objects(client: Any, bucket: str, prefix: str) -> list[S3Object]:
    out: list[S3Object] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        out += [S3Object(o["Key"], int(o["Size"]), o.get("ETag")) for o in page.get("Contents", [])]
    return out


def delete_keys(client: Any, bucket: str, keys: Iterable[str]) -> int:
    """Delete ``keys`` in DeleteObjects batches; raises when the store refuses one."""
    batch: list[str] = []
    deleted = 0

    def flush() -> None:
        nonlocal deleted
        if not batch:
            return
        resp = client.delete_objects(
            Bucket=bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True}
        )
        errors = resp.get("Errors") or []
        if errors:
            raise RuntimeError(f"DeleteObjects refused {len(errors)} keys, e.g. {errors[0]}")
        deleted += len(batch)
        batch.clear()

    for key in keys:
        batch.append(key)
        if len(batch) == DELETE_BATCH:
            flush()
    flush()
    return deleted


def _known_source(size: int, etag: str | None) -> Any:
    """An s3transfer subscriber that hands the listed size and ETag to a copy (no HEAD)."""
    from s3transfer.subscribers import BaseSubscriber

    class KnownSource(BaseSubscriber):  # type: ignore[misc]
        def on_queued(self, future: Any, **kwargs: Any) -> None:
            future.meta.provide_transfer_size(size)
            if etag is not None and hasattr(future.meta, "provide_object_etag"):
                future.meta.provide_object_etag(etag)

    return KnownSource()


def rename_objects(
    client: Any,
    bucket: str,
    moves: list[tuple[S3Object, str]],
    settings: RenameSettings,
) -> tuple[int, int]:
    """S3A's rename of files: copy every (source, destination key) with s3transfer's
    managed copy (one CopyObject below ``copy_threshold``, else UploadPartCopy parts;
    ``concurrency`` requests in flight in all), then delete the sources in batches.
    Returns (files, bytes)."""
    from boto3.s3.transfer import create_transfer_manager

    if not moves:
        return 0, 0
    manager = create_transfer_manager(client, settings.transfer_config())
    try:
        futures = [
            manager.copy(
                {"Bucket": bucket, "Key": src.key},
                bucket,
                dst,
                subscribers=[_known_source(src.size, src.etag)],
            )
            for src, dst in moves
        ]
        for f in futures:
            f.result()
    finally:
        manager.shutdown()
    delete_keys(client, bucket, (src.key for src, _ in moves))
    return len(moves), sum(src.size for src, _ in moves)


class _UploadOnClose:
    """An output file buffered on local disk and uploaded (managed upload) on close."""

    def __init__(self, client: Any, bucket: str, key: str, directory: str, config: Any) -> None:
        self._client = client
        self._bucket = bucket
        self._key = key
        self._config = config
        fd, self._path = tempfile.mkstemp(prefix="part-", dir=directory)
        self._file = os.fdopen(fd, "wb")

    def write(self, data: Any, /) -> int:
        return self._file.write(data)

    def close(self) -> None:
        self._file.close()
        try:
            self._client.upload_file(self._path, self._bucket, self._key, Config=self._config)
        finally:
            os.unlink(self._path)

    def abort(self) -> None:
        self._file.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path)


@dataclass
class RenameCommitMessage(WriterCommitMessage):  # type: ignore[misc]
    """One committed task attempt of the baseline."""

    partition: int
    attempt: int
    rows: int
    files: int
    bytes: int
    task_commit_s: float


class RenameBaselineWriter(DataSourceArrowWriter):  # type: ignore[misc]
    """Pickled once; ``write`` per task attempt, ``commit``/``abort`` on the driver side."""

    def __init__(
        self,
        opts: WriteOptions,
        job_id: str,
        job_stamp: str,
        rename: RenameSettings,
        timing_file: str | None,
    ) -> None:
        self.opts = opts
        self.job_id = job_id
        self.layout = Layout(Destination.parse(opts.path), job_stamp)
        self.rename = rename
        self.timing_file = timing_file

    def _client(self) -> Any:
        return client_for(self.opts, self.rename)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> RenameCommitMessage:
        from pyspark import TaskContext

        tc = TaskContext.get()
        partition = tc.partitionId() if tc is not None else 0
        attempt = tc.attemptNumber() if tc is not None else 0
        client = self._client()
        bucket = self.layout.dest.bucket
        attempt_dir = self.layout.attempt_dir(partition, attempt)
        part = self.opts.part_size
        upload_config = transfer_config(part, part, self.opts.concurrency)
        router: BatchRouter | None = None
        with tempfile.TemporaryDirectory(prefix="zr-rename-baseline-") as tmp:

            def opener(rel: str) -> _UploadOnClose:
                return _UploadOnClose(client, bucket, attempt_dir + rel, tmp, upload_config)

            try:
                for batch in iterator:
                    if router is None:
                        router = BatchRouter(
                            self.opts, batch.schema, partition, self.job_id, opener
                        )
                    router.write(batch)
                files = router.close() if router is not None else []
                t0 = time.perf_counter()
                self._commit_task(client, partition, attempt)
                task_commit_s = time.perf_counter() - t0
            except BaseException:
                if router is not None:
                    router.abort()
                with contextlib.suppress(Exception):  # already failing; job abort cleans up
                    delete_keys(
                        client, bucket, (o.key for o in list_objects(client, bucket, attempt_dir))
                    )
                raise
        return RenameCommitMessage(
            partition,
            attempt,
            router.rows if router is not None else 0,
            len(files),
            sum(f.bytes for f in files),
            task_commit_s,
        )

    def _commit_task(self, client: Any, partition: int, attempt: int) -> None:
        """v1 commitTask: rename the attempt directory to the committed task directory."""
        bucket = self.layout.dest.bucket
        task_dir = self.layout.task_dir(partition)
        attempt_dir = self.layout.attempt_dir(partition, attempt)
        earlier = list_objects(client, bucket, task_dir)
        if earlier:  # an earlier attempt of this task committed: replace it
            delete_keys(client, bucket, (o.key for o in earlier))
        sources = list_objects(client, bucket, attempt_dir)
        rename_objects(
            client,
            bucket,
            [(o, task_dir + o.key[len(attempt_dir) :]) for o in sources],
            self.rename,
        )

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        t0 = time.perf_counter()
        accepted = [m for m in messages if isinstance(m, RenameCommitMessage)]
        if len(accepted) != len(messages):
            raise RuntimeError("a task has no commit message; not committing")
        client = self._client()
        layout = self.layout
        bucket = layout.dest.bucket
        # v1 commitJob: merge every committed task directory into the destination
        tasks = {layout.task_name(m.partition) for m in accepted}
        root = layout.committed_root
        moves: list[tuple[S3Object, str]] = []
        for o in list_objects(client, bucket, root + "task_"):
            task, _, rel = o.key[len(root) :].partition("/")
            if task in tasks and rel:
                moves.append((o, layout.dest.key(rel)))
        files, nbytes = rename_objects(
            client,
            bucket,
            moves,
            self.rename,
        )
        # cleanupJob: delete _temporary; then the _SUCCESS marker
        delete_keys(client, bucket, (o.key for o in list_objects(client, bucket, layout.temporary)))
        client.put_object(Bucket=bucket, Key=layout.dest.key("_SUCCESS"), Body=b"")
        elapsed = time.perf_counter() - t0
        log.info(
            "rename baseline: job %s renamed %d files, %d bytes in %.2fs",
            self.job_id,
            files,
            nbytes,
            elapsed,
        )
        if self.timing_file:
            CommitTiming(
                client="rename",
                commit_s=elapsed,
                task_commit_s=sum(m.task_commit_s for m in accepted),
                files=files,
                bytes=nbytes,
                rows=sum(m.rows for m in accepted),
                tasks=len(accepted),
            ).save(self.timing_file)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """v1 abortJob: delete ``_temporary`` (the destination itself is untouched)."""
        client = self._client()
        bucket = self.layout.dest.bucket
        delete_keys(
            client, bucket, (o.key for o in list_objects(client, bucket, self.layout.temporary))
        )


class RenameBaselineDataSource(DataSource):  # type: ignore[misc]
    """``format("zerorename_rename_baseline")``: registered by the perf scenario only.

    Options: those of ``zerorename`` that shape the files (``path``, ``partitionBy``,
    ``format``, ``compression``, ``partSize``, ``concurrency``, ``endpoint``, ``region``,
    ``profile``, ``addressingStyle``, ``maxOpenFiles``, ``maxRecordsPerFile``), plus
    ``renameConcurrency`` (default 16), ``copyThreshold`` (128m), ``copyPartSize`` (64m)
    and ``perfTimingFile``.
    """

    @classmethod
    def name(cls) -> str:
        return NAME

    def writer(self, schema: StructType, overwrite: bool) -> RenameBaselineWriter:
        options = dict(self.options)
        timing_file = _pop_timing_option(options)
        rename = RenameSettings.pop_from(options)
        options.pop("committer", None)
        opts = WriteOptions.parse(options, overwrite=overwrite)
        if overwrite:
            raise OptionError("the rename baseline writes to a fresh prefix: use mode('append')")
        stamp = time.strftime("%Y%m%d%H%M%S") + f"_{uuid.uuid4().int % 10000:04d}"
        writer = RenameBaselineWriter(opts, str(uuid.uuid4()), stamp, rename, timing_file)
        # v1 setupJob: mkdirs(_temporary/0), a directory marker on S3A
        writer._client().put_object(
            Bucket=writer.layout.dest.bucket, Key=writer.layout.committed_root, Body=b""
        )
        return writer


def register(spark: Any) -> None:
    """Register the baseline and the timed zerorename data sources with ``spark``."""
    spark.dataSource.register(RenameBaselineDataSource)
    spark.dataSource.register(TimedZeroRenameDataSource)
