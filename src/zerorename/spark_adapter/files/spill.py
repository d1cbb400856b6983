"""One file per partition per task, whatever the row order: which partition is written
directly and which is spilled to local disk (pure), and the spill itself (Arrow IPC).

A task keeps at most ``maxOpenFiles`` output files open (each open output holds a
multipart part buffer, or a Parquet row group, in memory). The first ``maxOpenFiles``
partitions a task sees get a *slot*: their rows stream into their file as they come, and a
slot is never given back during the task (a file closed by ``maxRecordsPerFile`` rolls
over in the same slot). Rows of every other partition are *spilled*: held in a bounded
buffer, written to the task's local disk in runs (one Arrow IPC file per run, the rows of
each partition as one batch), and at the end of the task each spilled partition is written
as one file, read back run by run, one output open at a time. No partition is ever both
written directly and spilled, so no partition gets two files (``maxRecordsPerFile`` aside),
and memory stays bounded as before: the open outputs, plus the task's buffer bound shared
by Parquet row groups and the spill buffer.

The spill goes to Spark's local directories (``SPARK_LOCAL_DIRS``, which Spark sets for
every Python worker to the executor's local dirs), else to the system temporary
directory; a task's spill directory is deleted when the task ends, committed or not.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Hashable, Iterator, Mapping
from enum import Enum
from pathlib import Path
from typing import Any, Generic, TypeVar

import pyarrow as pa

#: the environment variable Spark sets for Python workers: the executor's local dirs
LOCAL_DIRS_ENV = "SPARK_LOCAL_DIRS"

#: spill runs a task keeps open for reading at once when it writes its spilled partitions
OPEN_RUNS = 128

K = TypeVar("K", bound=Hashable)


# ---------------------------------------------------------------- decisions (pure)


def spill_dirs(environ: Mapping[str, str], fallback: str) -> list[str]:
    """Spark's local directories from ``environ`` (comma-separated ``SPARK_LOCAL_DIRS``),
    or ``[fallback]`` when it names none."""
    dirs = [d.strip() for d in environ.get(LOCAL_DIRS_ENV, "").split(",")]
    return [d for d in dirs if d] or [fallback]


def pick_spill_dir(environ: Mapping[str, str], task_index: int, fallback: str) -> str:
    """The local directory task ``task_index`` spills to: one of Spark's local dirs
    (tasks spread over them, as Spark spreads its own spill files), else ``fallback``."""
    dirs = spill_dirs(environ, fallback)
    return dirs[task_index % len(dirs)]


class Route(Enum):
    """Where a partition's rows go."""

    WRITE = "write"  # into the partition's own open file (it holds a slot)
    SPILL = "spill"  # to the task's spill, written as one file at the end of the task


class Placement(Generic[K]):
    """Which partitions hold one of the ``max_open`` slots (first come, kept for the whole
    task) and which are spilled. A partition's route never changes once decided."""

    def __init__(self, max_open: int) -> None:
        if max_open < 1:
            raise ValueError("max_open must be at least 1")
        self.max_open = max_open
        self._slots: dict[K, None] = {}
        self._spilled: dict[K, None] = {}

    def route(self, key: K) -> Route:
        if key in self._slots:
            return Route.WRITE
        if key in self._spilled:
            return Route.SPILL
        if len(self._slots) < self.max_open:
            self._slots[key] = None
            return Route.WRITE
        self._spilled[key] = None
        return Route.SPILL

    @property
    def slots(self) -> list[K]:
        """Partitions written directly, in the order they came."""
        return list(self._slots)

    @property
    def spilled(self) -> list[K]:
        """Partitions spilled, in the order they came (the order they are written in)."""
        return list(self._spilled)


