"""Parts of a file, read where they lie.

A regular file of known size is uploaded as ranges of the open file (:class:`FileRange`),
not as buffers: a part's checksum is computed in a worker thread from fresh 1 MiB
``pread`` blocks, and its body is read again from the file while it is sent -- with
``os.sendfile`` when the connection is a plain TCP socket (the kernel hands page-cache
pages to the socket: no copy in this process), else as fresh ``pread`` blocks written
through the transport. Over HTTPS the fast path reads it once instead: checksummed as
it is sent, the checksum in an aws-chunked trailer (wire/trailer.py). A retry reads the
range again. No buffer is ever reused, so a
transport still holding unsent bytes never sees them change, and memory per part in
flight is about one block, not one part.
"""

from __future__ import annotations

import asyncio
import errno
import io
import os
import stat
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp.payload
import anyio

from zerorename.engine import checksums
from zerorename.engine.errors import PlanError, SourceChanged
from zerorename.units import MiB

#: bytes per ``pread`` (checksum pass, and bodies not sent with sendfile)
BLOCK = MiB
#: bytes per write through the transport: a TLS transport takes a write whole (it is
#: encrypted at once) and asks for a drain only after, so a connection holds about two
#: writes' worth
WRITE = 256 * 1024
#: what a part sent through a transport (TLS: no sendfile) is read and written in, and the
#: checksum pass's buffer: 16 parts in flight hold 16 of these, not 16 MiB blocks. 256 KiB
#: and 1 MiB grew the peak RSS by 24 and 44 MiB on RGW over HTTPS (512 MiB, 16 x 16 MiB),
#: 64 KiB by 15.5 (BENCHMARKS, issue 23)
TLS_WRITE = 64 * 1024
# Linux moves at most 0x7ffff000 bytes per sendfile call
_SENDFILE_MAX = 1 << 30
# errors that mean "this file or socket cannot sendfile": write the rest instead
_NO_SENDFILE = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EOVERFLOW})
# event-loop turns to wait for the request headers to leave the transport's buffer
_FLUSH_TURNS = 4

#: whether os.sendfile can be used here (Linux semantics: tested there only)
SENDFILE_AVAILABLE = sys.platform.startswith("linux") and hasattr(os, "sendfile")


class PartFile:
    """An open regular file whose bytes ``[start, start + size)`` are being uploaded.

    ``async with`` it for the upload's lifetime: a file this opened (a path source) is
    closed at exit; a caller's file object is left open, positioned after the uploaded
    bytes (as reading it would have) when the upload succeeded."""

    def __init__(self, fd: int, start: int, size: int, *, owner: Any = None) -> None:
        self.fd = fd
        self.start = start
        self.size = size
        self._owner = owner  # the caller's file object, or None when we opened ``fd``
        self._closed = False

    def range(self, offset: int, length: int) -> FileRange:
        """The range of ``length`` bytes at ``offset`` (relative to ``start``)."""
        return FileRange(self, self.start + offset, length)

    async def __aenter__(self) -> PartFile:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(success=exc_type is None)

    def close(self, *, success: bool = False) -> None:
        """Close the file we opened; position the caller's after the upload's bytes."""
        if self._closed:
            return
        self._closed = True
        if self._owner is None:
            os.close(self.fd)
        elif success:
            self._owner.seek(self.start + self.size)


def _is_plain_file_object(f: Any) -> bool:
    """A binary file object whose bytes are exactly its descriptor's: ``open(p, 'rb')``
    (or unbuffered). Wrappers that transform data (gzip, BytesIO...) are not."""
    raw = f.raw if type(f) in (io.BufferedReader, io.BufferedRandom) else f
    return type(raw) is io.FileIO and not f.closed and f.readable()


def _open_path(path: str | os.PathLike[str]) -> int:
    return os.open(Path(path), os.O_RDONLY)


async def open_part_file(source: Any, size: int | None) -> PartFile | None:
    """A :class:`PartFile` for a path or a plain binary file of a regular file (the bytes
    from its current position to its end), or None for any other source (pipes and FIFOs
    included: they are streamed as blocks). A declared
    ``size`` that is not what the file holds is a :class:`PlanError`."""
    owner: Any = None
    if not hasattr(os, "pread"):  # not a POSIX system: files are streamed like any source
        return None
    if isinstance(source, str | os.PathLike):
        # a FIFO is never opened here: opening it again to stream it would lose what its
        # writer wrote in between (and an open blocks until there is a writer)
        if not stat.S_ISREG(os.stat(source).st_mode):
            return None
        fd = await anyio.to_thread.run_sync(_open_path, source)
        start = 0
    elif _is_plain_file_object(source):
        # a pipe, FIFO or terminal (stdin) is streamed: tell() would fail (Illegal seek)
        if not stat.S_ISREG(os.fstat(source.fileno()).st_mode):
            return None
        if type(source) is io.BufferedRandom:  # bytes it was given are in the file first
            await anyio.to_thread.run_sync(source.flush)
        owner, fd, start = source, source.fileno(), source.tell()
    else:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            if owner is None:
                os.close(fd)
            return None
        held = info.st_size - start
        if size is not None and size != held:
            raise PlanError(
                f"the file holds {max(held, 0)} bytes from its current position, "
                f"but {size} were declared"
            )
    except BaseException:
        if owner is None:
            os.close(fd)
        raise
    return PartFile(fd, start, held, owner=owner)


