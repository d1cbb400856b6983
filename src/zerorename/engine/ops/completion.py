"""Completing, aborting and listing deferred uploads, one at a time or streamed in
batches with bounded, adaptive concurrency: :class:`Completion`, which
:class:`~zerorename.engine.UploadEngine` owns and delegates its ``complete*``,
``abort*`` and ``list_uploads`` to."""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
)
from typing import Any

import anyio
import botocore.exceptions as bexc
from anyio.abc import TaskGroup

from zerorename.aio import aiter_any, first_error
from zerorename.engine import checksums
from zerorename.engine.config import EngineConfig
from zerorename.engine.errors import CompletionUnproven, RecordError, UploadNotFound
from zerorename.engine.events import (
    ProgressCallback,
    UploadAborted,
    UploadCompleted,
)
from zerorename.engine.planning import upload_prefix, validate_bucket
from zerorename.engine.results import (
    BatchFailure,
    BatchResult,
    ObjectInfo,
    PendingUpload,
    UploadInfo,
    UploadResult,
    is_completed_object,
    target_problem,
    unproven_reason,
)
from zerorename.engine.retry import AdaptiveLimiter, EngineStats, Retrier, error_code
from zerorename.engine.wire import answers

OnResult = Callable[[Any, BaseException | None], Awaitable[None] | None]
#: the engine's open client (raises when it is not open)
ClientOf = Callable[[], Any]
#: the engine's event delivery (to its ``on_event`` and a call's ``progress``)
Emit = Callable[[Any, ProgressCallback | None], Awaitable[None]]
#: the engine's HEAD of an object (:meth:`Objects.head_object <.objects.Objects.head_object>`)
Head = Callable[[str, str], Awaitable[ObjectInfo | None]]


def check_target(rec: object, *, complete: bool) -> None:
    """Refuse (:class:`RecordError`, before any request) a record a complete or abort must
    not act on: not a record, or a bucket, key or upload id that fails validation (an
    empty key would address the bucket: ``DELETE /bucket?uploadId=`` is DeleteBucket)."""
    kinds: tuple[type, ...] = (PendingUpload,) if complete else (PendingUpload, UploadInfo)
    if not isinstance(rec, kinds):
        what = "PendingUpload" if complete else "PendingUpload or UploadInfo"
        raise RecordError(f"expected a {what}, got {type(rec).__name__}")
    problem = target_problem(
        getattr(rec, "bucket", None), getattr(rec, "key", None), getattr(rec, "upload_id", None)
    )
    if problem is not None:
        raise RecordError(f"refused to {'complete' if complete else 'abort'}: {problem}")


def _field(rec: object, name: str) -> str:
    value = getattr(rec, name, "")
    return value if isinstance(value, str) else repr(value)


class _Gate:
    """One holder at a time, without a queue's fairness: a coroutine that finds the gate
    open takes it at once, even while others wait (asyncio.Lock hands itself to its
    oldest waiter, which after one stall of the record source makes every pull a wake-up
    of its own: a convoy)."""

    def __init__(self) -> None:
        self._held = False
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    async def __aenter__(self) -> None:
        while self._held:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await fut
            except BaseException:
                if fut.done() and not fut.cancelled():
                    self._wake()  # woken, then cancelled: the wake-up goes to another
                else:
                    with contextlib.suppress(ValueError):
                        self._waiters.remove(fut)
                raise
        self._held = True

    async def __aexit__(self, *exc: object) -> None:
        self._held = False
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return


