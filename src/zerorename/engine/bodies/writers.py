"""File-like writers that stream into a multipart upload.

:class:`AsyncUploadWriter` is used on the event loop (``async with``); it gathers writes
into whole parts and hands them to the upload through a one-slot channel, so a fast
producer waits (backpressure). :class:`SyncUploadWriter` is a blocking ``io.RawIOBase``
for another thread (pyarrow's and csv's writers write into it); it gathers whole parts
on the caller's thread and hands each to the loop through a :class:`LoopPortal`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import io
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any, Protocol

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from zerorename.aio import to_the_end
from zerorename.engine.bodies.sources import BytesLike, Part, part_stream
from zerorename.engine.config import EngineConfig
from zerorename.engine.errors import EngineError
from zerorename.engine.events import ProgressCallback
from zerorename.engine.results import PendingUpload, UploadResult
from zerorename.portal import LoopPortal

#: what an upload runs once it exists (``UploadEngine.upload_parts``'s ``after_create``)
AfterCreate = Callable[[], Coroutine[Any, Any, None]]


class PartUploader(Protocol):
    """What a writer needs of :class:`zerorename.engine.UploadEngine` (so this module
    does not import the engine that imports it)."""

    @property
    def config(self) -> EngineConfig: ...

    async def upload_parts(
        self,
        bucket: str,
        key: str,
        parts: AsyncGenerator[Part, None],
        *,
        defer: bool = False,
        progress: ProgressCallback | None = None,
        after_create: AfterCreate | None = None,
        **object_args: Any,
    ) -> UploadResult | PendingUpload: ...


class _PartGatherer:
    """Gathers written bytes into blocks of exactly ``size`` bytes (copies once). The buffer
    grows with the data, so a writer of a small file never holds a whole part size."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.buf = bytearray()
        self.total = 0

    def add(self, data: BytesLike) -> list[bytearray]:
        view = memoryview(data).cast("B")
        full: list[bytearray] = []
        pos, n = 0, view.nbytes
        while pos < n:
            take = min(self.size - len(self.buf), n - pos)
            self.buf += view[pos : pos + take]
            pos += take
            if len(self.buf) == self.size:
                full.append(self.buf)
                self.buf = bytearray()
        self.total += n
        return full

    def rest(self) -> bytearray | None:
        if not self.buf:
            return None
        out, self.buf = self.buf, bytearray()
        return out


async def _drain(recv: MemoryObjectReceiveStream[BytesLike]) -> AsyncIterator[BytesLike]:
    async with recv:
        async for block in recv:
            yield block


class AsyncUploadWriter:
    """``async with engine.open_writer(bucket, key) as w: await w.write(data)``.

    The upload runs in a task the writer owns: it is awaited when the block ends and
    cancelled (which aborts the upload) when the block fails, so nothing outlives the
    writer. A task (not a task group in the caller's task) lets a program keep many writers
    open and close them in any order, as a partition router does.
    """

    def __init__(
        self,
        engine: PartUploader,
        bucket: str,
        key: str,
        *,
        defer: bool,
        progress: ProgressCallback | None,
        object_args: dict[str, Any],
        after_create: AfterCreate | None = None,
    ) -> None:
        self._engine = engine
        self.bucket, self.key = bucket, key
        self._defer = defer
        self._progress = progress
        self._after_create = after_create
        self._args = object_args
        self._gather = _PartGatherer(engine.config.part_size)
        self._send: MemoryObjectSendStream[BytesLike] | None = None
        self._task: asyncio.Task[None] | None = None
        self._error: BaseException | None = None
        self.result: UploadResult | PendingUpload | None = None

    async def __aenter__(self) -> AsyncUploadWriter:
        send, recv = anyio.create_memory_object_stream[BytesLike](1)
        self._send = send
        self._task = asyncio.get_running_loop().create_task(self._run(recv))
        return self

    async def _run(self, recv: MemoryObjectReceiveStream[BytesLike]) -> None:
        parts = part_stream(_drain(recv), part_size=self._engine.config.part_size, size=None)
        try:
            self.result = await self._engine.upload_parts(
                self.bucket,
                self.key,
                parts,
                defer=self._defer,
                progress=self._progress,
                after_create=self._after_create,
                **self._args,
            )
        except Exception as exc:
            self._error = exc
            recv.close()

    @property
    def bytes_written(self) -> int:
        return self._gather.total

    async def write(self, data: BytesLike) -> int:
        """Buffer ``data``; whole parts go to the upload (waits while it is busy)."""
        if self._send is None:
            raise EngineError("use the writer inside `async with engine.open_writer(...)`")
        n = memoryview(data).nbytes
        for block in self._gather.add(data):
            await self._hand_over(block)
        return n

    async def _hand_over(self, block: BytesLike) -> None:
        assert self._send is not None
        try:
            await self._send.send(block)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            # the upload ended: its error is set once its task has finished (the part
            # stream closes first), so wait for that and raise the upload's own error
            if self._error is None and self._task is not None:
                await asyncio.wait([self._task])
            raise self._failure() from None

    def _failure(self) -> BaseException:
        if self._error is not None:
            return self._error
        return EngineError(f"upload of s3://{self.bucket}/{self.key} is no longer running")

    async def _cancel(self) -> None:
        """Cancel the upload task and wait until it has aborted the upload."""
        assert self._task is not None
        self._task.cancel()
        await asyncio.wait([self._task])

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        assert self._send is not None and self._task is not None
        if exc is not None:
            await self._send.aclose()
            await self._cancel()
            return False
        try:
            rest = self._gather.rest()
            if rest is not None:
                await self._hand_over(rest)
            await self._send.aclose()
            await asyncio.shield(self._task)
        except BaseException:
            if not self._task.done():
                await to_the_end(self._cancel())
            raise
        if self._error is not None:
            raise self._error
        return False


