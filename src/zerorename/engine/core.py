"""UploadEngine: streams sources as multipart uploads with bounded concurrency and memory,
retries and adapts to throttling, reports progress, and can defer completion."""

from __future__ import annotations

import contextlib
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
)
from contextlib import AsyncExitStack, aclosing
from dataclasses import dataclass, field
from typing import Any, Literal, overload

import anyio
import botocore.exceptions as bexc

from zerorename.engine import checksums
from zerorename.engine.client import client_kwargs, make_session
from zerorename.engine.config import EngineConfig
from zerorename.engine.errors import EngineError, PreconditionFailed, UploadNotFound
from zerorename.engine.events import (
    Event,
    PartDone,
    ProgressCallback,
    UploadAborted,
    UploadCompleted,
    UploadDeferred,
    emit,
)
from zerorename.engine.planning import plan_known_size, validate_bucket, validate_key
from zerorename.engine.records import (
    BatchFailure,
    BatchResult,
    PartInfo,
    PendingUpload,
    UploadInfo,
    UploadResult,
)
from zerorename.engine.retry import AdaptiveLimiter, EngineStats, Retrier, error_code
from zerorename.engine.sources import Part, chunks_of, part_stream, source_size
from zerorename.engine.store import ObjectOps
from zerorename.engine.writers import AsyncUploadWriter, SyncUploadWriter

# checksums of parts at least this large are computed off the event loop
_THREAD_CHECKSUM_MIN = 1024 * 1024

OnResult = Callable[[Any, BaseException | None], Awaitable[None] | None]


@dataclass
class _Upload:
    bucket: str
    key: str
    upload_id: str | None = None
    parts: dict[int, PartInfo] = field(default_factory=dict)


# bodies are written to the socket in slices of this size, so the event loop's transport
# never buffers a second copy of a whole part (see PERF-NOTES: ~2 copies per part otherwise)
_BODY_SLICE = 1024 * 1024


class _SlicedBody:
    """A request body handed to aiohttp as memoryview slices, one fresh pass per attempt."""

    def __init__(self, body: bytes | bytearray | memoryview) -> None:
        self._view = memoryview(body).cast("B")

    def __len__(self) -> int:
        return self._view.nbytes

    async def __aiter__(self) -> AsyncIterator[memoryview]:
        view = self._view
        for start in range(0, view.nbytes, _BODY_SLICE):
            yield view[start : start + _BODY_SLICE]


def _request_body(body: bytes | bytearray | memoryview, signed: bool) -> Any:
    """What goes to botocore as Body: small bodies (and bodies botocore must hash to sign)
    as they are, large ones sliced."""
    if signed or memoryview(body).nbytes <= _BODY_SLICE:
        return body if memoryview(body).nbytes else b""
    return _SlicedBody(body)


