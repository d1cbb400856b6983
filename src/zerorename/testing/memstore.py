"""An in-memory store that behaves like S3 where the committers depend on it, so the job
commit protocol is tested in milliseconds with no server.

:class:`MemoryState` is what a store holds (buckets, objects, pending uploads); it can be
copied to branch a test. :class:`MemoryStore` is one process's handle on it, implementing
:class:`~zerorename.committers.objectstore.UploadStore` with the engine's signatures,
records and errors, plus what a test needs: a log of every request
(:mod:`~zerorename.servers.requestlog`), a latency per request, and faults counted in
requests: :meth:`MemoryStore.fail_at` (a request raises what the engine raises after its
retries) and :meth:`MemoryStore.crash_at` (the process dies at a request: that handle
refuses every later request; a test opens :meth:`MemoryStore.reopen` on the same state).
:attr:`MemoryStore.gate`, when set, is awaited before each request takes effect: the
deterministic simulation (:mod:`zerorename.sim`) chooses there which process's
request goes next and which fault it meets.

Not simulated: retries (a fault is what the engine raises once they ran out), throttling,
versioning, checksums other than the parts' own, object metadata beyond the content type.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
)
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio

from zerorename.aio import aiter_any, batches, unwrapped
from zerorename.engine import checksums, errors
from zerorename.engine.events import ProgressCallback
from zerorename.engine.ops.completion import OnResult
from zerorename.engine.ops.objects import DELETE_BATCH, GET_CAP, check_cap, too_large
from zerorename.engine.planning import (
    upload_prefix,
    validate_bucket,
    validate_key,
)
from zerorename.engine.results import (
    BatchFailure,
    BatchResult,
    ObjectInfo,
    PartInfo,
    PendingUpload,
    UploadInfo,
    UploadResult,
    target_problem,
)
from zerorename.engine.retry import EngineStats
from zerorename.servers.requestlog import Request
from zerorename.testing.memfaults import AnswerLost, Fault, Faults, ProcessCrashed
from zerorename.testing.memstate import (
    MemoryState,
    StoredObject,
    StoredPart,
    StoredUpload,
    list_page,
    quoted_md5,
)
from zerorename.testing.memwriters import UploadSide
from zerorename.units import MiB

if TYPE_CHECKING:
    from zerorename.committers.objectstore import UploadStore

T = TypeVar("T")
#: awaited with (operation, bucket, key) before a request takes effect; a fault it returns
#: applies to that request as an armed one would
Gate = Callable[[str, str, str], Awaitable[Fault | None]]

#: what a store does with the ETag of a conditional DeleteObjects: honour it (S3), ignore it
#: (moto, Ceph RGW 16), or refuse the request whole as malformed (an older gateway)
ConditionalDelete = Literal["honour", "ignore", "refuse"]

#: keys (or uploads) per listing page, as S3 answers by default
PAGE = 1000
_END = object()


class MemoryStore(UploadSide):
    """One process's handle on a :class:`MemoryState`, implementing the committers'
    :class:`~zerorename.committers.objectstore.UploadStore` like the engine does.

    ``latency``: seconds every request takes (``anyio.sleep``), so requests sent in
    parallel overlap in :attr:`log` and requests sent one after another chain.
    ``batch_concurrency`` as the engine's (complete_many/abort_many default);
    ``part_size`` splits uploads; ``min_part_size``: a complete with a smaller part
    before the last is EntityTooSmall (S3's 5 MiB by default); ``checksum``: the part
    checksum algorithm recorded in deferred uploads ("none" for none);
    ``conditional_delete``: what it does with a DeleteObjects key's ETag
    (:data:`ConditionalDelete`)."""

    def __init__(
        self,
        state: MemoryState | None = None,
        *,
        latency: float = 0.0,
        batch_concurrency: int = 64,
        part_size: int = 16 * MiB,
        min_part_size: int = 5 * MiB,
        checksum: str = "CRC32C",
        clock: Callable[[], float] = time.monotonic,
        conditional_delete: ConditionalDelete = "honour",
    ) -> None:
        if checksum != "none" and checksum not in checksums.PARAM:
            raise errors.ConfigError(f"checksum must be none or one of {sorted(checksums.PARAM)}")
        self.state = state if state is not None else MemoryState()
        self.latency = latency
        self.batch_concurrency = batch_concurrency
        self.part_size = part_size
        self.min_part_size = min_part_size
        self.checksum = checksum
        self.clock = clock
        self.conditional_delete: ConditionalDelete = conditional_delete
        self.stats = EngineStats(lowest_concurrency=batch_concurrency)
        self.log: list[Request] = []
        self.crashed = False
        #: body bytes get_object handed over (a read past a cap counts the cap + 1)
        self.bytes_read = 0
        self.gate: Gate | None = None
        #: when set, awaited in place of the latency (:mod:`~zerorename.testing.rounds`)
        self.delay: Callable[[], Awaitable[None]] | None = None
        self._count = 0
        self._faults = Faults()

    # -- lifecycle and faults -------------------------------------------------------
    async def __aenter__(self) -> MemoryStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        """Nothing to open (the engine's lifecycle, for code that calls it)."""

    async def close(self) -> None:
        """Nothing to close; safe to call twice."""

    def reopen(self, state: MemoryState | None = None) -> MemoryStore:
        """A new process's handle on the same state (or on ``state``): same settings, an
        empty log, no faults."""
        return MemoryStore(
            self.state if state is None else state,
            latency=self.latency,
            batch_concurrency=self.batch_concurrency,
            part_size=self.part_size,
            min_part_size=self.min_part_size,
            checksum=self.checksum,
            clock=self.clock,
            conditional_delete=self.conditional_delete,
        )

    @property
    def requests(self) -> int:
        """Requests started on this handle so far."""
        return self._count

    def fail_at(
        self, n: int, exc: BaseException, *, op: str | None = None, after: bool = False
    ) -> None:
        """The ``n``-th request from now (of operation ``op`` if given, e.g.
        "CompleteMultipartUpload") raises ``exc``: before it takes effect, or with
        ``after`` once it did (the answer was lost)."""
        self._faults.arm(n, exc, op=op, after=after)

    def lose_answer_at(self, n: int, *, op: str = "DeleteObjects") -> None:
        """The ``n``-th DeleteObjects from now takes effect and its answer is lost; the
        store then does what the engine's retrier does: the caller's ``recheck`` (if it
        gave one), then the resend (a request of its own: counted, logged, gated)."""
        if op != "DeleteObjects":
            raise ValueError("a lost answer's resend is modelled for DeleteObjects only")
        self._faults.arm(n, AnswerLost("the answer was lost"), op=op, after=True)

    def crash_at(self, n: int, *, op: str | None = None, after: bool = False) -> None:
        """The process dies at the ``n``-th request from now (of ``op`` if given): before
        it takes effect, or with ``after`` right after it did. That request and every
        later one on this handle raise :class:`ProcessCrashed`."""
        self._faults.arm(n, None, op=op, after=after)

    def _raise(self, fault: Fault, op: str, bucket: str, key: str) -> None:
        self.crashed = self.crashed or fault.crash
        raise fault.error(op, bucket, key)

    async def _request(self, op: str, bucket: str, key: str, effect: Callable[[], T]) -> T:
        """Run one request: counted, logged, delayed by the latency, faults applied."""
        if self.crashed:
            raise ProcessCrashed(f"the process crashed earlier ({op} s3://{bucket}/{key})")
        gated = None if self.gate is None else await self.gate(op, bucket, key)
        if self.crashed:  # another request of this process crashed it meanwhile
            raise ProcessCrashed(f"the process crashed earlier ({op} s3://{bucket}/{key})")
        self._count += 1
        number = self._count
        self.stats.requests += 1
        self.stats.by_operation[op] = self.stats.by_operation.get(op, 0) + 1
        fault = self._faults.take(op) or gated
        if fault is not None and fault.crash and not fault.after:
            self.crashed = True
        start = self.clock()
        error: str | None = None
        try:
            if self.delay is not None:
                await self.delay()
            elif self.latency > 0:
                await anyio.sleep(self.latency)
            else:
                await anyio.lowlevel.checkpoint()
            if fault is not None and not fault.after:
                self._raise(fault, op, bucket, key)
            try:
                result = effect()
            except Exception:
                if fault is not None:  # the answer (an error) is lost, or the process died
                    self._raise(fault, op, bucket, key)
                raise
            if fault is not None:
                self._raise(fault, op, bucket, key)
            return result
        except BaseException as exc:
            error = type(exc).__name__
            raise
        finally:
            self.log.append(Request(number, op, bucket, key, start, self.clock(), error))

    # -- state access with S3's errors ----------------------------------------------
    def _bucket(self, bucket: str, op: str) -> dict[str, StoredObject]:
        try:
            return self.state.buckets[bucket]
        except KeyError:
            raise errors.BucketNotFound(
                f"{op} s3://{bucket}: NoSuchBucket: the bucket does not exist.",
                code="NoSuchBucket",
                operation=op,
                status=404,
                bucket=bucket,
            ) from None

    def _upload(self, bucket: str, key: str, upload_id: str, op: str) -> StoredUpload:
        up = self.state.uploads.get(upload_id)
        if up is None or (up.bucket, up.key) != (bucket, key):
            raise errors.UploadNotFound(
                f"{op} s3://{bucket}/{key}: NoSuchUpload: the upload does not exist "
                "(completed or aborted).",
                code="NoSuchUpload",
                operation=op,
                status=404,
                bucket=bucket,
                key=key,
            )
        return up

    def _exists(self, bucket: str, key: str, op: str) -> None:
        raise errors.PreconditionFailed(
            f"{op} s3://{bucket}/{key}: PreconditionFailed: the object exists (If-None-Match).",
            code="PreconditionFailed",
            operation=op,
            status=412,
            bucket=bucket,
            key=key,
        )

    # -- whole objects ----------------------------------------------------------------
    async def put_object(
        self,
        bucket: str,
        key: str,
        data: bytes,
        *,
        if_none_match: bool = False,
        content_type: str | None = None,
    ) -> str:
        validate_bucket(bucket)
        validate_key(key)
        body = bytes(data)

        def put() -> str:
            objs = self._bucket(bucket, "PutObject")
            if if_none_match and key in objs:
                self._exists(bucket, key, "PutObject")
            etag = quoted_md5(body)
            objs[key] = StoredObject(body, etag, time.time(), content_type)
            return etag

        return await self._request("PutObject", bucket, key, put)

    def _get(self, bucket: str, key: str) -> bytes:
        obj = self._bucket(bucket, "GetObject").get(key)
        if obj is None:
            raise errors.ObjectNotFound(
                f"GetObject s3://{bucket}/{key}: NoSuchKey: the object does not exist.",
                code="NoSuchKey",
                operation="GetObject",
                status=404,
                bucket=bucket,
                key=key,
            )
        return obj.data

    async def get_object(self, bucket: str, key: str, *, max_size: int = GET_CAP) -> bytes:
        """The object's bytes; :class:`ObjectTooLarge` (nothing returned) past ``max_size``,
        as the engine refuses it; ``bytes_read`` counts what a read handed over."""
        validate_bucket(bucket)
        validate_key(key)
        cap = check_cap(max_size)

        def get() -> bytes:
            data = self._get(bucket, key)
            if len(data) > cap:
                self.bytes_read += cap + 1  # the engine stops one byte past the cap
                raise too_large(bucket, key, cap, f"is {len(data)} bytes, more")
            self.bytes_read += len(data)
            return data

        return await self._request("GetObject", bucket, key, get)

    async def iter_object(
        self, bucket: str, key: str, *, chunk_size: int = MiB
    ) -> AsyncIterator[bytes]:
        validate_bucket(bucket)
        validate_key(key)
        data = await self._request("GetObject", bucket, key, lambda: self._get(bucket, key))
        for i in range(0, len(data), max(1, chunk_size)):
            yield data[i : i + chunk_size]

    async def head_object(self, bucket: str, key: str) -> ObjectInfo | None:
        validate_bucket(bucket)
        validate_key(key)

        def head() -> ObjectInfo | None:
            obj = self._bucket(bucket, "HeadObject").get(key)
            if obj is None:
                return None
            return ObjectInfo(bucket, key, len(obj.data), obj.etag, obj.modified)

        return await self._request("HeadObject", bucket, key, head)

    async def _pages(
        self, bucket: str, prefix: str, delimiter: str | None
    ) -> AsyncIterator[tuple[list[ObjectInfo], list[str]]]:
        validate_bucket(bucket)
        after: tuple[str, bool] | None = None
        while True:

            def page(
                after: tuple[str, bool] | None = after,
            ) -> tuple[list[ObjectInfo], list[str], tuple[str, bool] | None]:
                objs = self._bucket(bucket, "ListObjectsV2")
                return list_page(bucket, objs, prefix, delimiter, after, PAGE)

            contents, prefixes, after = await self._request("ListObjectsV2", bucket, prefix, page)
            yield contents, prefixes
            if after is None:
                return

    async def list_objects(
        self, bucket: str, prefix: str = "", *, delimiter: str | None = None
    ) -> AsyncIterator[ObjectInfo]:
        async for contents, _ in self._pages(bucket, prefix, delimiter):
            for o in contents:
                yield o

    async def list_prefixes(
        self, bucket: str, prefix: str, *, delimiter: str = "/"
    ) -> AsyncIterator[str]:
        async for _, prefixes in self._pages(bucket, prefix, delimiter):
            for p in prefixes:
                yield p

    async def delete_objects(
        self,
        bucket: str,
        keys: Iterable[str] | AsyncIterable[str],
        *,
        if_match: Mapping[str, str] | None = None,
        recheck: Callable[[list[str]], Awaitable[list[str]]] | None = None,
    ) -> int:
        validate_bucket(bucket)
        deleted = 0
        async for batch in batches(keys, DELETE_BATCH):
            while True:
                try:
                    deleted += await self._delete_batch(bucket, batch, if_match or {})
                    break
                except AnswerLost:  # the engine resends: first the caller's recheck
                    if recheck is not None:
                        batch = [k for k in await recheck(batch) if k in batch]
                    if not batch:
                        break
        return deleted

    async def _delete_batch(self, bucket: str, keys: list[str], etags: Mapping[str, str]) -> int:
        for k in keys:  # a batch with a bad key is refused whole, before it is sent
            validate_key(k)

        def delete() -> int:
            objs = self._bucket(bucket, "DeleteObjects")
            if etags and self.conditional_delete == "refuse":
                raise errors.S3Error(
                    f"DeleteObjects s3://{bucket}: MalformedXML: the XML you provided was "
                    "not well-formed or did not validate against our published schema.",
                    code="MalformedXML",
                    operation="DeleteObjects",
                    status=400,
                    bucket=bucket,
                    key=keys[0],
                )
            kept = 0
            for k in keys:
                obj, want = objs.get(k), etags.get(k)
                if (
                    want is not None
                    and self.conditional_delete == "honour"
                    and (obj is None or obj.etag.strip('"') != want.strip('"'))
                ):
                    kept += 1  # S3: this key's <Error> is PreconditionFailed, the rest go
                    continue
                objs.pop(k, None)
            return len(keys) - kept

        return await self._request("DeleteObjects", bucket, keys[0], delete)

    # -- multipart --------------------------------------------------------------------
    async def _create(self, bucket: str, key: str) -> str:
        def create() -> str:
            self._bucket(bucket, "CreateMultipartUpload")
            seq = self.state.next_seq()
            upload_id = f"mem-{seq}-{os.urandom(4).hex()}"
            alg = None if self.checksum == "none" else self.checksum
            self.state.uploads[upload_id] = StoredUpload(
                bucket, key, upload_id, time.time(), seq, alg
            )
            return upload_id

        return await self._request("CreateMultipartUpload", bucket, key, create)

    async def _upload_part(
        self, bucket: str, key: str, upload_id: str, number: int, data: bytes
    ) -> PartInfo:
        def send() -> PartInfo:
            up = self._upload(bucket, key, upload_id, "UploadPart")
            checksum = checksums.compute(self.checksum, data)
            part = StoredPart(data, quoted_md5(data), checksum)
            up.parts[number] = part
            return PartInfo(number, part.etag, len(data), checksum)

        info = await self._request("UploadPart", bucket, key, send)
        self.stats.parts_uploaded += 1
        self.stats.bytes_uploaded += len(data)
        return info

    def _completed(self, p: PendingUpload, if_none_match: bool) -> str:
        """CompleteMultipartUpload's effect: the object from the listed parts, or S3's error."""
        op = "CompleteMultipartUpload"
        objs = self._bucket(p.bucket, op)
        up = self._upload(p.bucket, p.key, p.upload_id, op)
        digests: list[bytes] = []
        for i, want in enumerate(p.parts):
            have = up.parts.get(want.number)
            problem = ""
            if have is None or have.etag.strip('"') != want.etag.strip('"'):
                problem = f"InvalidPart: part {want.number} was not uploaded with that ETag"
            elif want.checksum is not None and want.checksum != have.checksum:
                problem = f"InvalidPart: part {want.number} has another checksum"
            elif i < len(p.parts) - 1 and len(have.data) < self.min_part_size:
                problem = f"EntityTooSmall: part {want.number} is smaller than the minimum"
            if problem:
                code = problem.split(":", 1)[0]
                raise errors.S3Error(
                    f"{op} s3://{p.bucket}/{p.key}: {problem}.",
                    code=code,
                    operation=op,
                    status=400,
                    bucket=p.bucket,
                    key=p.key,
                )
            assert have is not None
            digests.append(bytes.fromhex(have.etag.strip('"')))
        if if_none_match and p.key in objs:
            self._exists(p.bucket, p.key, op)
        data = b"".join(up.parts[part.number].data for part in p.parts)
        etag = f'"{hashlib.md5(b"".join(digests)).hexdigest()}-{len(digests)}"'
        objs[p.key] = StoredObject(data, etag, time.time())
        del self.state.uploads[p.upload_id]
        return etag

    @staticmethod
    def _check_target(rec: object, *, complete: bool) -> None:
        kinds: tuple[type, ...] = (PendingUpload,) if complete else (PendingUpload, UploadInfo)
        if not isinstance(rec, kinds):
            raise errors.RecordError(f"expected an upload record, got {type(rec).__name__}")
        problem = target_problem(
            getattr(rec, "bucket", None), getattr(rec, "key", None), getattr(rec, "upload_id", None)
        )
        if problem is not None:
            raise errors.RecordError(f"refused to {'complete' if complete else 'abort'}: {problem}")

    async def complete(
        self,
        p: PendingUpload,
        *,
        if_none_match: bool = False,
        progress: ProgressCallback | None = None,
    ) -> UploadResult:
        """Complete a deferred upload (:class:`PreconditionFailed` with ``if_none_match``
        when the key exists; :class:`UploadNotFound` when the upload is gone)."""
        self._check_target(p, complete=True)
        etag = await self._request(
            "CompleteMultipartUpload", p.bucket, p.key, lambda: self._completed(p, if_none_match)
        )
        self.stats.uploads_completed += 1
        return UploadResult(p.bucket, p.key, etag, p.length, len(p.parts), p.upload_id)

    async def _abort_id(self, bucket: str, key: str, upload_id: str) -> bool:
        def abort() -> None:
            self._upload(bucket, key, upload_id, "AbortMultipartUpload")
            del self.state.uploads[upload_id]

        try:
            await self._request("AbortMultipartUpload", bucket, key, abort)
        except errors.UploadNotFound:
            return False
        self.stats.uploads_aborted += 1
        return True

    async def abort(
        self, p: PendingUpload | UploadInfo, *, progress: ProgressCallback | None = None
    ) -> bool:
        self._check_target(p, complete=False)
        return await self._abort_id(p.bucket, p.key, p.upload_id)

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
        async def one(rec: PendingUpload) -> int:
            await self.complete(rec, if_none_match=if_none_match)
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
        async def one(rec: PendingUpload | UploadInfo) -> int:
            self._check_target(rec, complete=False)
            await self._abort_id(rec.bucket, rec.key, rec.upload_id)
            return rec.length if isinstance(rec, PendingUpload) else 0

        return await self._batch(records, one, concurrency, False, on_result)

    async def _batch(
        self,
        records: Iterable[Any] | AsyncIterable[Any],
        action: Callable[[Any], Awaitable[int]],
        concurrency: int | None,
        fail_fast: bool,
        on_result: OnResult | None,
    ) -> BatchResult:
        """The engine's batch: a slot is taken before the next record is pulled, so
        records are read lazily and in order; a failure is reported, not raised."""
        result = BatchResult()
        slots = anyio.Semaphore(concurrency or self.batch_concurrency)
        stop = False

        async def run_one(rec: Any) -> None:
            nonlocal stop
            try:
                error: BaseException | None = None
                try:
                    done = await action(rec)
                    result.bytes += done
                    result.succeeded += 1
                except Exception as exc:
                    error = exc
                    result.add_failure(
                        BatchFailure(
                            str(getattr(rec, "bucket", "")),
                            str(getattr(rec, "key", "")),
                            str(getattr(rec, "upload_id", "")),
                            str(exc),
                            getattr(exc, "code", "") or type(exc).__name__,
                        )
                    )
                    stop = stop or fail_fast
                if on_result is not None:
                    outcome = on_result(rec, error)
                    if outcome is not None:
                        await outcome
            finally:
                slots.release()

        async with (
            unwrapped(),
            contextlib.aclosing(aiter_any(records)) as it,
            anyio.create_task_group() as tg,
        ):
            while True:
                await slots.acquire()
                rec: Any = _END
                if not stop:
                    with contextlib.suppress(StopAsyncIteration):
                        rec = await anext(it)
                if rec is _END:
                    slots.release()
                    break
                tg.start_soon(run_one, rec)
        return result

    async def _list_uploads_page(
        self, bucket: str, want: str, after: tuple[str, int] | None
    ) -> tuple[list[UploadInfo], tuple[str, int] | None]:
        def page() -> tuple[list[UploadInfo], tuple[str, int] | None]:
            self._bucket(bucket, "ListMultipartUploads")
            ups = sorted(
                (u for u in self.state.uploads.values() if u.bucket == bucket),
                key=lambda u: (u.key, u.seq),
            )
            out: list[UploadInfo] = []
            mark = after
            for u in ups:
                if not u.key.startswith(want) or (mark is not None and (u.key, u.seq) <= mark):
                    continue
                if len(out) == PAGE:
                    return out, mark
                out.append(UploadInfo(bucket, u.key, u.upload_id, u.initiated))
                mark = (u.key, u.seq)
            return out, None

        return await self._request("ListMultipartUploads", bucket, want, page)

    async def list_uploads(
        self, bucket: str, prefix: str = "", *, directory: bool = True
    ) -> AsyncIterator[UploadInfo]:
        validate_bucket(bucket)
        want = upload_prefix(prefix, directory=directory)
        after: tuple[str, int] | None = None
        while True:
            found, after = await self._list_uploads_page(bucket, want, after)
            for u in found:
                yield u
            if after is None:
                return


if TYPE_CHECKING:  # mypy checks the fake keeps the committers' protocol
    _IS_UPLOAD_STORE: type[UploadStore] = MemoryStore

__all__ = ["MemoryState", "MemoryStore", "ProcessCrashed"]
