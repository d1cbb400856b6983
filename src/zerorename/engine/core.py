"""UploadEngine: streams sources as multipart uploads with bounded concurrency and memory,
retries and adapts to throttling, reports progress, and can defer completion."""

from __future__ import annotations

from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
)
from contextlib import AsyncExitStack, aclosing
from dataclasses import dataclass, field
from typing import Any, Literal, overload

import anyio

from zerorename import logsafe
from zerorename.aio import first_error, to_the_end
from zerorename.engine import checksums
from zerorename.engine.bodies.filebody import FileRange, SlicedBody, for_botocore, open_part_file
from zerorename.engine.bodies.sources import Part, chunks_of, file_parts, part_stream, source_size
from zerorename.engine.bodies.writers import AfterCreate, AsyncUploadWriter, SyncUploadWriter
from zerorename.engine.config import EngineConfig
from zerorename.engine.errors import EngineError
from zerorename.engine.events import (
    Event,
    PartDone,
    ProgressCallback,
    UploadCompleted,
    UploadDeferred,
    emit,
)
from zerorename.engine.ops.completion import Completion, OnResult
from zerorename.engine.ops.objects import GET_CAP, Objects, Recheck
from zerorename.engine.planning import plan_known_size, validate_bucket, validate_key
from zerorename.engine.results import (
    BatchResult,
    ObjectInfo,
    PartInfo,
    PendingUpload,
    UploadInfo,
    UploadResult,
)
from zerorename.engine.retry import AdaptiveLimiter, EngineStats, Retrier
from zerorename.engine.wire import answers
from zerorename.engine.wire.client import (
    FastClient,
    client_kwargs,
    guard_object_keys,
    make_session,
    open_error,
    share_verify_context,
)
from zerorename.engine.wire.trailer import TrailerBody
from zerorename.units import MiB

# checksums of parts at least this large are computed off the event loop
_THREAD_CHECKSUM_MIN = MiB
_NOT_OPEN = "the engine is not open: use `async with UploadEngine(config)`"


@dataclass
class _Upload:
    bucket: str
    key: str
    upload_id: str | None = None
    parts: dict[int, PartInfo] = field(default_factory=dict)


# bodies are written to the socket in slices of this size, so the event loop's transport
# never buffers a second copy of a whole part
_BODY_SLICE = MiB


async def _request_body(body: bytes | bytearray | memoryview | FileRange, signed: bool) -> Any:
    """What goes to the client as Body: small bodies (and bodies botocore must hash to
    sign) as they are, large ones sliced; a file range as it is (read while it is sent),
    or read whole when botocore must hash it."""
    if isinstance(body, FileRange):
        return await anyio.to_thread.run_sync(body.read_all) if signed else body
    if signed or memoryview(body).nbytes <= _BODY_SLICE:
        return body if memoryview(body).nbytes else b""
    return SlicedBody(body, _BODY_SLICE)


def _whole_body(source: Any) -> bytes | bytearray | memoryview | None:
    """A bytes-like source as the one body of a single-part object (bytes as they are, a
    read-only buffer as a flat byte view), or None. A writable buffer is copied, as the
    part stream copies a buffer smaller than a part: what the caller writes into it once
    ``upload()`` began never reaches the object (nor a retry)."""
    if isinstance(source, bytes):
        return source
    if isinstance(source, bytearray | memoryview):
        view = memoryview(source)
        flat = view if view.format == "B" and view.ndim == 1 else view.cast("B")
        return bytes(flat) if not flat.readonly else flat
    return None


async def _register_resolved_credentials(client: Any) -> None:
    """Tell logsafe the credentials the AWS chain resolved (a profile's, a role's), so
    they are masked in every log line, not only where they look like credentials."""
    try:
        creds = await client._get_credentials()
        frozen = await creds.get_frozen_credentials() if creds is not None else None
    except Exception:  # anonymous or an unusual provider: the shape rules still apply
        return
    if frozen is not None:
        logsafe.register_secrets(frozen.access_key, frozen.secret_key, frozen.token)


