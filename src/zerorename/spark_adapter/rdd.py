"""The RDD-level API, for output that is not a DataFrame.

    def write(index, rows, out):
        with out.open(f"logs/{out.part_name('.txt')}") as f:   # any relative path
            for r in rows:
                f.write(r.encode() + b"\\n")

    outcome = write_partitions(rdd, "s3://bucket/export", write, endpoint=...)

Each partition's task attempt gets file-like outputs by relative path; they stream as
deferred uploads (magic) or local files (directory/partitioned), the attempt commits to
a small result, and the driver completes the job from the results Spark collected (one
per partition, from the attempts it accepted), exactly as the data source does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any

from zerorename.committers.paths import output_name
from zerorename.spark_adapter.bridge import get_bridge
from zerorename.spark_adapter.options import WriteOptions
from zerorename.spark_adapter.write import (
    TaskResult,
    WriteOutcome,
    abort_job,
    commit_job,
    job_handle,
    setup_job,
    task_id_for,
)


class OutputFile:
    """A binary file of one output: ``write``, then ``close`` (or leave a ``with`` block);
    an exception inside the block aborts the file."""

    def __init__(self, rel: str, raw: Any, owner: OutputFiles) -> None:
        self.rel = rel
        self._raw = raw
        self._owner = owner
        self.bytes = 0
        self.closed = False

    def write(self, data: Any) -> int:
        n: int = self._raw.write(data)
        self.bytes += memoryview(data).nbytes
        return n

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.bytes

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._raw.close()
            self._owner._closed(self)

    def abort(self) -> None:
        if not self.closed:
            self.closed = True
            abort = getattr(self._raw, "abort", None)
            if callable(abort):
                abort()
            else:
                self._raw.close()
            self._owner._open.discard(self)

    def __enter__(self) -> OutputFile:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.close()
        else:
            self.abort()


class OutputFiles:
    """The outputs of one task attempt of an RDD write."""

    def __init__(self, ta: Any, index: int, job_id: str) -> None:
        self._ta = ta
        self.index = index
        self.job_id = job_id
        self._open: set[OutputFile] = set()
        self._counter = 0
        self.files = 0
        self.bytes = 0

    def part_name(self, extension: str = "") -> str:
        """A fresh Spark-style name for this partition: ``part-00003-<jobid>-c000.ext``."""
        name = output_name(self.index, self.job_id, extension, file_index=self._counter)
        self._counter += 1
        return name

    def open(self, rel: str) -> OutputFile:
        """A new output at ``rel`` (relative to the destination; the job id is added to
        the file name unless it is there already)."""
        f = OutputFile(rel, self._ta.open_sync(rel), self)
        self._open.add(f)
        return f

    def _closed(self, f: OutputFile) -> None:
        self._open.discard(f)
        self.files += 1
        self.bytes += f.bytes

    def close_all(self) -> None:
        for f in list(self._open):
            f.close()

    def abort_all(self) -> None:
        for f in list(self._open):
            f.abort()


PartitionFn = Callable[[int, Iterator[Any], OutputFiles], None]


def _task_fn(
    opts: WriteOptions, job_id: str, fn: PartitionFn
) -> Callable[[int, Iterator[Any]], Iterable[str]]:
    def run(index: int, rows: Iterator[Any]) -> Iterator[str]:
        from pyspark import TaskContext

        tc = TaskContext.get()
        attempt = tc.attemptNumber() if tc is not None else 0
        taid = tc.taskAttemptId() if tc is not None else 0
        bridge = get_bridge()
        ta = job_handle(opts, job_id).task_attempt(task_id_for(index, taid), attempt)
        bridge.run(ta.setup())
        out = OutputFiles(ta, index, job_id)
        try:
            fn(index, rows, out)
            out.close_all()
            summary = bridge.run(ta.commit()).to_json() if out.files else None
            if summary is None:
                bridge.run(ta.abort())
        except BaseException:
            out.abort_all()
            bridge.run(ta.abort())
            raise
        yield TaskResult(index, attempt, taid, 0, out.files, out.bytes, summary).to_json()

    return run


def write_partitions(
    rdd: Any,
    path: str,
    fn: PartitionFn,
    *,
    mode: str = "append",
    **options: str | int,
) -> WriteOutcome:
    """Run ``fn(index, rows, outputs)`` on every partition of ``rdd`` and commit the
    files it opened through ``outputs`` as one job at ``path``.

    ``mode`` is ``append`` or ``overwrite``; ``options`` are the data source's
    (committer, conflict, endpoint, region, profile, partSize, ...). Returns the outcome;
    on any failure the job is aborted (nothing visible, nothing pending) and the error
    is raised.
    """
    if mode not in ("append", "overwrite"):
        raise ValueError(f"mode must be append or overwrite, got {mode!r}")
    opts = WriteOptions.parse(
        {"path": path, **{k: str(v) for k, v in options.items()}}, overwrite=mode == "overwrite"
    )
    started = time.time()
    job_id = setup_job(opts)
    try:
        raw = rdd.mapPartitionsWithIndex(_task_fn(opts, job_id, fn)).collect()
    except BaseException:
        abort_job(opts, job_id)
        raise
    results: list[TaskResult | None] = [TaskResult.from_json(r) for r in raw]
    return commit_job(opts, job_id, results, started=started)