#: what ``SyncUploadWriter.after_close`` runs with the finished upload.
AfterClose = Callable[[UploadResult | PendingUpload], Awaitable[None]]


class SyncUploadWriter(io.RawIOBase):
    """A blocking binary file that streams into an upload run on ``loop`` (the engine's
    loop, or a portal onto it).

    Use it from any thread but the loop's. ``close()`` completes (or defers) and sets
    ``result``; ``abort()`` aborts; leaving a ``with`` block by an exception aborts.
    ``bytes_written``/``tell()`` count what was written: the one byte count of a file.
    """

    def __init__(
        self,
        engine: PartUploader,
        bucket: str,
        key: str,
        loop: asyncio.AbstractEventLoop | LoopPortal,
        *,
        defer: bool,
        progress: ProgressCallback | None,
        object_args: dict[str, Any],
        after_create: AfterCreate | None = None,
    ) -> None:
        super().__init__()
        self._portal = loop if isinstance(loop, LoopPortal) else LoopPortal.attach(loop)
        self.bucket, self.key = bucket, key
        self._gather = _PartGatherer(engine.config.part_size)
        self._error: BaseException | None = None
        self._scope: anyio.CancelScope | None = None
        self._ready = threading.Event()
        self._send: MemoryObjectSendStream[BytesLike] | None = None
        self.result: UploadResult | PendingUpload | None = None
        self._finished = True  # until the upload runs: close() then has nothing to finish
        self._future: concurrent.futures.Future[UploadResult | PendingUpload | None] | None = None
        self._after_close: AfterClose | None = None
        if self._portal.in_loop_thread():
            raise EngineError(
                "SyncUploadWriter blocks: use it from another thread than the event loop's "
                "(on the loop, use engine.open_writer)"
            )
        self._finished = False
        self._future = self._portal.start(
            self._run(engine, defer, progress, after_create, object_args)
        )
        self._ready.wait()

    @property
    def portal(self) -> LoopPortal:
        """The portal onto the upload's loop."""
        return self._portal

    def after_close(self, hook: AfterClose) -> None:
        """Run ``await hook(result)`` on the loop when ``close()`` has finished the upload,
        before ``close()`` returns (a committer records a deferred upload this way); an
        error of the hook is raised by ``close()``. Not run on abort."""
        self._after_close = hook

    async def _run(
        self,
        engine: PartUploader,
        defer: bool,
        progress: ProgressCallback | None,
        after_create: AfterCreate | None,
        object_args: dict[str, Any],
    ) -> UploadResult | PendingUpload | None:
        send, recv = anyio.create_memory_object_stream[BytesLike](1)
        self._send = send
        with anyio.CancelScope() as scope:
            self._scope = scope
            self._ready.set()
            parts = part_stream(_drain(recv), part_size=engine.config.part_size, size=None)
            try:
                return await engine.upload_parts(
                    self.bucket,
                    self.key,
                    parts,
                    defer=defer,
                    progress=progress,
                    after_create=after_create,
                    **object_args,
                )
            except Exception as exc:
                self._error = exc
                recv.close()
                raise
        return None

    def _call(self, coro: Coroutine[Any, Any, None]) -> None:
        self._portal.run(coro)

    async def _put(self, block: BytesLike | None) -> None:
        assert self._send is not None
        try:
            if block is None:
                await self._send.aclose()
            else:
                await self._send.send(block)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            # the upload ended: its error is set once it has finished (the part stream
            # closes first), so wait for that and raise the upload's own error
            if self._error is None and self._future is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wrap_future(self._future)
            raise (self._error or EngineError("the upload is no longer running")) from None

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self._gather.total

    @property
    def bytes_written(self) -> int:
        return self._gather.total

    def write(self, data: Any) -> int:
        if self.closed:
            raise ValueError("write to a closed SyncUploadWriter")
        if self._error is not None:
            raise self._error
        n = memoryview(data).nbytes
        for block in self._gather.add(data):
            self._call(self._put(block))
        return n

    def close(self) -> None:
        """Finish the upload (complete, or defer) and set ``result``."""
        if self.closed:
            return
        try:
            if not self._finished:
                self._finished = True
                rest = self._gather.rest()
                if rest is not None:
                    self._call(self._put(rest))
                self._call(self._put(None))
                assert self._future is not None
                result = self._future.result()
                self.result = result
                if self._after_close is not None and result is not None:
                    self._portal.call(self._after_close, result)
        except BaseException:
            self.abort()
            raise
        finally:
            super().close()

    def abort(self) -> None:
        """Abort the upload (nothing is left behind) and wait until it is aborted."""
        self._finished = True

        async def cancel() -> None:
            if self._scope is not None:
                self._scope.cancel()

        if self._future is not None and not self._future.done():
            self._call(cancel())
            with contextlib.suppress(BaseException):
                self._future.result()
        if not self.closed:
            super().close()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            self.abort()
        else:
            self.close()
