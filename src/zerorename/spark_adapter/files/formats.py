"""Streaming file-format writers over a binary sink (pyarrow; no Spark, no S3).

Each writer takes Arrow record batches and writes encoded bytes into a sink as it goes:
nothing holds a whole file. Parquet buffers one row group (``ROW_GROUP_BYTES`` of Arrow
data) so files do not end up with a row group per Spark batch.
"""

from __future__ import annotations

from typing import Any, Protocol

import pyarrow as pa

from zerorename.spark_adapter.errors import OptionError
from zerorename.spark_adapter.files.csvformat import CsvEncoder, parse_dialect, parse_time_formats
from zerorename.spark_adapter.files.jsonformat import JsonEncoder
from zerorename.spark_adapter.files.partitioning import check_partition_columns
from zerorename.spark_adapter.options import WriteOptions
from zerorename.units import MiB

#: Arrow bytes buffered before a Parquet row group is written.
ROW_GROUP_BYTES = 32 * MiB
#: Arrow bytes one task may hold in Parquet row-group buffers across all its open files;
#: past it the largest buffer is written out early (a smaller row group, bounded memory).
TASK_BUFFER_BYTES = 96 * MiB

_STREAM_CODECS = {"gzip": "gzip", "bzip2": "bz2", "zstd": "zstd"}


class Sink(Protocol):
    """Where a format writer's encoded bytes go (an output file; never closed here)."""

    def write(self, data: Any, /) -> Any: ...


class FormatWriter(Protocol):
    """Encodes batches into a sink; ``close`` flushes and ends the file (not the sink)."""

    rows: int

    @property
    def bytes(self) -> int:
        """Encoded bytes written into the sink so far."""
        ...

    def write(self, batch: pa.RecordBatch) -> None: ...

    @property
    def buffered(self) -> int:
        """Arrow bytes held until the next flush (0 for streaming formats)."""
        ...

    def flush(self) -> None:
        """Encode what is buffered now."""
        ...

    def close(self) -> None: ...


class _SinkView:
    """The one file adapter between pyarrow and an output file: pyarrow may 'close' it
    without ending the upload, and it counts the bytes written (the file's size)."""

    def __init__(self, sink: Sink) -> None:
        self._sink = sink
        self.bytes = 0
        self.closed = False

    def write(self, data: Any) -> int:
        self._sink.write(data)
        n = memoryview(data).nbytes
        self.bytes += n
        return n

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def tell(self) -> int:
        return self.bytes

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


class _Writer:
    """What every format shares: the sink view, rows written, bytes encoded."""

    def __init__(self, sink: Sink) -> None:
        self._view = _SinkView(sink)
        self.rows = 0

    @property
    def bytes(self) -> int:
        return self._view.bytes


class _Streaming(_Writer):
    """Formats that encode each batch as it comes hold nothing back."""

    @property
    def buffered(self) -> int:
        return 0

    def flush(self) -> None:
        pass


def _stream(view: _SinkView, codec: str) -> tuple[Any, Any]:
    """(stream to write encoded bytes to, compressed stream to close or None)."""
    if codec == "none":
        return view, None
    compressed = pa.CompressedOutputStream(view, _STREAM_CODECS[codec])
    return compressed, compressed


class ParquetWriter(_Writer):
    def __init__(self, sink: Sink, schema: pa.Schema, opts: WriteOptions) -> None:
        import pyarrow.parquet as pq

        super().__init__(sink)
        self._pending: list[pa.RecordBatch] = []
        self._pending_bytes = 0
        codec = None if opts.compression == "none" else opts.compression
        self._writer = pq.ParquetWriter(self._view, schema, compression=codec)

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        self._pending.append(batch)
        self._pending_bytes += batch.nbytes
        self.rows += batch.num_rows
        if self._pending_bytes >= ROW_GROUP_BYTES:
            self.flush()

    @property
    def buffered(self) -> int:
        return self._pending_bytes

    def flush(self) -> None:
        if self._pending:
            table = pa.Table.from_batches(self._pending)
            self._writer.write_table(table, row_group_size=table.num_rows)
            self._pending, self._pending_bytes = [], 0

    def close(self) -> None:
        self.flush()
        self._writer.close()


class _TextFormat(_Streaming):
    """Line formats: encoded text through the (compressed) stream."""

    def __init__(self, sink: Sink, opts: WriteOptions) -> None:
        super().__init__(sink)
        self._out, self._compressed = _stream(self._view, opts.compression)
        self._fmt = dict(opts.format_options)

    def _emit(self, data: bytes) -> None:
        if data:
            self._out.write(data)

    def close(self) -> None:
        if self._compressed is not None:
            self._compressed.close()


class CsvWriter(_TextFormat):
    """CSV as Spark's writer writes it (see :mod:`csvformat`), header first if asked."""

    def __init__(self, sink: Sink, schema: pa.Schema, opts: WriteOptions) -> None:
        super().__init__(sink, opts)
        dialect = parse_dialect(self._fmt)
        self._enc = CsvEncoder(schema, dialect, parse_time_formats(self._fmt))
        if dialect.header:
            self._emit(self._enc.header())

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows:
            self._emit(self._enc.batch(batch))
            self.rows += batch.num_rows


class JsonWriter(_TextFormat):
    """JSON Lines, as Spark writes them: one object per row, null fields left out unless
    ``ignoreNullFields`` is false (see :mod:`jsonformat`)."""

    def __init__(self, sink: Sink, schema: pa.Schema, opts: WriteOptions) -> None:
        super().__init__(sink, opts)
        self._enc = JsonEncoder(schema, self._fmt)

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows:
            self._emit(self._enc.batch(batch))
            self.rows += batch.num_rows


class TextWriter(_TextFormat):
    """One line per row of the single string column (Spark's text format; null: an
    empty line, as Spark writes it)."""

    def __init__(self, sink: Sink, schema: pa.Schema, opts: WriteOptions) -> None:
        if len(schema) != 1 or not (
            pa.types.is_string(schema[0].type) or pa.types.is_large_string(schema[0].type)
        ):
            raise OptionError(
                "format text needs exactly one string column (besides partition columns); "
                f"got {schema}"
            )
        super().__init__(sink, opts)
        self._sep = self._fmt.get("linesep", "\n")

    def write(self, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        values = batch.column(0).to_pylist()
        text = "".join(("" if v is None else v) + self._sep for v in values)
        self._emit(text.encode("utf-8"))
        self.rows += batch.num_rows


def open_format_writer(sink: Sink, schema: pa.Schema, opts: WriteOptions) -> FormatWriter:
    """A writer for ``opts.format`` writing into ``sink`` (which it never closes)."""
    if opts.format == "parquet":
        return ParquetWriter(sink, schema, opts)
    if opts.format == "csv":
        return CsvWriter(sink, schema, opts)
    if opts.format == "json":
        return JsonWriter(sink, schema, opts)
    return TextWriter(sink, schema, opts)


def check_schema(schema: pa.Schema, opts: WriteOptions) -> None:
    """Refuse, on the driver, a schema the format or partitioning cannot write."""
    check_partition_columns(list(schema.names), opts.partition_by)
    data_fields = [f for f in schema if f.name not in opts.partition_by]
    if opts.format in ("text", "csv", "json"):  # refuses columns the format cannot hold
        open_format_writer(_NullSink(), pa.schema(data_fields), opts)


class _NullSink:
    def write(self, data: Any) -> int:
        return len(data)
