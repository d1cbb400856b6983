"""Pendingsets read once per job commit.

The scan fetches each pendingset into a :class:`Spool` (memory up to ``SPOOL_MEMORY``, then
a local spill file), parses it to its end and checks every record before anything is
completed. What it keeps for the completion is a :class:`LoadedSet`: the parsed uploads
while the job's ``KEEP_PARSED`` budget allows, else the bytes in the spill file, parsed
again (a line at a time) when the pendingset's turn comes. Memory stays bounded however
many uploads a job has, and no pendingset is read from the store twice.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO

import anyio.lowlevel

from zerorename.committers.codec.pending import (
    PendingRecord,
    PendingSetHeader,
    parse_pendingset,
    read_pendingset,
)
from zerorename.committers.errors import RecordNotFound
from zerorename.committers.objectstore import Store
from zerorename.committers.store import READ_CHUNK
from zerorename.engine.errors import ObjectNotFound
from zerorename.engine.results import PendingUpload
from zerorename.units import MiB

#: a pendingset up to this size is parsed whole (a line at a time); a larger one is parsed
#: streaming from the spill file. It is held in memory while it is read when it fits in
#: its share of SCAN_MEMORY.
SPOOL_MEMORY = 4 * MiB
#: bytes of pendingsets held in memory while they are read, all reads of a scan together:
#: each in-flight read's spool keeps at most its share in memory, the rest is spilled.
SCAN_MEMORY = 32 * MiB
#: bytes of pendingsets whose parsed uploads a job commit keeps from the scan to the
#: completion (the parsed form takes somewhat more memory); the others are parsed again.
KEEP_PARSED = 16 * MiB
#: records parsed between two checkpoints, so the event loop (and the progress reports)
#: go on while a large pendingset is checked.
_CHECKPOINT_EVERY = 2000


class SpillFile:
    """One anonymous local temporary file that spools append their bytes to; created on
    the first append, removed by :meth:`close` (and by the system if the process dies)."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._size = 0

    def append(self, data: bytes) -> tuple[int, int]:
        """Store ``data``; returns its (offset, length) in the file."""
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="zerorename-spill-")  # noqa: SIM115
        self._file.seek(self._size)
        self._file.write(data)
        where = (self._size, len(data))
        self._size += len(data)
        return where

    def read(self, offset: int, length: int) -> bytes:
        assert self._file is not None
        self._file.seek(offset)
        data = self._file.read(length)
        if len(data) != length:
            raise OSError(f"spill file: {len(data)} of {length} bytes at {offset}")
        return data

    @property
    def size(self) -> int:
        return self._size

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class Spool:
    """One pendingset's bytes: in memory while they fit in ``memory_limit``, else as
    segments of a :class:`SpillFile`."""

    def __init__(self, spill: SpillFile, memory_limit: int | None = None) -> None:
        self._spill = spill
        self._limit = SPOOL_MEMORY if memory_limit is None else memory_limit
        self._chunks: list[bytes] = []
        self._segments: list[tuple[int, int]] = []
        self.size = 0

    def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self._segments or self.size > self._limit:
            self.spill()
            self._segments.append(self._spill.append(chunk))
        else:
            self._chunks.append(chunk)

    @property
    def in_memory(self) -> bool:
        return not self._segments

    def spill(self) -> None:
        """Move the bytes held in memory to the spill file."""
        if self._chunks:
            self._segments.append(self._spill.append(b"".join(self._chunks)))
            self._chunks = []

    def data(self) -> bytes:
        """All the bytes at once."""
        return b"".join(self.chunks())

    def chunks(self) -> Iterator[bytes]:
        """The bytes in order, in pieces of at most READ_CHUNK from the spill file."""
        yield from self._chunks
        for offset, length in self._segments:
            for at in range(offset, offset + length, READ_CHUNK):
                yield self._spill.read(at, min(READ_CHUNK, offset + length - at))


