"""Routing one task's record batches into output files (pyarrow; no Spark, no S3).

Rows are split by the partition columns (vectorised: dictionary-encode, sort, cut runs),
the partition columns are dropped from the data (as Spark does) and each partition
directory gets a file named ``part-<task>-<jobid>-c<n><ext>``. One task writes at most one
file per partition, whatever the order of its rows (``max_records_per_file`` rolls files
over): the first ``max_open_files`` partitions stream into open files, the rows of the
others are spilled to local disk and each is written as one file when the task closes
(:mod:`zerorename.spark_adapter.files.spill`).
"""

from __future__ import annotations

import os
import tempfile
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from zerorename.spark_adapter.files.formats import (
    TASK_BUFFER_BYTES,
    FormatWriter,
    open_format_writer,
)
from zerorename.spark_adapter.files.partitioning import partition_dir, value_text
from zerorename.spark_adapter.files.spill import (
    Placement,
    Route,
    TaskSpill,
    flush_order,
    pick_spill_dir,
)
from zerorename.spark_adapter.options import WriteOptions


class OutputFile(Protocol):
    """What a task attempt's ``open_sync(rel)`` returns: a binary sink (the format
    writer counts what it writes; ``abort()``, when there is one, discards the file)."""

    def write(self, data: Any, /) -> int: ...

    def close(self) -> None: ...


Opener = Callable[[str], OutputFile]


@dataclass
class FileStats:
    """One finished output file: where (relative to the destination), rows, bytes."""

    rel: str
    rows: int
    bytes: int


@dataclass
class _Open:
    rel: str
    out: OutputFile
    writer: FormatWriter


def split_batch(
    batch: pa.RecordBatch, columns: tuple[str, ...]
) -> Iterator[tuple[tuple[str | None, ...], pa.RecordBatch]]:
    """Yield (partition value strings, rows without the partition columns) per group.

    Values are the strings Spark would use (None for null); a batch that is all one
    partition (the common case for clustered data) is passed through without copying.
    """
    data_cols = [n for n in batch.schema.names if n not in columns]
    if not columns:
        yield (), batch
        return
    if batch.num_rows == 0:
        return
    key: pa.Array | None = None
    for name in columns:
        enc = pc.dictionary_encode(batch.column(name), null_encoding="encode")
        idx = pc.cast(enc.indices, pa.int64())
        key = idx if key is None else pc.add(pc.multiply(key, len(enc.dictionary)), idx)
    assert key is not None
    bounds = pc.min_max(key)
    if bounds["min"] == bounds["max"]:
        groups: list[pa.RecordBatch] = [batch]
    else:
        # each group gets its own buffers (a take per group, not slices of one sorted
        # copy): a group held in a Parquet row group or the spill buffer must not keep the
        # whole batch alive, or the task's memory bound counts a fraction of what it holds
        order = pc.sort_indices(key)
        runs = pc.run_end_encode(key.take(order))
        ends = runs.run_ends.to_pylist()
        starts = [0, *ends[:-1]]
        groups = [batch.take(order.slice(s, e - s)) for s, e in zip(starts, ends, strict=True)]
    for group in groups:
        values: list[str | None] = []
        for name in columns:
            col = group.column(name)
            typ = col.type
            tz = getattr(typ, "tz", None)
            values.append(value_text(col[0].as_py(), str(typ), tz))
        yield tuple(values), group.select(data_cols)


#: the key of the spill buffer among the buffers _bound_buffers weighs (no directory has it)
_SPILL = "\0spill"


