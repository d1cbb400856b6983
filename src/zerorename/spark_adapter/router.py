"""Routing one task's record batches into output files (pyarrow; no Spark, no S3).

Rows are split by the partition columns (vectorised: dictionary-encode, sort, cut runs),
the partition columns are dropped from the data (as Spark does) and each partition
directory gets a file named ``part-<task>-<jobid>-c<n><ext>``. At most
``max_open_files`` files are open at once (the least recently used one is closed and a
later batch for it starts a new file), and ``max_records_per_file`` rolls files over.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from zerorename.spark_adapter.formats import TASK_BUFFER_BYTES, FormatWriter, open_format_writer
from zerorename.spark_adapter.options import WriteOptions
from zerorename.spark_adapter.partitioning import partition_dir, value_text


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
        order = pc.sort_indices(key)
        batch = batch.take(order)
        runs = pc.run_end_encode(key.take(order))
        ends = runs.run_ends.to_pylist()
        starts = [0, *ends[:-1]]
        groups = [batch.slice(s, e - s) for s, e in zip(starts, ends, strict=True)]
    for group in groups:
        values: list[str | None] = []
        for name in columns:
            col = group.column(name)
            typ = col.type
            tz = getattr(typ, "tz", None)
            values.append(value_text(col[0].as_py(), str(typ), tz))
        yield tuple(values), group.select(data_cols)


class BatchRouter:
    """Writes one task's batches into files opened through ``opener(rel)``."""

    def __init__(
        self,
        opts: WriteOptions,
        schema: pa.Schema,
        task_index: int,
        job_id: str,
        opener: Opener,
    ) -> None:
        from zerorename.committers.paths import output_name

        self._opts = opts
        self._schema = pa.schema([f for f in schema if f.name not in opts.partition_by])
        self._task = task_index
        self._job = job_id
        self._opener = opener
        self._name = output_name
        self._open: OrderedDict[str, _Open] = OrderedDict()
        self._file_index = 0
        self._rows_in_file: dict[str, int] = {}
        self.finished: list[FileStats] = []
        self.rows = 0

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
        while len(self._open) > self._opts.max_open_files:
            old_dir, _ = next(iter(self._open.items()))
            self._close_dir(old_dir)
        return entry

    def _close_dir(self, directory: str) -> None:
        entry = self._open.pop(directory)
        self._rows_in_file.pop(directory, None)
        entry.writer.close()
        entry.out.close()
        self.finished.append(FileStats(entry.rel, entry.writer.rows, entry.writer.bytes))

    def _write_group(self, directory: str, rows: pa.RecordBatch) -> None:
        limit = self._opts.max_records_per_file
        while rows.num_rows:
            entry = self._open.get(directory)
            if entry is None:
                entry = self._new_file(directory)
            else:
                self._open.move_to_end(directory)
            take = rows.num_rows
            if limit:
                room = limit - self._rows_in_file[directory]
                take = min(take, room)
            entry.writer.write(rows.slice(0, take) if take < rows.num_rows else rows)
            self._rows_in_file[directory] += take
            self.rows += take
            rows = rows.slice(take)
            if limit and self._rows_in_file[directory] >= limit:
                self._close_dir(directory)

    def write(self, batch: pa.RecordBatch) -> None:
        cols = self._opts.partition_by
        for values, rows in split_batch(batch, cols):
            directory = partition_dir(cols, values) if cols else ""
            self._write_group(directory, rows)
        self._bound_buffers()

    def _bound_buffers(self) -> None:
        """Keep the task's buffered (not yet encoded) data under TASK_BUFFER_BYTES."""
        if len(self._open) < 2:
            return
        total = sum(e.writer.buffered for e in self._open.values())
        while total > TASK_BUFFER_BYTES:
            biggest = max(self._open.values(), key=lambda e: e.writer.buffered)
            total -= biggest.writer.buffered
            biggest.writer.flush()

    def open_empty(self) -> None:
        """Open the unpartitioned file with no rows: Spark's partition 0 writes one even
        when empty (a Parquet schema, a CSV header), so an empty result can be read."""
        if "" not in self._open:
            self._new_file("")

    def close(self) -> list[FileStats]:
        """Finish every open file (their uploads become pending); the files written."""
        for directory in list(self._open):
            self._close_dir(directory)
        return self.finished

    def abort(self) -> None:
        """Abort every open file; finished files are left to the task attempt's abort."""
        while self._open:
            _, entry = self._open.popitem()
            _abort(entry.out)
        self._rows_in_file.clear()


def _abort(out: OutputFile) -> None:
    abort = getattr(out, "abort", None)
    try:
        if callable(abort):
            abort()
        else:
            out.close()
    except Exception:  # already failing: the attempt's abort cleans up the rest
        pass