class Completion:
    """complete/abort one upload, complete_many/abort_many streamed, list_uploads: what
    the engine owns for uploads already created, with its client, retries and events."""

    def __init__(
        self,
        client: ClientOf,
        config: EngineConfig,
        stats: EngineStats,
        retrier: Retrier,
        emit: Emit,
        head_object: Head,
    ) -> None:
        self._client = client
        self.config = config
        self.stats = stats
        self._retrier = retrier
        self._emit = emit
        self._head_object = head_object

    async def complete(
        self,
        p: PendingUpload,
        *,
        if_none_match: bool = False,
        progress: ProgressCallback | None = None,
        limiter: AdaptiveLimiter | None = None,
        window: int = 0,
    ) -> UploadResult:
        """Complete a deferred upload; with ``if_none_match`` the store refuses
        (:class:`PreconditionFailed`) when the key already exists. ``limiter``: a batch's,
        whose slot taken in ``window`` the request holds (see :meth:`complete_many`)."""
        check_target(p, complete=True)
        parts = []
        alg = p.checksum_algorithm
        for part in p.parts:
            entry: dict[str, Any] = {"PartNumber": part.number, "ETag": part.etag}
            if alg and part.checksum and alg in checksums.PARAM:
                entry[checksums.PARAM[alg]] = part.checksum
            parts.append(entry)
        extra: dict[str, Any] = {"IfNoneMatch": "*"} if if_none_match else {}

        async def call(attempt: int) -> str:
            try:
                resp = await self._client().complete_multipart_upload(
                    Bucket=p.bucket,
                    Key=p.key,
                    UploadId=p.upload_id,
                    MultipartUpload={"Parts": parts},
                    **extra,
                )
            except bexc.ClientError as exc:
                # a retry after a lost answer: the first attempt may have completed it;
                # settled only by proof: the object's ETag is the multipart ETag of our
                # parts (a same-size object of another writer is never taken for ours)
                code, status = error_code(exc)
                if attempt > 1 and (
                    code in ("NoSuchUpload", "PreconditionFailed") or status in (404, 412)
                ):
                    info = await self._head_object(p.bucket, p.key)
                    if not is_completed_object(p, info):
                        if code == "PreconditionFailed" or status == 412:
                            raise  # the key existed first: a conflict, as on attempt 1
                        raise CompletionUnproven(
                            f"CompleteMultipartUpload {p.uri}: an earlier attempt's answer "
                            f"was lost and the upload is gone, but {unproven_reason(p, info)}; "
                            "nothing is assumed: check the object, then resume or abort the job",
                            code="CompletionUnproven",
                            operation="CompleteMultipartUpload",
                            status=status,
                            bucket=p.bucket,
                            key=p.key,
                        ) from exc
                    assert info is not None
                    resp = {"ETag": info.etag}
                else:
                    raise
            # a 200 without a CompleteMultipartUploadResult (an HTML page) is no complete
            return answers.require(
                resp,
                "CompleteMultipartUpload",
                endpoint=answers.endpoint_of(self._client()),
                bucket=p.bucket,
                key=p.key,
            )

        etag = await self._retrier.call(
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
        return UploadResult(p.bucket, p.key, etag, p.length, len(p.parts), p.upload_id)

    async def abort(
        self, p: PendingUpload | UploadInfo, *, progress: ProgressCallback | None = None
    ) -> bool:
        """Abort a pending upload; False when it was already gone. A record that fails
        validation is a :class:`RecordError` and sends nothing."""
        check_target(p, complete=False)
        return await self.abort_id(
            p.bucket, p.key, p.upload_id, reason="aborted", progress=progress
        )

    async def abort_id(
        self,
        bucket: str,
        key: str,
        upload_id: str,
        *,
        reason: str,
        progress: ProgressCallback | None = None,
        limiter: AdaptiveLimiter | None = None,
        window: int = 0,
    ) -> bool:
        """Abort the upload ``upload_id`` of ``s3://bucket/key`` (``reason`` goes in its
        :class:`UploadAborted` event); False when it was already gone."""
        problem = target_problem(bucket, key, upload_id)
        if problem is not None:  # every abort passes here: nothing addresses a bucket URL
            raise RecordError(f"refused to abort: {problem}")

        async def call(attempt: int) -> Any:
            return await self._client().abort_multipart_upload(
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
        number of records. ``fail_fast`` stops pulling records after the first failure.

        Each record is validated before its request: one that fails is a
        :class:`BatchFailure` (code ``RecordError``) and sends nothing; the others go on
        (a stream cannot be checked whole before the first complete)."""

        async def one(rec: PendingUpload, limiter: AdaptiveLimiter, window: int) -> int:
            await self.complete(
                rec, if_none_match=if_none_match, progress=progress, limiter=limiter, window=window
            )
            return rec.length

        return await self._batch(
            records, one, concurrency=concurrency, fail_fast=fail_fast, on_result=on_result
        )

    async def abort_many(
        self,
        records: Iterable[PendingUpload | UploadInfo] | AsyncIterable[PendingUpload | UploadInfo],
        *,
        concurrency: int | None = None,
        on_result: OnResult | None = None,
        progress: ProgressCallback | None = None,
    ) -> BatchResult:
        """Abort records pulled lazily; an upload already gone counts as aborted. A record
        that fails validation is a :class:`BatchFailure` (code ``RecordError``), never a
        request."""

        async def one(
            rec: PendingUpload | UploadInfo, limiter: AdaptiveLimiter, window: int
        ) -> int:
            check_target(rec, complete=False)
            await self.abort_id(
                rec.bucket,
                rec.key,
                rec.upload_id,
                reason="aborted",
                progress=progress,
                limiter=limiter,
                window=window,
            )
            return rec.length if isinstance(rec, PendingUpload) else 0

        return await self._batch(records, one, concurrency=concurrency, on_result=on_result)

    async def _batch(
        self,
        records: Iterable[Any] | AsyncIterable[Any],
        action: Callable[[Any, AdaptiveLimiter, int], Awaitable[int]],
        *,
        concurrency: int | None,
        fail_fast: bool = False,
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
        pull = _Gate()
        workers, exhausted = 1, False

        async def run_one(rec: Any, window: int) -> None:
            error: BaseException | None = None
            try:
                done = await action(rec, limiter, window)
                result.bytes += done  # not `+= await`: that reads before awaiting
                result.succeeded += 1
            except Exception as exc:
                error = exc
                result.add_failure(
                    BatchFailure(
                        _field(rec, "bucket"),
                        _field(rec, "key"),
                        _field(rec, "upload_id"),
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

        async def worker(it: AsyncIterator[Any], tg: TaskGroup) -> None:
            # Workers pull the next record only once they hold a limiter slot, one at a
            # time, so records are read lazily and in order; a new worker starts while
            # every one is busy, up to `limit` (workers, not a task per record).
            nonlocal workers, exhausted
            while True:
                window = await limiter.acquire()
                try:
                    async with pull:
                        if exhausted or stop.is_set():
                            return
                        try:
                            rec = await anext(it)
                        except StopAsyncIteration:
                            exhausted = True
                            return
                    if workers < limit:
                        workers += 1
                        tg.start_soon(worker, it, tg)
                    await run_one(rec, window)
                finally:
                    limiter.release()

        try:
            async with (
                contextlib.aclosing(aiter_any(records)) as it,
                anyio.create_task_group() as tg,
            ):
                tg.start_soon(worker, it, tg)
        except BaseException as exc:  # e.g. the caller's record iterator raised
            real = first_error(exc)
            if real is exc:
                raise
            raise real from None
        return result

    # -- listing pending uploads -----------------------------------------------------
    async def list_uploads(
        self, bucket: str, prefix: str = "", *, directory: bool = True
    ) -> AsyncIterator[UploadInfo]:
        """Pending multipart uploads under ``prefix``, taken as a directory (a '/' is
        added) unless ``directory=False``; all pages, filtered client-side too."""
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
                return await self._client().list_multipart_uploads(**kwargs)

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