def flush_order(buffered: Mapping[K, int], bound: int) -> list[K]:
    """The buffers to flush, biggest first, until what stays buffered is within
    ``bound`` bytes (none when it already is)."""
    total = sum(buffered.values())
    out: list[K] = []
    for key, size in sorted(buffered.items(), key=lambda kv: -kv[1]):
        if total <= bound:
            break
        if size <= 0:
            break
        out.append(key)
        total -= size
    return out


# ---------------------------------------------------------------- the spill (local I/O)


class TaskSpill:
    """One task's spilled rows: ``add`` buffers them, ``flush`` writes the buffer to disk as
    one run, ``read(key)`` yields a partition's rows run by run, ``close`` deletes it all.

    The directory (under ``base``) is made on the first flush only; rows that never left
    the buffer are read from memory.
    """

    def __init__(self, base: str, schema: pa.Schema, prefix: str = "zerorename-spill-") -> None:
        self._base = base
        self._schema = schema
        self._prefix = prefix
        self.directory: Path | None = None
        self._buffer: dict[Hashable, list[pa.RecordBatch]] = {}
        self._buffered = 0
        #: per run: (its file, partition -> batch indices in it)
        self._runs: list[tuple[Path, dict[Hashable, list[int]]]] = []
        self._readers: dict[Path, tuple[Any, Any]] = {}
        #: runs written (kept after close)
        self.runs = 0
        self.rows = 0
        self.disk_bytes = 0
        self.closed = False

    @property
    def buffered(self) -> int:
        """Arrow bytes of spilled rows held in memory."""
        return self._buffered

    def add(self, key: Hashable, rows: pa.RecordBatch) -> None:
        if self.closed:
            raise ValueError("the task's spill is closed")
        if rows.num_rows == 0:
            return
        self._buffer.setdefault(key, []).append(rows)
        self._buffered += rows.nbytes
        self.rows += rows.num_rows

    def _new_run_path(self) -> Path:
        if self.directory is None:
            Path(self._base).mkdir(parents=True, exist_ok=True)
            self.directory = Path(tempfile.mkdtemp(prefix=self._prefix, dir=self._base))
        return self.directory / f"run-{self.runs:05d}.arrow"

    def flush(self) -> None:
        """Write what is buffered to disk as one run (each partition's rows as one batch)."""
        if not self._buffer:
            return
        path = self._new_run_path()
        index: dict[Hashable, list[int]] = {}
        n = 0
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, self._schema) as w:
            for key, batches in self._buffer.items():
                index[key] = []
                for batch in (
                    pa.Table.from_batches(batches, self._schema).combine_chunks().to_batches()
                ):
                    w.write_batch(batch)
                    index[key].append(n)
                    n += 1
        self.disk_bytes += path.stat().st_size
        self._runs.append((path, index))
        self.runs += 1
        self._buffer.clear()
        self._buffered = 0

    def read(self, key: Hashable) -> Iterator[pa.RecordBatch]:
        """Partition ``key``'s rows in the order they were added (disk runs, then memory)."""
        for path, index in self._runs:
            positions = index.get(key)
            if not positions:
                continue
            reader = self._reader(path)
            for i in positions:
                yield reader.get_batch(i)
        yield from self._buffer.get(key, [])

    def _reader(self, path: Path) -> Any:
        """An open reader of run ``path`` (kept: every spilled partition reads every run;
        at most ``OPEN_RUNS`` stay open)."""
        entry = self._readers.pop(path, None)
        if entry is None:
            source = pa.OSFile(str(path), "rb")
            entry = (source, pa.ipc.open_file(source))
        self._readers[path] = entry
        while len(self._readers) > OPEN_RUNS:
            old = next(iter(self._readers))
            self._readers.pop(old)[0].close()
        return entry[1]

    def close(self) -> None:
        """Delete the spill files and forget the buffer (idempotent; never raises)."""
        self.closed = True
        self._buffer.clear()
        self._buffered = 0
        self._runs.clear()
        for source, _ in self._readers.values():
            source.close()
        self._readers.clear()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def __enter__(self) -> TaskSpill:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
