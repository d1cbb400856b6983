"""The task side of a :class:`~zerorename.testing.memstore.MemoryStore`: uploads of whole
outputs as the engine makes them (one PutObject, or a multipart upload, deferred or not),
and the writers it hands to task attempts (an output gathered in memory, uploaded when it
is closed cleanly)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from types import TracebackType
from typing import Any, Literal, overload

import anyio

from zerorename.aio import aiter_any
from zerorename.engine.bodies.writers import AfterCreate
from zerorename.engine.events import ProgressCallback
from zerorename.engine.planning import validate_bucket, validate_key
from zerorename.engine.results import PartInfo, PendingUpload, UploadResult
from zerorename.engine.retry import EngineStats
from zerorename.portal import LoopPortal

#: uploads an output's bytes (as the store's deferred or completed upload)
Send = Callable[[bytes], Coroutine[Any, Any, UploadResult | PendingUpload]]
AfterClose = Callable[[UploadResult | PendingUpload], Awaitable[None]]


class MemoryWriter:
    """An output written into memory, uploaded by ``send`` when the block ends cleanly
    (an error inside uploads nothing)."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._buf = bytearray()
        self.result: UploadResult | PendingUpload | None = None

    @property
    def bytes_written(self) -> int:
        return len(self._buf)

    async def __aenter__(self) -> MemoryWriter:
        return self

    async def write(self, data: bytes | bytearray | memoryview) -> int:
        self._buf += data
        await anyio.lowlevel.checkpoint()
        return memoryview(data).nbytes

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.result = await self._send(bytes(self._buf))


class MemorySyncWriter:
    """A blocking :class:`MemoryWriter` for a thread other than ``loop``'s."""

    def __init__(self, send: Send, loop: asyncio.AbstractEventLoop) -> None:
        self._send = send
        self._portal = LoopPortal.attach(loop)
        self._buf = bytearray()
        self._after_close: AfterClose | None = None
        self.closed = False
        self.result: UploadResult | PendingUpload | None = None

    @property
    def bytes_written(self) -> int:
        return len(self._buf)

    def write(self, data: Any) -> int:
        self._buf += data
        return memoryview(data).nbytes

    def tell(self) -> int:
        return len(self._buf)

    def after_close(self, hook: AfterClose) -> None:
        self._after_close = hook

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.result = result = self._portal.run(self._send(bytes(self._buf)))
            if self._after_close is not None:
                self._portal.call(self._after_close, result)

    def abort(self) -> None:
        self.closed = True


class UploadSide:
    """upload/open_writer/open_sync_writer over a store's single requests (mixed into
    :class:`~zerorename.testing.memstore.MemoryStore`, which provides them)."""

    part_size: int
    checksum: str
    stats: EngineStats

    async def put_object(self, bucket: str, key: str, data: bytes) -> str:
        raise NotImplementedError

    async def _create(self, bucket: str, key: str) -> str:
        raise NotImplementedError

    async def _upload_part(
        self, bucket: str, key: str, upload_id: str, number: int, data: bytes
    ) -> PartInfo:
        raise NotImplementedError

    async def complete(self, p: PendingUpload) -> UploadResult:
        raise NotImplementedError

    async def _abort_id(self, bucket: str, key: str, upload_id: str) -> bool:
        raise NotImplementedError

    async def _send(
        self, bucket: str, key: str, data: bytes, *, defer: bool, after: AfterCreate | None = None
    ) -> UploadResult | PendingUpload:
        """Upload ``data`` like the engine: one PutObject when it fits a part and is not
        deferred, else a multipart upload (aborted if anything fails); ``after`` runs once
        the upload exists, before its parts (raising aborts it)."""
        if not defer and len(data) <= self.part_size:
            etag = await self.put_object(bucket, key, data)
            self.stats.uploads_completed += 1
            return UploadResult(bucket, key, etag, len(data), 1, None)
        upload_id = await self._create(bucket, key)
        try:
            if after is not None:
                await after()
            parts = []
            for n, start in enumerate(range(0, max(1, len(data)), self.part_size), 1):
                chunk = data[start : start + self.part_size]
                parts.append(await self._upload_part(bucket, key, upload_id, n, chunk))
            record = PendingUpload(
                bucket=bucket,
                key=key,
                upload_id=upload_id,
                parts=tuple(parts),
                length=len(data),
                checksum_algorithm=None if self.checksum == "none" else self.checksum,
            )
            if defer:
                self.stats.uploads_deferred += 1
                return record
            return await self.complete(record)
        except BaseException:
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(Exception):
                    await self._abort_id(bucket, key, upload_id)
            raise

    @overload
    async def upload(
        self,
        bucket: str,
        key: str,
        source: Any,
        *,
        defer: Literal[True],
        progress: ProgressCallback | None = ...,
        size: int | None = ...,
        after_create: AfterCreate | None = ...,
        **object_args: Any,
    ) -> PendingUpload: ...

    @overload
    async def upload(
        self,
        bucket: str,
        key: str,
        source: Any,
        *,
        defer: Literal[False] = ...,
        progress: ProgressCallback | None = ...,
        size: int | None = ...,
        after_create: AfterCreate | None = ...,
        **object_args: Any,
    ) -> UploadResult: ...

    async def upload(
        self,
        bucket: str,
        key: str,
        source: Any,
        *,
        defer: bool = False,
        progress: ProgressCallback | None = None,
        size: int | None = None,
        after_create: AfterCreate | None = None,
        **object_args: Any,
    ) -> UploadResult | PendingUpload:
        """Upload bytes, a path, a binary file or a (sync or async) iterable of bytes."""
        validate_bucket(bucket)
        validate_key(key)
        if isinstance(source, bytes | bytearray | memoryview):
            data = bytes(source)
        elif isinstance(source, str | os.PathLike):
            data = await anyio.Path(source).read_bytes()
        elif hasattr(source, "read"):
            data = bytes(source.read())
        else:
            data = b"".join([bytes(b) async for b in aiter_any(source)])
        return await self._send(bucket, key, data, defer=defer, after=after_create)

    def open_writer(
        self,
        bucket: str,
        key: str,
        *,
        defer: bool = False,
        progress: ProgressCallback | None = None,
        after_create: AfterCreate | None = None,
        **object_args: Any,
    ) -> MemoryWriter:
        validate_bucket(bucket)
        validate_key(key)
        return MemoryWriter(partial(self._send, bucket, key, defer=defer, after=after_create))

    def open_sync_writer(
        self,
        bucket: str,
        key: str,
        *,
        loop: Any,
        defer: bool = False,
        progress: ProgressCallback | None = None,
        after_create: AfterCreate | None = None,
        **object_args: Any,
    ) -> MemorySyncWriter:
        validate_bucket(bucket)
        validate_key(key)
        send = partial(self._send, bucket, key, defer=defer, after=after_create)
        return MemorySyncWriter(send, loop)


__all__ = ["MemorySyncWriter", "MemoryWriter", "Send", "UploadSide"]