class FileRange:
    """``length`` bytes of a :class:`PartFile` at absolute ``offset``: a part's body.

    Sized and async-iterable (fresh ``pread`` blocks), so aiohttp and botocore take it as
    a streaming body; the fast path sends it with :class:`FilePayload` instead."""

    __slots__ = ("file", "length", "offset")

    def __init__(self, file: PartFile, offset: int, length: int) -> None:
        self.file = file
        self.offset = offset
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return f"FileRange(offset={self.offset}, length={self.length})"

    def _shrunk(self) -> SourceChanged:
        return SourceChanged(
            f"the file being uploaded shrank: bytes {self.offset}..{self.offset + self.length} "
            "are no longer all there"
        )

    def blocks(self, skip: int = 0, size: int = BLOCK) -> Iterator[bytes]:
        """The range from ``skip`` on, as fresh ``pread`` blocks of up to ``size``."""
        fd = self.file.fd
        pos, end = self.offset + skip, self.offset + self.length
        while pos < end:
            block = os.pread(fd, min(size, end - pos), pos)
            if not block:
                raise self._shrunk()
            pos += len(block)
            yield block

    def exact_blocks(self, size: int) -> Iterator[bytes]:
        """The range as fresh ``pread`` blocks of exactly ``size`` bytes (the last may be
        shorter): a short read is completed, so the blocks match a framing planned ahead."""
        fd = self.file.fd
        pos, end = self.offset, self.offset + self.length
        while pos < end:
            want = min(size, end - pos)
            block = os.pread(fd, want, pos)
            while len(block) < want:  # rare: a read cut short
                more = os.pread(fd, want - len(block), pos + len(block))
                if not more:
                    raise self._shrunk()
                block += more
            pos += want
            yield block

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for block in self.blocks():
            yield block

    def read_all(self) -> bytes:
        """The whole range in memory (for botocore when it must hash the payload)."""
        data = os.pread(self.file.fd, self.length, self.offset)
        if len(data) != self.length:
            raise self._shrunk()
        return data

    def reused_blocks(self) -> Iterator[memoryview]:
        """The range as views of one :data:`TLS_WRITE`-sized buffer, refilled in place with
        ``preadv``: for a pass that only reads the bytes (the checksum). Each view is
        valid until the next is asked for. Fresh 1 MiB blocks read in worker threads
        grew the peak RSS by about 10 MiB more (16 parts in flight, HTTPS, two-pass)."""
        fd = self.file.fd
        buf = bytearray(min(TLS_WRITE, self.length))
        view = memoryview(buf)
        pos, end = self.offset, self.offset + self.length
        while pos < end:
            n = os.preadv(fd, [view[: min(TLS_WRITE, end - pos)]], pos)
            if n <= 0:
                raise self._shrunk()
            pos += n
            yield view[:n]

    def checksum(self, algorithm: str) -> str | None:
        """The range's checksum (blocking: run it in a worker thread)."""
        if not hasattr(os, "preadv"):
            return checksums.compute_blocks(algorithm, self.blocks())
        return checksums.compute_blocks(algorithm, self.reused_blocks())

    def prefetch(self) -> None:
        """Ask the kernel to start reading the range into the page cache (a hint, for a
        part with no checksum pass; blocking: run it in a worker thread)."""
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(self.file.fd, self.offset, self.length, os.POSIX_FADV_WILLNEED)

    def check(self) -> None:
        """Raise :class:`SourceChanged` when the file no longer holds the whole range
        (a failed send is then the file's fault, not the network's: not retried)."""
        if os.fstat(self.file.fd).st_size < self.offset + self.length:
            raise self._shrunk()


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


async def _writable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    """Wait until the socket ``fd`` can take more bytes."""
    waiter: asyncio.Future[None] = loop.create_future()
    loop.add_writer(fd, _wake, waiter)
    try:
        await waiter
    finally:
        loop.remove_writer(fd)