class BatchRouter:
    """Writes one task's batches into files opened through ``opener(rel)``: at most one
    file per partition (``max_records_per_file`` aside), at most ``max_open_files`` open
    while batches come, the rest spilled under ``spill_dir`` (default: Spark's local dirs,
    else the system temporary directory) and written at :meth:`close`; ``buffer_bytes``:
    the bound on buffered Arrow data (default ``TASK_BUFFER_BYTES``)."""

    def __init__(
        self,
        opts: WriteOptions,
        schema: pa.Schema,
        task_index: int,
        job_id: str,
        opener: Opener,
        *,
        spill_dir: str | None = None,
        buffer_bytes: int | None = None,
    ) -> None:
        from zerorename.committers.paths import output_name

        self._opts = opts
        self._schema = pa.schema([f for f in schema if f.name not in opts.partition_by])
        self._task = task_index
        self._job = job_id
        self._opener = opener
        self._name = output_name
        self._open: dict[str, _Open] = {}
        self._file_index = 0
        self._rows_in_file: dict[str, int] = {}
        self._placement: Placement[str] = Placement(opts.max_open_files)
        self._spill_dir = spill_dir
        self._spill: TaskSpill | None = None
        self._buffer_bytes = TASK_BUFFER_BYTES if buffer_bytes is None else buffer_bytes
        self.finished: list[FileStats] = []
        self.rows = 0

    @property
    def spilled_rows(self) -> int:
        """Rows that went through the local spill."""
        return self._spill.rows if self._spill is not None else 0

    @property
    def spill_runs(self) -> int:
        """Runs (local files) the spill wrote."""
        return self._spill.runs if self._spill is not None else 0

    def _spill_for(self) -> TaskSpill:
        if self._spill is None:
            base = self._spill_dir or pick_spill_dir(os.environ, self._task, tempfile.gettempdir())
            self._spill = TaskSpill(base, self._schema, prefix=f"zerorename-spill-{self._job}-")
        return self._spill

    def _new_file(self, directory: str) -> _Open:
        name = self._name(self._task, self._job, self._opts.extension, file_index=self._file_index)
        self._file_index += 1
        rel = f"{directory}/{name}" if directory else name
        out = self._opener(rel)
        try:
            writer = open_format_writer(out, self._schema, self._opts)
        except BaseException:
            _abort(out)
            raise
        entry = _Open(rel, out, writer)
        self._open[directory] = entry
        self._rows_in_file[directory] = 0
        return entry

    def _close_dir(self, directory: str) -> None:
        entry = self._open.pop(directory)
        self._rows_in_file.pop(directory, None)
        entry.writer.close()
        entry.out.close()
        self.finished.append(FileStats(entry.rel, entry.writer.rows, entry.writer.bytes))

    def _write_file(self, directory: str, rows: pa.RecordBatch) -> None:
        """Into the directory's file (opened when it has none; rolled over at the limit)."""
        limit = self._opts.max_records_per_file
        while rows.num_rows:
            entry = self._open.get(directory) or self._new_file(directory)
            take = rows.num_rows
            if limit:
                room = limit - self._rows_in_file[directory]
                take = min(take, room)
            entry.writer.write(rows.slice(0, take) if take < rows.num_rows else rows)
            self._rows_in_file[directory] += take
            rows = rows.slice(take)
            if limit and self._rows_in_file[directory] >= limit:
                self._close_dir(directory)

    def _write_group(self, directory: str, rows: pa.RecordBatch) -> None:
        if self._placement.route(directory) is Route.SPILL:
            self._spill_for().add(directory, rows)
        else:
            self._write_file(directory, rows)
        self.rows += rows.num_rows

    def write(self, batch: pa.RecordBatch) -> None:
        cols = self._opts.partition_by
        for values, rows in split_batch(batch, cols):
            directory = partition_dir(cols, values) if cols else ""
            self._write_group(directory, rows)
        self._bound_buffers()

    def _bound_buffers(self) -> None:
        """Keep the task's buffered (not yet encoded or spilled) data under the buffer
        bound: Parquet row groups of the open files and the spill buffer together."""
        sizes = {d: e.writer.buffered for d, e in self._open.items()}
        if self._spill is not None:
            sizes[_SPILL] = self._spill.buffered
        if len(sizes) < 2:
            return
        for key in flush_order(sizes, self._buffer_bytes):
            if key == _SPILL:
                self._spill_for().flush()
            else:
                self._open[key].writer.flush()

    def open_empty(self) -> None:
        """Open the unpartitioned file with no rows: Spark's partition 0 writes one even
        when empty (a Parquet schema, a CSV header), so an empty result can be read."""
        if "" not in self._open:
            self._placement.route("")
            self._new_file("")

    def close(self) -> list[FileStats]:
        """Finish every open file, then write each spilled partition as one file, one
        being written at a time (their uploads become pending); the files written. Files
        are finished in the background, at most ``max_open_files`` at once (a finish
        waits on the store: the last part, the record), so the memory bound holds. The
        spill is deleted whatever happens."""
        closing: deque[tuple[_Open, Future[None]]] = deque()
        errors: list[BaseException] = []
        limit = self._opts.max_open_files

        def settle(entry: _Open, done: Future[None]) -> None:
            try:
                done.result()
                self.finished.append(FileStats(entry.rel, entry.writer.rows, entry.writer.bytes))
            except BaseException as exc:
                errors.append(exc)

        pool = ThreadPoolExecutor(max_workers=limit, thread_name_prefix="zerorename-close")
        try:

            def finish(directory: str) -> None:
                entry = self._open.pop(directory)
                self._rows_in_file.pop(directory, None)
                # encoded here: a file being finished holds at most its last part
                entry.writer.flush()
                while len(closing) >= limit:
                    settle(*closing.popleft())
                if errors:
                    raise errors[0]
                closing.append((entry, pool.submit(_finish_file, entry)))

            for directory in list(self._open):
                finish(directory)
            spill = self._spill
            if spill is not None:
                for spilled in self._placement.spilled:
                    for rows in spill.read(spilled):
                        self._write_file(spilled, rows)
                    if spilled in self._open:
                        finish(spilled)
        finally:
            while closing:
                settle(*closing.popleft())
            pool.shutdown(wait=True)
            if self._spill is not None:
                self._spill.close()
        if errors:
            raise errors[0]
        return self.finished

    def abort(self) -> None:
        """Abort every open file and delete the spill; finished files are left to the
        task attempt's abort."""
        while self._open:
            _, entry = self._open.popitem()
            _abort(entry.out)
        self._rows_in_file.clear()
        if self._spill is not None:
            self._spill.close()


def _finish_file(entry: _Open) -> None:
    """End the file's encoding and the file (for a background thread)."""
    entry.writer.close()
    entry.out.close()


def _abort(out: OutputFile) -> None:
    abort = getattr(out, "abort", None)
    try:
        if callable(abort):
            abort()
        else:
            out.close()
    except Exception:  # already failing: the attempt's abort cleans up the rest
        pass