def parse_spool(
    spool: Spool, location: str, job_id: str
) -> Iterator[PendingRecord | PendingSetHeader]:
    """Each record, then the header once the pendingset parsed to its end. A pendingset up
    to SPOOL_MEMORY is parsed whole (line at a time) before the first record comes."""
    if spool.size <= SPOOL_MEMORY:
        header, records = read_pendingset(spool.data(), location, expect_job_id=job_id)
        yield from records
        yield header
    else:
        yield from parse_pendingset(spool.chunks(), location, expect_job_id=job_id)


async def fetch_spool(
    engine: Store, bucket: str, key: str, spill: SpillFile, memory_limit: int | None = None
) -> Spool:
    """Read a pendingset from the store into a spool (``memory_limit``: see :class:`Spool`)."""
    spool = Spool(spill, memory_limit)
    try:
        async for chunk in engine.iter_object(bucket, key, chunk_size=READ_CHUNK):
            spool.write(chunk)
    except ObjectNotFound:
        raise RecordNotFound("pendingset does not exist", location=f"s3://{bucket}/{key}") from None
    return spool


@dataclass
class LoadedSet:
    """A pendingset parsed to its end and checked: its uploads, or the spool to parse
    them from again."""

    location: str
    job_id: str
    header: PendingSetHeader
    count: int
    bytes: int
    #: the pendingset's size in bytes
    size: int
    kept: tuple[PendingUpload, ...] | None
    spool: Spool | None

    def uploads(self) -> Iterator[PendingUpload]:
        if self.kept is not None:
            yield from self.kept
            return
        assert self.spool is not None
        for item in parse_spool(self.spool, self.location, self.job_id):
            if isinstance(item, PendingRecord):
                yield item.upload


class PendingSetCache:
    """What one job commit read of its pendingsets, by plan index, between the scan and
    the completion; the spill file lives as long as the cache (a context manager).
    ``readers``: pendingsets read at once, each spool's share of SCAN_MEMORY."""

    def __init__(self, keep_parsed: int | None = None, *, readers: int = 8) -> None:
        self.spill = SpillFile()
        self._budget = KEEP_PARSED if keep_parsed is None else keep_parsed
        self.spool_memory = min(SPOOL_MEMORY, SCAN_MEMORY // max(1, readers))
        self._sets: dict[int, LoadedSet] = {}

    def __enter__(self) -> PendingSetCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._sets.clear()
        self.spill.close()

    @property
    def kept(self) -> int:
        """Pendingsets held parsed."""
        return sum(s.kept is not None for s in self._sets.values())

    def pop(self, index: int) -> LoadedSet | None:
        """Take pendingset ``index`` out (its parsed uploads no longer count)."""
        loaded = self._sets.pop(index, None)
        if loaded is not None and loaded.kept is not None:
            self._budget += loaded.size
        return loaded

    async def load(
        self,
        index: int,
        engine: Store,
        bucket: str,
        key: str,
        job_id: str,
        on_record: Callable[[PendingRecord, str], None],
    ) -> LoadedSet:
        """Fetch, parse to the end and check pendingset ``index`` (``on_record`` runs for
        each record and may raise); held under ``index`` until :meth:`pop`."""
        location = f"s3://{bucket}/{key}"
        spool = await fetch_spool(engine, bucket, key, self.spill, self.spool_memory)
        keep = spool.size <= self._budget
        if keep:
            self._budget -= spool.size
        kept: list[PendingUpload] = []
        count = nbytes = 0
        header: PendingSetHeader | None = None
        for item in parse_spool(spool, location, job_id):
            if isinstance(item, PendingRecord):
                on_record(item, location)
                count += 1
                nbytes += item.upload.length
                if keep:
                    kept.append(item.upload)
                if count % _CHECKPOINT_EVERY == 0:
                    await anyio.lowlevel.checkpoint()
            else:
                header = item
        assert header is not None
        loaded = LoadedSet(location, job_id, header, count, nbytes, spool.size, None, None)
        if keep:
            loaded.kept = tuple(kept)
        else:
            spool.spill()
            loaded.spool = spool
        self._sets[index] = loaded
        return loaded