class FilePayload(aiohttp.payload.Payload):
    """A :class:`FileRange` as an aiohttp request body.

    With ``zero_copy`` (plain TCP only: never under TLS) the headers are flushed and the
    range goes to the socket with ``os.sendfile`` on a duplicate of its descriptor (the
    duplicate keeps the socket, and so the descriptor number, ours while we write, even
    if the connection is closed meanwhile); whatever sendfile cannot send is written as
    fresh ``pread`` blocks through the transport, behind what was sent, in writes of
    :data:`WRITE` bytes (a TLS transport holds about two writes per connection). Writing
    can be repeated: each pass reads the range again."""

    _autoclose = True  # nothing to close: the file belongs to the upload

    def __init__(self, body: FileRange, *, zero_copy: bool, timeout: float) -> None:
        super().__init__(body)
        self._range = body
        self._size = body.length
        self._zero_copy = zero_copy and SENDFILE_AVAILABLE
        self._timeout = timeout
        #: bytes this payload moved with sendfile (over every write)
        self.zero_copy_bytes = 0

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        raise TypeError("a file part is a binary body")

    async def write(self, writer: Any) -> None:
        await self.write_with_length(writer, None)

    async def write_with_length(self, writer: Any, content_length: int | None) -> None:
        sent = await self._sendfile(writer) if self._zero_copy else 0
        # read in writes' sizes: a connection holds one write's block, not a 1 MiB one
        for block in self._range.blocks(sent, TLS_WRITE):
            await writer.write(block)
            await asyncio.sleep(0)  # a reset closes the transport before the next block

    async def _sendfile(self, writer: Any) -> int:
        """Send what sendfile can; returns how many bytes of the range it sent."""
        transport = getattr(writer, "transport", None)
        send_headers = getattr(writer, "send_headers", None)
        if transport is None or send_headers is None:
            return 0
        if transport.get_extra_info("ssl_object") is not None:
            return 0
        sock = transport.get_extra_info("socket")
        if sock is None or transport.is_closing():
            return 0
        send_headers()
        for _ in range(_FLUSH_TURNS):
            if not transport.get_write_buffer_size():
                break
            await asyncio.sleep(0)  # uvloop writes small buffers at the end of a loop turn
        else:
            return 0  # the headers are still queued: the body goes through the transport too
        loop = asyncio.get_running_loop()
        out = os.dup(sock.fileno())
        try:
            return await self._send_range(loop, out)
        finally:
            os.close(out)

    async def _send_range(self, loop: asyncio.AbstractEventLoop, out: int) -> int:
        rng = self._range
        fd = rng.file.fd
        pos, end = rng.offset, rng.offset + rng.length
        while pos < end:
            try:
                n = os.sendfile(out, fd, pos, min(end - pos, _SENDFILE_MAX))
            except BlockingIOError:
                # no room for this long: the peer stopped reading (TimeoutError: retried)
                async with asyncio.timeout(self._timeout):
                    await _writable(loop, out)
                continue
            except OSError as exc:
                if exc.errno in _NO_SENDFILE:
                    break
                raise
            if n == 0:
                raise rng._shrunk()
            pos += n
            self.zero_copy_bytes += n
        return pos - rng.offset


__all__ = [
    "BLOCK",
    "SENDFILE_AVAILABLE",
    "FilePayload",
    "FileRange",
    "PartFile",
    "open_part_file",
]


class SlicedBody:
    """A request body handed to aiohttp as memoryview slices, one fresh pass per
    attempt: the transport never buffers a second copy of a whole part."""

    def __init__(self, body: bytes | bytearray | memoryview, slice_size: int) -> None:
        self.view = memoryview(body).cast("B")
        self._slice = slice_size

    def __len__(self) -> int:
        return self.view.nbytes

    async def __aiter__(self) -> AsyncIterator[memoryview]:
        view, size = self.view, self._slice
        for start in range(0, view.nbytes, size):
            yield view[start : start + size]


def _crt_signs() -> bool:
    from botocore.compat import HAS_CRT

    return bool(HAS_CRT)


async def for_botocore(body: Any) -> Any:
    """``body`` in a form botocore's signer takes. With awscrt installed (``pip install
    boto3[crt]``, the AWS CLI) botocore signs S3 requests with the CRT, which wants the
    body as bytes or a seekable file: a sliced body or a file range is handed over whole
    then (a file range read in a worker thread). Without awscrt, as it is."""
    if not isinstance(body, SlicedBody | FileRange) or not _crt_signs():
        return body
    if isinstance(body, SlicedBody):
        return body.view
    return await anyio.to_thread.run_sync(body.read_all)