def _unwrap(exc: BaseException) -> BaseException:
    """The single real error inside (nested) exception groups, else ``exc`` itself."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


async def _aiter(records: Iterable[Any] | AsyncIterable[Any]) -> AsyncGenerator[Any, None]:
    if hasattr(records, "__aiter__"):
        async for r in records:
            yield r
    else:
        for r in records:
            yield r


class UploadEngine(ObjectOps):
    """The only code that talks to S3. ``async with UploadEngine(cfg) as engine: ...``.

    One aiobotocore client (pool sized to the concurrency), one adaptive limiter on parts in
    flight shared by every upload, one retry policy. Closing twice is safe.
    """

    def __init__(
        self, config: EngineConfig | None = None, *, on_event: ProgressCallback | None = None
    ) -> None:
        self.config = config or EngineConfig()
        self.stats = EngineStats(lowest_concurrency=self.config.max_concurrency)
        self._on_event = on_event
        self._limiter = AdaptiveLimiter(
            self.config.max_concurrency,
            decrease=self.config.retry.throttle_decrease,
            recovery_per_slot=self.config.retry.recovery_per_slot,
        )
        self._retrier = Retrier(self.config.retry, self.stats, self._emit)
        self._stack: AsyncExitStack | None = None
        self._client_obj: Any = None

    # -- lifecycle -------------------------------------------------------------------
    async def __aenter__(self) -> UploadEngine:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        """Create the client (``async with`` does this)."""
        if self._stack is not None:
            return
        stack = AsyncExitStack()
        session = make_session(self.config)
        self._client_obj = await stack.enter_async_context(
            session.create_client("s3", **client_kwargs(self.config))
        )
        self._stack = stack

    async def close(self) -> None:
        """Close the client and its connections; safe to call twice."""
        stack, self._stack, self._client_obj = self._stack, None, None
        if stack is not None:
            await stack.aclose()

    @property
    def _client(self) -> Any:
        if self._client_obj is None:
            raise EngineError("the engine is not open: use `async with UploadEngine(config)`")
        return self._client_obj

    @property
    def concurrency(self) -> int:
        """The current (adaptive) limit on parts in flight."""
        return self._limiter.limit

    async def _emit(self, event: Event, progress: ProgressCallback | None = None) -> None:
        await emit(self._on_event, event)
        if progress is not None and progress is not self._on_event:
            await emit(progress, event)

    # -- uploads ---------------------------------------------------------------------
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
        **object_args: Any,
    ) -> UploadResult: ...

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
        **object_args: Any,
    ) -> PendingUpload: ...

    @overload
    async def upload(
        self,
        bucket: str,
        key: str,
        source: Any,
        *,
        defer: bool,
        progress: ProgressCallback | None = ...,
        size: int | None = ...,
        **object_args: Any,
    ) -> UploadResult | PendingUpload: ...

    async def upload(
        self,
        bucket: str,
        key: str,
        source: Any,
        *,
        defer: bool = False,
        progress: ProgressCallback | None = None,
        size: int | None = None,
        **object_args: Any,
    ) -> UploadResult | PendingUpload:
        """Upload ``source`` (bytes-like, path, binary file, sync/async iterable of bytes)
        to ``s3://bucket/key``. With ``defer=True`` the parts are uploaded and a
        :class:`PendingUpload` is returned; nothing is completed. A failure or cancellation
        aborts the multipart upload. ``object_args`` go to CreateMultipartUpload/PutObject
        (ContentType, Metadata, ...)."""
        validate_bucket(bucket)
        validate_key(key)
        if size is None:
            size = source_size(source)
        if size is not None:
            plan_known_size(size, self.config.part_size)  # refuse before any request
        parts = part_stream(chunks_of(source), part_size=self.config.part_size, size=size)
        return await self._upload_parts(bucket, key, parts, defer, progress, object_args)

    def open_writer(
        self,
        bucket: str,
        key: str,
        *,
        defer: bool = False,
        progress: ProgressCallback | None = None,
        **object_args: Any,
    ) -> AsyncUploadWriter:
        """An async file-like writer: ``async with engine.open_writer(b, k) as w:
        await w.write(data)``; ``w.result`` afterwards. An exception inside aborts."""
        validate_bucket(bucket)
        validate_key(key)
        return AsyncUploadWriter(self, bucket, key, defer, progress, object_args)

    def open_sync_writer(
        self,
        bucket: str,
        key: str,
        *,
        loop: Any,
        defer: bool = False,
        progress: ProgressCallback | None = None,
        **object_args: Any,
    ) -> SyncUploadWriter:
        """A blocking binary file for threads other than ``loop``'s (pyarrow and csv
        writers write into it). ``close()`` finishes; ``abort()`` aborts."""
        validate_bucket(bucket)
        validate_key(key)
        return SyncUploadWriter(self, bucket, key, loop, defer, progress, object_args)

    async def _upload_parts(
        self,
        bucket: str,
        key: str,
        parts: AsyncGenerator[Part, None],
        defer: bool,
        progress: ProgressCallback | None,
        object_args: dict[str, Any],
    ) -> UploadResult | PendingUpload:
        up = _Upload(bucket, key)
        try:
            async with aclosing(parts), anyio.create_task_group() as tg:
                async for part in parts:
                    if part.last and part.size == 0 and part.number > 1:
                        break
                    if up.upload_id is None:
                        if part.last and part.number == 1 and not defer:
                            return await self._put_single(up, part, progress, object_args)
                        # shielded: a cancel mid-request would leave an upload we never
                        # learn the id of; after it, the except below can abort it
                        with anyio.CancelScope(shield=True):
                            up.upload_id = await self._create(up, object_args)
                    window = await self._limiter.acquire()
                    tg.start_soon(self._send_part, up, part, window, progress)
            assert up.upload_id is not None
            return await self._finish(up, defer, progress)
        except BaseException as exc:
            if up.upload_id is not None:
                with anyio.CancelScope(shield=True):
                    await self._abort_id(
                        up.bucket,
                        up.key,
                        up.upload_id,
                        f"upload failed: {type(_unwrap(exc)).__name__}",
                        progress,
                    )
            real = _unwrap(exc)
            if real is exc:
                raise
            raise real from None

    async def _checksum(self, body: bytes | bytearray | memoryview) -> str | None:
        alg = self.config.checksum
        if alg == "none":
            return None
        if memoryview(body).nbytes >= _THREAD_CHECKSUM_MIN:
            return await anyio.to_thread.run_sync(checksums.compute, alg, body)
        return checksums.compute(alg, body)

    def _checksum_args(self, value: str | None) -> dict[str, str]:
        return {checksums.PARAM[self.config.checksum]: value} if value else {}

    async def _create(self, up: _Upload, object_args: dict[str, Any]) -> str:
        args = dict(object_args)
        if self.config.checksum != "none":
            args.setdefault("ChecksumAlgorithm", self.config.checksum)

        async def call(attempt: int) -> Any:
            return await self._client.create_multipart_upload(Bucket=up.bucket, Key=up.key, **args)

        resp = await self._retrier.call("CreateMultipartUpload", call, bucket=up.bucket, key=up.key)
        return str(resp["UploadId"])

    async def _put_single(
        self,
        up: _Upload,
        part: Part,
        progress: ProgressCallback | None,
        object_args: dict[str, Any],
    ) -> UploadResult:
        checksum = await self._checksum(part.body)
        args = {**object_args, **self._checksum_args(checksum)}
        body = _request_body(part.body, self.config.payload_signing)

        async def call(attempt: int) -> Any:
            return await self._client.put_object(
                Bucket=up.bucket, Key=up.key, Body=body, ContentLength=part.size, **args
            )

        window = await self._limiter.acquire()
        try:
            resp = await self._retrier.call(
                "PutObject",
                call,
                bucket=up.bucket,
                key=up.key,
                limiter=self._limiter,
                window=window,
                progress=progress,
                sent_bytes=part.size,
            )
        finally:
            self._limiter.release()
        self.stats.bytes_uploaded += part.size
        self.stats.uploads_completed += 1
        await self._emit(UploadCompleted(up.bucket, up.key, part.size, 1), progress)
        return UploadResult(up.bucket, up.key, str(resp.get("ETag", "")), part.size, 1, None)

    async def _send_part(
        self, up: _Upload, part: Part, window: int, progress: ProgressCallback | None
    ) -> None:
        try:
            checksum = await self._checksum(part.body)
            extra = self._checksum_args(checksum)
            body = _request_body(part.body, self.config.payload_signing)

            async def call(attempt: int) -> Any:
                return await self._client.upload_part(
                    Bucket=up.bucket,
                    Key=up.key,
                    UploadId=up.upload_id,
                    PartNumber=part.number,
                    Body=body,
                    ContentLength=part.size,
                    **extra,
                )

            resp = await self._retrier.call(
                "UploadPart",
                call,
                bucket=up.bucket,
                key=up.key,
                limiter=self._limiter,
                window=window,
                progress=progress,
                sent_bytes=part.size,
            )
        finally:
            self._limiter.release()
        up.parts[part.number] = PartInfo(part.number, str(resp["ETag"]), part.size, checksum)
        self.stats.parts_uploaded += 1
        self.stats.bytes_uploaded += part.size
        await self._emit(PartDone(up.bucket, up.key, part.number, part.size), progress)

    async def _finish(
        self, up: _Upload, defer: bool, progress: ProgressCallback | None
    ) -> UploadResult | PendingUpload:
        assert up.upload_id is not None
        numbers = sorted(up.parts)
        record = PendingUpload(
            bucket=up.bucket,
            key=up.key,
            upload_id=up.upload_id,
            parts=tuple(up.parts[n] for n in numbers),
            length=sum(p.size for p in up.parts.values()),
            checksum_algorithm=None if self.config.checksum == "none" else self.config.checksum,
        )
        if defer:
            self.stats.uploads_deferred += 1
            await self._emit(
                UploadDeferred(up.bucket, up.key, up.upload_id, record.length, len(numbers)),
                progress,
            )
            return record
        return await self._complete(record, False, progress, None, 0)

    # -- completion ------------------------------------------------------------------
    async def complete(
        self,
        p: PendingUpload,
        *,
        if_none_match: bool = False,
        progress: ProgressCallback | None = None,
    ) -> UploadResult:
        """Complete a deferred upload; with ``if_none_match`` the store refuses
        (:class:`PreconditionFailed`) when the key already exists."""
        return await self._complete(p, if_none_match, progress, None, 0)

    async def _complete(
        self,
        p: PendingUpload,
        if_none_match: bool,
        progress: ProgressCallback | None,
        limiter: AdaptiveLimiter | None,
        window: int,
    ) -> UploadResult:
        parts = []
        alg = p.checksum_algorithm
        for part in p.parts:
            entry: dict[str, Any] = {"PartNumber": part.number, "ETag": part.etag}
            if alg and part.checksum and alg in checksums.PARAM:
                entry[checksums.PARAM[alg]] = part.checksum
            parts.append(entry)
        extra: dict[str, Any] = {"IfNoneMatch": "*"} if if_none_match else {}

        async def call(attempt: int) -> Any:
            try:
                return await self._client.complete_multipart_upload(
                    Bucket=p.bucket,
                    Key=p.key,
                    UploadId=p.upload_id,
                    MultipartUpload={"Parts": parts},
                    **extra,
                )
            except bexc.ClientError as exc:
                # a retry after a lost answer: the first attempt may have completed it
                code, status = error_code(exc)
                if attempt > 1 and (
                    code in ("NoSuchUpload", "PreconditionFailed") or status in (404, 412)
                ):
                    info = await self.head_object(p.bucket, p.key)
                    if info is not None and info.size == p.length:
                        return {"ETag": info.etag}
                raise

        resp = await self._retrier.call(
            "CompleteMultipartUpload",
            call,
            bucket=p.bucket,
            key=p.key,
            limiter=limiter,
            window=window,
            progress=progress,
        )
        self.stats.uploads_completed += 1
        await self._emit(UploadCompleted(p.bucket, p.key, p.length, len(p.parts)), progress)
        return UploadResult(
            p.bucket, p.key, str(resp.get("ETag") or ""), p.length, len(p.parts), p.upload_id
        )

    async def abort(
        self, p: PendingUpload | UploadInfo, *, progress: ProgressCallback | None = None
    ) -> bool:
        """Abort a pending upload; False when it was already gone."""
        return await self._abort_id(p.bucket, p.key, p.upload_id, "aborted", progress)

    async def _abort_id(
        self,
        bucket: str,
        key: str,
        upload_id: str,
        reason: str,
        progress: ProgressCallback | None,
        limiter: AdaptiveLimiter | None = None,
        window: int = 0,
    ) -> bool:
        async def call(attempt: int) -> Any:
            return await self._client.abort_multipart_upload(
                Bucket=bucket, Key=key, UploadId=upload_id
            )

        try:
            await self._retrier.call(
                "AbortMultipartUpload",
                call,
                bucket=bucket,
                key=key,
                limiter=limiter,
                window=window,
                progress=progress,
            )
        except UploadNotFound:
            return False
        self.stats.uploads_aborted += 1
        await self._emit(UploadAborted(bucket, key, upload_id, reason), progress)
        return True

    async def complete_many(
        self,
        records: Iterable[PendingUpload] | AsyncIterable[PendingUpload],
        *,
        concurrency: int | None = None,
        if_none_match: bool = False,
        fail_fast: bool = False,
        on_result: OnResult | None = None,
        progress: ProgressCallback | None = None,
    ) -> BatchResult:
        """Complete records pulled lazily from a sync or async iterable, ``concurrency``
        (default ``config.batch_concurrency``) in flight; memory does not grow with the
        number of records. ``fail_fast`` stops pulling records after the first failure."""

        async def one(rec: PendingUpload, limiter: AdaptiveLimiter, window: int) -> int:
            await self._complete(rec, if_none_match, progress, limiter, window)
            return rec.length

        return await self._batch(records, one, concurrency, fail_fast, on_result)

    async def abort_many(
        self,
        records: Iterable[PendingUpload | UploadInfo] | AsyncIterable[PendingUpload | UploadInfo],
        *,
        concurrency: int | None = None,
        on_result: OnResult | None = None,
        progress: ProgressCallback | None = None,
    ) -> BatchResult:
        """Abort records pulled lazily; an upload already gone counts as aborted."""

        async def one(
            rec: PendingUpload | UploadInfo, limiter: AdaptiveLimiter, window: int
        ) -> int:
            await self._abort_id(
                rec.bucket, rec.key, rec.upload_id, "aborted", progress, limiter, window
            )
            return rec.length if isinstance(rec, PendingUpload) else 0

        return await self._batch(records, one, concurrency, False, on_result)

    async def _batch(
        self,
        records: Iterable[Any] | AsyncIterable[Any],
        action: Callable[[Any, AdaptiveLimiter, int], Awaitable[int]],
        concurrency: int | None,
        fail_fast: bool,
        on_result: OnResult | None,
    ) -> BatchResult:
        result = BatchResult()
        limit = concurrency or self.config.batch_concurrency
        limiter = AdaptiveLimiter(
            limit,
            decrease=self.config.retry.throttle_decrease,
            recovery_per_slot=self.config.retry.recovery_per_slot,
        )
        stop = anyio.Event()

        async def run_one(rec: Any) -> None:
            error: BaseException | None = None
            try:
                try:
                    done = await action(rec, limiter, limiter.window)
                    result.bytes += done  # not `+= await`: that reads before awaiting
                    result.succeeded += 1
                except Exception as exc:
                    error = exc
                    result.add_failure(
                        BatchFailure(
                            rec.bucket,
                            rec.key,
                            rec.upload_id,
                            str(exc),
                            getattr(exc, "code", "") or type(exc).__name__,
                        )
                    )
                    if fail_fast:
                        stop.set()
                if on_result is not None:
                    outcome = on_result(rec, error)
                    if outcome is not None:
                        await outcome
            finally:
                limiter.release()

        async with anyio.create_task_group() as tg, contextlib.aclosing(_aiter(records)) as it:
            async for rec in it:
                await limiter.acquire()
                if stop.is_set():
                    limiter.release()
                    break
                tg.start_soon(run_one, rec)
        return result

    # -- listing pending uploads -----------------------------------------------------
    async def list_uploads(
        self, bucket: str, prefix: str = "", *, directory: bool = True
    ) -> AsyncIterator[UploadInfo]:
        """Pending multipart uploads under ``prefix``, taken as a directory (a '/' is
        added) unless ``directory=False``; all pages, filtered client-side too."""
        from zerorename.engine.planning import upload_prefix

        validate_bucket(bucket)
        want = upload_prefix(prefix, directory=directory)
        key_marker: str | None = None
        id_marker: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": want}
            if key_marker:
                kwargs["KeyMarker"] = key_marker
                if id_marker:
                    kwargs["UploadIdMarker"] = id_marker

            async def call(attempt: int, kwargs: dict[str, Any] = kwargs) -> Any:
                return await self._client.list_multipart_uploads(**kwargs)

            resp = await self._retrier.call("ListMultipartUploads", call, bucket=bucket, key=want)
            for u in resp.get("Uploads", []) or []:
                if not u["Key"].startswith(want):
                    continue
                initiated = u.get("Initiated")
                yield UploadInfo(
                    bucket,
                    u["Key"],
                    u["UploadId"],
                    initiated.timestamp() if initiated is not None else 0.0,
                )
            if not resp.get("IsTruncated"):
                return
            nk, nu = resp.get("NextKeyMarker"), resp.get("NextUploadIdMarker")
            if not nk or (nk, nu) == (key_marker, id_marker):
                return  # the server ignores markers: it gave us everything it will
            key_marker, id_marker = nk, nu


__all__ = ["PreconditionFailed", "UploadEngine"]