class UploadEngine:
    """The only code that talks to S3. ``async with UploadEngine(cfg) as engine: ...``.

    One aiobotocore client (pool sized to the concurrency) with the hot calls routed
    through the fast path (wire.client.FastClient), one adaptive limiter on parts in flight
    shared by every upload, one retry policy. It uploads itself; it owns, as members, the
    completion of uploads already created (:class:`~zerorename.engine.ops.completion.Completion`)
    and whole-object operations (:class:`~zerorename.engine.ops.objects.Objects`), and its
    methods for those delegate to them. Closing twice is safe.
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
        self._objects = Objects(self._open_client, self._retrier)
        self._completion = Completion(
            self._open_client,
            self.config,
            self.stats,
            self._retrier,
            self._emit,
            self._objects.head_object,
        )

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
        cfg = self.config
        logsafe.install()  # botocore logs requests and signatures at DEBUG: scrub them
        logsafe.register_secrets(
            cfg.aws_access_key_id, cfg.aws_secret_access_key, cfg.aws_session_token
        )
        stack = AsyncExitStack()
        try:
            session = make_session(self.config)
            client = await stack.enter_async_context(
                session.create_client("s3", **client_kwargs(self.config))
            )
            await _register_resolved_credentials(client)
            guard_object_keys(client)
            share_verify_context(client)
            # the hot calls through the fast path when it can be exact (else all botocore)
            fast = FastClient(client, self.config, self.stats)
            await fast.open()
            stack.push_async_callback(fast.close)
        except BaseException as exc:
            await stack.aclose()
            mapped = open_error(exc, self.config)
            if mapped is not None:  # a bad profile/region/endpoint: one line, not a trace
                raise mapped from None
            raise
        self._client_obj = fast if fast.enabled else client
        self._stack = stack

    async def close(self) -> None:
        """Close the client and its connections; safe to call twice."""
        stack, self._stack, self._client_obj = self._stack, None, None
        if stack is not None:
            await stack.aclose()

    @property
    def _client(self) -> Any:
        if self._client_obj is None:
            raise EngineError(_NOT_OPEN)
        return self._client_obj

    def _open_client(self) -> Any:
        """The open client, as the members ask for it (:attr:`_client`)."""
        if self._client_obj is None:
            raise EngineError(_NOT_OPEN)
        return self._client_obj

    @property
    def endpoint(self) -> str:
        """The endpoint the engine talks to (scheme and host), for messages."""
        return answers.endpoint_of(self._client)

    @property
    def concurrency(self) -> int:
        """The current (adaptive) limit on parts in flight."""
        return self._limiter.limit

    async def _emit(self, event: Event, progress: ProgressCallback | None = None) -> None:
        await emit(self._on_event, event)
        if progress is not None and progress is not self._on_event:
            await emit(progress, event)

    # -- uploads already created: the completion member ------------------------------
    async def complete(
        self,
        p: PendingUpload,
        *,
        if_none_match: bool = False,
        progress: ProgressCallback | None = None,
    ) -> UploadResult:
        """Complete a deferred upload; with ``if_none_match`` the store refuses
        (:class:`PreconditionFailed`) when the key already exists."""
        return await self._completion.complete(p, if_none_match=if_none_match, progress=progress)

    async def abort(
        self, p: PendingUpload | UploadInfo, *, progress: ProgressCallback | None = None
    ) -> bool:
        """Abort a pending upload; False when it was already gone. A record that fails
        validation is a :class:`RecordError` and sends nothing."""
        return await self._completion.abort(p, progress=progress)

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
        """Complete records pulled lazily, ``concurrency`` (default
        ``config.batch_concurrency``) in flight; memory does not grow with their number.
        A record that fails validation is a :class:`BatchFailure` and sends nothing
        (:meth:`.ops.completion.Completion.complete_many`)."""
        return await self._completion.complete_many(
            records,
            concurrency=concurrency,
            if_none_match=if_none_match,
            fail_fast=fail_fast,
            on_result=on_result,
            progress=progress,
        )

    async def abort_many(
        self,
        records: Iterable[PendingUpload | UploadInfo] | AsyncIterable[PendingUpload | UploadInfo],
        *,
        concurrency: int | None = None,
        on_result: OnResult | None = None,
        progress: ProgressCallback | None = None,
    ) -> BatchResult:
        """Abort records pulled lazily; an upload already gone counts as aborted
        (:meth:`.ops.completion.Completion.abort_many`)."""
        return await self._completion.abort_many(
            records, concurrency=concurrency, on_result=on_result, progress=progress
        )

    def list_uploads(
        self, bucket: str, prefix: str = "", *, directory: bool = True
    ) -> AsyncIterator[UploadInfo]:
        """Pending multipart uploads under ``prefix``, taken as a directory (a '/' is
        added) unless ``directory=False``; all pages, filtered client-side too."""
        return self._completion.list_uploads(bucket, prefix, directory=directory)

    # -- whole objects: the objects member -------------------------------------------
    async def put_object(
        self,
        bucket: str,
        key: str,
        data: bytes,
        *,
        if_none_match: bool = False,
        content_type: str | None = None,
    ) -> str:
        """Write a small object in one PutObject; returns its ETag. With ``if_none_match``
        an existing object makes it fail with :class:`PreconditionFailed`."""
        return await self._objects.put_object(
            bucket, key, data, if_none_match=if_none_match, content_type=content_type
        )

    async def get_object(self, bucket: str, key: str, *, max_size: int = GET_CAP) -> bytes:
        """Read a whole (small) object; :class:`ObjectNotFound` when it is missing,
        :class:`ObjectTooLarge` when it holds more than ``max_size`` bytes."""
        return await self._objects.get_object(bucket, key, max_size=max_size)

    def iter_object(self, bucket: str, key: str, *, chunk_size: int = MiB) -> AsyncIterator[bytes]:
        """Stream an object in chunks, resuming a failed body where it stopped
        (:meth:`.ops.objects.Objects.iter_object`)."""
        return self._objects.iter_object(bucket, key, chunk_size=chunk_size)

    async def head_object(self, bucket: str, key: str) -> ObjectInfo | None:
        """Size, ETag and time of an object; None when it does not exist."""
        return await self._objects.head_object(bucket, key)

    def list_objects(
        self, bucket: str, prefix: str = "", *, delimiter: str | None = None
    ) -> AsyncIterator[ObjectInfo]:
        """Objects under ``prefix`` (a plain string prefix: add '/' for a directory)."""
        return self._objects.list_objects(bucket, prefix, delimiter=delimiter)

    def list_prefixes(
        self, bucket: str, prefix: str, *, delimiter: str = "/"
    ) -> AsyncIterator[str]:
        """The 'subdirectories' (CommonPrefixes) right under ``prefix``."""
        return self._objects.list_prefixes(bucket, prefix, delimiter=delimiter)

    async def delete_object(self, bucket: str, key: str) -> None:
        """Delete one object (no error when it does not exist)."""
        await self._objects.delete_object(bucket, key)

    async def delete_objects(
        self,
        bucket: str,
        keys: Iterable[str] | AsyncIterable[str],
        *,
        if_match: Mapping[str, str] | None = None,
        recheck: Recheck | None = None,
    ) -> int:
        """Delete keys in batches of 1000; returns how many were deleted. ``if_match`` and
        ``recheck``: :meth:`.ops.objects.Objects.delete_objects`."""
        return await self._objects.delete_objects(bucket, keys, if_match=if_match, recheck=recheck)

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
        after_create: AfterCreate | None = ...,
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
        defer: bool,
        progress: ProgressCallback | None = ...,
        size: int | None = ...,
        after_create: AfterCreate | None = ...,
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
        after_create: AfterCreate | None = None,
        **object_args: Any,
    ) -> UploadResult | PendingUpload:
        """Upload ``source`` (bytes-like, path, binary file, sync/async iterable of bytes)
        to ``s3://bucket/key``. With ``defer=True`` the parts are uploaded and a
        :class:`PendingUpload` is returned; nothing is completed. A failure or cancellation
        aborts the multipart upload. ``object_args`` go to CreateMultipartUpload/PutObject
        (ContentType, Metadata, ...); ``after_create``: see :meth:`upload_parts`."""
        validate_bucket(bucket)
        validate_key(key)
        detected = source_size(source)  # also refuses a missing path, before any request
        if size is None:
            size = detected
        if size is not None:
            plan_known_size(size, self.config.part_size)  # refuse before any request
            if not defer and size <= self.config.part_size and detected == size:
                body = _whole_body(source)
                if body is not None:  # one PutObject: no part stream, no task group
                    return await self._put_single(
                        _Upload(bucket, key), Part(1, body, last=True), progress, object_args
                    )
        file = await open_part_file(source, size)
        if file is not None:  # a regular file: parts are ranges of it, read as they are sent
            async with file:
                ranges = file_parts(file, part_size=self.config.part_size)
                return await self.upload_parts(
                    bucket,
                    key,
                    ranges,
                    defer=defer,
                    progress=progress,
                    after_create=after_create,
                    **object_args,
                )
        parts = part_stream(chunks_of(source), part_size=self.config.part_size, size=size)
        return await self.upload_parts(
            bucket,
            key,
            parts,
            defer=defer,
            progress=progress,
            after_create=after_create,
            **object_args,
        )

    def open_writer(
        self,
        bucket: str,
        key: str,
        *,
        defer: bool = False,
        progress: ProgressCallback | None = None,
        after_create: AfterCreate | None = None,
        **object_args: Any,
    ) -> AsyncUploadWriter:
        """An async file-like writer: ``async with engine.open_writer(b, k) as w:
        await w.write(data)``; ``w.result`` afterwards. An exception inside aborts.
        ``after_create``: see :meth:`upload_parts`."""
        validate_bucket(bucket)
        validate_key(key)
        return AsyncUploadWriter(
            self,
            bucket,
            key,
            defer=defer,
            progress=progress,
            after_create=after_create,
            object_args=object_args,
        )

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
    ) -> SyncUploadWriter:
        """A blocking binary file for threads other than ``loop``'s (pyarrow and csv
        writers write into it). ``close()`` finishes; ``abort()`` aborts.
        ``after_create``: see :meth:`upload_parts`."""
        validate_bucket(bucket)
        validate_key(key)
        return SyncUploadWriter(
            self,
            bucket,
            key,
            loop,
            defer=defer,
            progress=progress,
            after_create=after_create,
            object_args=object_args,
        )

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
    ) -> UploadResult | PendingUpload:
        """Upload ``parts`` as they come (e.g. :func:`~zerorename.engine.bodies.sources.part_stream`
        over a writer's buffers) to ``s3://bucket/key``, as :meth:`upload` does with the
        parts it plans; ``parts`` is closed when the upload ends. A single last part is one
        PutObject unless ``defer``. A failure or cancellation aborts the multipart upload.

        ``after_create`` runs once the multipart upload exists (its create answered),
        beside the parts; when it raises, the upload is aborted and its error raised. A
        committer checks there that its job is still running: an upload a straggler task
        creates after the job's release listed the uploads aborts itself."""
        validate_bucket(bucket)
        validate_key(key)
        up = _Upload(bucket, key)
        try:
            async with aclosing(parts), anyio.create_task_group() as tg:
                async for part in parts:
                    if part.last and part.size == 0 and part.number > 1:
                        break
                    if up.upload_id is None:
                        if part.last and part.number == 1 and not defer:
                            return await self._put_single(up, part, progress, object_args)
                        await self._create_to_the_end(up, object_args)
                        if after_create is not None:
                            tg.start_soon(after_create)
                    window = await self._limiter.acquire()
                    tg.start_soon(self._send_part, up, part, window, progress)
            assert up.upload_id is not None
            return await self._finish(up, defer=defer, progress=progress)
        except BaseException as exc:
            if up.upload_id is not None:
                await to_the_end(
                    self._completion.abort_id(
                        up.bucket,
                        up.key,
                        up.upload_id,
                        reason=f"upload failed: {type(first_error(exc)).__name__}",
                        progress=progress,
                    )
                )
            real = first_error(exc)
            if real is exc:
                raise
            raise real from None

    async def _checksum(self, body: bytes | bytearray | memoryview | FileRange) -> str | None:
        alg = self.config.checksum
        if isinstance(body, FileRange):  # file reads happen off the event loop
            if alg == "none":
                await anyio.to_thread.run_sync(body.prefetch)  # the send reads it next
                return None
            return await anyio.to_thread.run_sync(body.checksum, alg)
        if alg == "none":
            return None
        if memoryview(body).nbytes >= _THREAD_CHECKSUM_MIN:
            return await anyio.to_thread.run_sync(checksums.compute, alg, body)
        return checksums.compute(alg, body)

    def _checksum_args(self, value: str | None) -> dict[str, str]:
        return {checksums.PARAM[self.config.checksum]: value} if value else {}

    async def _create_to_the_end(self, up: _Upload, object_args: dict[str, Any]) -> None:
        """Set ``up.upload_id`` from the create's answer, waited for even when this task is
        cancelled meanwhile (:func:`~zerorename.aio.to_the_end`): a cancel mid-request
        would leave an upload we never learn the id of. A cancel that came meanwhile is
        raised once the id is known, so the caller aborts it."""

        async def create() -> None:
            up.upload_id = await self._create(up, object_args)

        await to_the_end(create())

    async def _create(self, up: _Upload, object_args: dict[str, Any]) -> str:
        args = dict(object_args)
        if self.config.checksum != "none":
            args.setdefault("ChecksumAlgorithm", self.config.checksum)

        async def call(attempt: int) -> str:
            resp = await self._client.create_multipart_upload(Bucket=up.bucket, Key=up.key, **args)
            return answers.require(
                resp, "CreateMultipartUpload", endpoint=self.endpoint, bucket=up.bucket, key=up.key
            )

        return await self._retrier.call("CreateMultipartUpload", call, bucket=up.bucket, key=up.key)

    async def _send_body(
        self,
        operation: str,
        up: _Upload,
        part: Part,
        *,
        window: int,
        progress: ProgressCallback | None,
        request: Callable[..., Awaitable[Any]],
        **args: Any,
    ) -> tuple[str, str | None]:
        """Send one body (a part, or a whole small object) holding the limiter slot taken
        in ``window``, with retries; returns (ETag, checksum). Where the fast path sends a
        trailing checksum (trailer.py) the body is read once, checksummed as it is sent;
        else (or when the store refuses trailers) a checksum pass, then the send. An
        answer without an ETag, or confirming another checksum, is :class:`BadAnswer`
        (not retried; nothing is recorded)."""
        alg = self.config.checksum
        send_trailer = getattr(self._client, "send_trailer", None)
        two_pass: tuple[str | None, Any] | None = None  # (checksum, body) once computed

        async def call(attempt: int) -> tuple[str, str | None]:
            nonlocal two_pass
            try:
                if send_trailer is not None and alg != "none" and part.size:
                    sent = TrailerBody(part.body, alg)
                    params = dict(Bucket=up.bucket, Key=up.key, ContentLength=part.size, **args)
                    resp = await send_trailer(operation, sent, params)
                    if resp is not None:
                        return self._confirmed(resp, operation, up, sent.checksum)
                if two_pass is None:
                    two_pass = (
                        await self._checksum(part.body),
                        await _request_body(part.body, self.config.payload_signing),
                    )
                checksum, body = two_pass
                if not isinstance(self._client, FastClient):
                    body = await for_botocore(body)
                resp = await request(
                    Bucket=up.bucket,
                    Key=up.key,
                    Body=body,
                    ContentLength=part.size,
                    **args,
                    **self._checksum_args(checksum),
                )
            except Exception:
                if isinstance(part.body, FileRange):
                    part.body.check()  # a file that shrank: fatal, not a network error
                raise
            return self._confirmed(resp, operation, up, checksum)

        try:
            etag, checksum = await self._retrier.call(
                operation,
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
        return etag, checksum

    def _confirmed(
        self, resp: Any, operation: str, up: _Upload, checksum: str | None
    ) -> tuple[str, str | None]:
        """(ETag, checksum) of a body's answer: it must carry an ETag, and a checksum it
        confirms must be the one computed over what was sent (:mod:`answers`)."""
        etag = answers.require(
            resp, operation, endpoint=self.endpoint, bucket=up.bucket, key=up.key
        )
        if checksum is not None:
            answers.require_checksum(
                resp,
                operation,
                checksums.PARAM[self.config.checksum],
                checksum,
                endpoint=self.endpoint,
                bucket=up.bucket,
                key=up.key,
            )
        return etag, checksum

    async def _put_single(
        self,
        up: _Upload,
        part: Part,
        progress: ProgressCallback | None,
        object_args: dict[str, Any],
    ) -> UploadResult:
        window = await self._limiter.acquire()
        etag, _ = await self._send_body(
            "PutObject",
            up,
            part,
            window=window,
            progress=progress,
            request=self._client.put_object,
            **object_args,
        )
        self.stats.uploads_completed += 1
        await self._emit(UploadCompleted(up.bucket, up.key, part.size, 1), progress)
        return UploadResult(up.bucket, up.key, etag, part.size, parts=1)  # no upload id

    async def _send_part(
        self, up: _Upload, part: Part, window: int, progress: ProgressCallback | None
    ) -> None:
        etag, checksum = await self._send_body(
            "UploadPart",
            up,
            part,
            window=window,
            progress=progress,
            request=self._client.upload_part,
            UploadId=up.upload_id,
            PartNumber=part.number,
        )
        up.parts[part.number] = PartInfo(part.number, etag, part.size, checksum)
        self.stats.parts_uploaded += 1
        await self._emit(PartDone(up.bucket, up.key, part.number, part.size), progress)

    async def _finish(
        self, up: _Upload, *, defer: bool, progress: ProgressCallback | None
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
        return await self._completion.complete(record, progress=progress)


__all__ = ["UploadEngine"]
