"""Turn any upload source into a stream of parts.

Sources: bytes-like, a path, a binary file object, a sync or async iterable of bytes.
Pipes and FIFOs (a file object on one, or a FIFO's path) are streams of unknown size.
A regular file (a path, or a plain binary file object) becomes parts that are ranges of
the open file, read only while they are checksummed and sent (:func:`file_parts`, see
filebody.py). Anything else goes through :func:`part_stream`, which yields parts sized by
the plan (known size) or the growth schedule (unknown size), each assembled in a buffer
of its own, so memory is one part per part in flight plus the one being filled.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import anyio

from zerorename.aio import aiter_any
from zerorename.engine.bodies.filebody import FileRange, PartFile
from zerorename.engine.errors import EngineConfigError, PlanError
from zerorename.engine.planning import plan_known_size, stream_part_size
from zerorename.units import MiB

BytesLike = bytes | bytearray | memoryview
Source = BytesLike | str | os.PathLike[str] | BinaryIO | Iterable[bytes] | AsyncIterable[bytes]

# file reads happen in a worker thread in blocks of this size at most
_READ_BLOCK = 8 * MiB


@dataclass(frozen=True)
class Part:
    """One part: its number, body (bytes, or a range of a file), and whether it is the
    last of the object."""

    number: int
    body: bytes | bytearray | memoryview | FileRange
    last: bool

    @property
    def size(self) -> int:
        if isinstance(self.body, FileRange):
            return self.body.length
        return memoryview(self.body).nbytes


def _not_regular(f: Any) -> bool:
    """True for a file object on a descriptor that is not a regular file (pipe, FIFO)."""
    try:
        fd = f.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    return isinstance(fd, int) and not stat.S_ISREG(os.fstat(fd).st_mode)


def source_size(source: Any) -> int | None:
    """Size of a source when it can be known without reading it."""
    if isinstance(source, bytes | bytearray):
        return len(source)
    if isinstance(source, memoryview):
        return source.nbytes
    if isinstance(source, str | os.PathLike):
        try:
            mode = os.stat(source).st_mode
        except (OSError, ValueError):
            mode = 0
        if stat.S_ISREG(mode):
            return os.stat(source).st_size
        if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
            return None  # a FIFO or a device (/dev/stdin on a pipe): streamed, size unknown
        raise EngineConfigError(
            f"source path {os.fspath(source)!r} is not a readable file, FIFO or device"
        )
    if hasattr(source, "read"):
        try:
            if _not_regular(source):
                return None  # a pipe or FIFO: seekable() may say True, tell() fails
            if source.seekable():
                pos = source.tell()
                end = source.seek(0, io.SEEK_END)
                source.seek(pos)
                return int(end - pos)
        except (AttributeError, OSError, ValueError):
            return None
    return None


class _FileChunks:
    """A binary file as an async iterator of blocks read in a worker thread.

    ``block_size`` may be raised before the first read: :func:`part_stream` sets it to the
    part size of a known-size upload, so each read is one whole part, handed over without
    another copy (a file is read once, straight into the part that is sent)."""

    def __init__(self, f: BinaryIO | None, path: str | os.PathLike[str] | None = None) -> None:
        self._f = f
        self._path = path
        self.block_size = _READ_BLOCK

    def __aiter__(self) -> _FileChunks:
        return self

    async def __anext__(self) -> bytes:
        if self._f is None:
            if self._path is None:
                raise StopAsyncIteration
            self._f = await anyio.to_thread.run_sync(open, Path(self._path), "rb")
        block: bytes = await anyio.to_thread.run_sync(self._f.read, self.block_size)
        if not block:
            await self.aclose()
            raise StopAsyncIteration
        return block

    async def aclose(self) -> None:
        """Close the file when this iterator opened it (a path source)."""
        f, path = self._f, self._path
        if path is not None and f is not None:
            self._f, self._path = None, None
            await anyio.to_thread.run_sync(f.close)


def chunks_of(source: Any) -> AsyncIterator[BytesLike]:
    """Any source as an async iterator of byte blocks."""
    if isinstance(source, bytes | bytearray | memoryview):

        async def one() -> AsyncIterator[BytesLike]:
            yield source

        return one()
    if isinstance(source, str | os.PathLike):
        return _FileChunks(None, source)
    if hasattr(source, "read"):
        return _FileChunks(source)
    if isinstance(source, AsyncIterable):
        return aiter(source)
    if isinstance(source, Iterable):
        return aiter_any(source)
    raise EngineConfigError(
        f"cannot upload a {type(source).__name__}: give bytes, a path, a binary file object, "
        "or a (sync or async) iterable of bytes"
    )


async def file_parts(file: PartFile, *, part_size: int) -> AsyncGenerator[Part, None]:
    """The parts of ``file`` (planned for its size) as ranges of it; an empty file is one
    empty part."""
    plan = plan_known_size(file.size, part_size)
    if file.size == 0:
        yield Part(1, b"", last=True)
        return
    for number in range(1, plan.count + 1):
        body = file.range((number - 1) * plan.part_size, plan.part_length(number))
        yield Part(number, body, last=number == plan.count)


async def part_stream(
    chunks: AsyncIterator[BytesLike], *, part_size: int, size: int | None
) -> AsyncGenerator[Part, None]:
    """Cut ``chunks`` into parts. With a known ``size`` the plan's part size is used and a
    source that delivers more or fewer bytes is an error; otherwise parts grow with the
    stream. The last part (possibly empty) is flagged ``last``."""
    if size is not None:
        plan = plan_known_size(size, part_size)
        if isinstance(chunks, _FileChunks):
            chunks.block_size = plan.part_size  # read whole parts: no copy below

        def target(n: int) -> int:
            return plan.part_size
    else:

        def target(n: int) -> int:
            return stream_part_size(n, part_size)

    try:
        number = 1
        want = target(number)
        buf: bytearray | None = None
        total = 0
        async for chunk in chunks:
            view = memoryview(chunk)
            if not isinstance(chunk, bytes):
                view = view.cast("B")
            n = view.nbytes
            if n == 0:
                continue
            total += n
            if size is not None and total > size:
                raise PlanError(f"source delivered more than the declared {size} bytes")
            pos = 0
            while pos < n:
                if buf is None and n - pos >= want:
                    # a whole part inside the block: handed over without a copy
                    whole = pos == 0 and n == want and isinstance(chunk, bytes | bytearray)
                    yield Part(number, chunk if whole else view[pos : pos + want], last=False)
                    pos += want
                    number += 1
                    want = target(number)
                    continue
                if buf is None:
                    buf = bytearray()  # grows with the data: a tiny last part stays tiny
                take = min(want - len(buf), n - pos)
                buf += view[pos : pos + take]
                pos += take
                if len(buf) == want:
                    yield Part(number, buf, last=False)
                    buf = None
                    number += 1
                    want = target(number)
        if size is not None and total != size:
            raise PlanError(f"source delivered {total} bytes, but {size} were declared")
        if buf is None:
            yield Part(number, b"", last=True)
        else:
            yield Part(number, buf, last=True)
    finally:
        if isinstance(chunks, _FileChunks):
            await chunks.aclose()  # also when the upload stops early
