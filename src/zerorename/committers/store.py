"""Store helpers over the engine: records in and out, streamed pendingsets, bounded maps,
and the listings that cleanup and conflict checks run. All S3 access goes through the
engine; engine errors are left to the callers, which wrap them."""

from __future__ import annotations

import contextlib
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Sequence,
)
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from zerorename.aio import aiter_any, unwrapped
from zerorename.committers.codec.jsonstream import JsonStreamError, aiter_object_stream
from zerorename.committers.codec.pending import (
    PendingRecord,
    PendingSetHeader,
    PendingSetParser,
    stream_error,
)
from zerorename.committers.conflict import is_foreign
from zerorename.committers.errors import CommitterError, RecordFormatError
from zerorename.committers.objectstore import Store
from zerorename.committers.paths import Destination, check_partitioned_path, key_carries_job
from zerorename.engine.errors import ObjectNotFound
from zerorename.engine.results import ObjectInfo, PendingUpload, UploadInfo, is_completed_object
from zerorename.units import KiB

T = TypeVar("T")

READ_CHUNK = 256 * KiB
#: listed items read ahead by :func:`prefetch` (one listing page)
PREFETCH = 1000
#: prefixes (partitions, directories) listed at once by a conflict check or a replace
LIST_CONCURRENCY = 16


async def bounded_map(
    items: Iterable[T] | AsyncIterable[T], fn: Callable[[T], Awaitable[None]], concurrency: int
) -> None:
    """Run ``fn`` over ``items`` with at most ``concurrency`` in flight; items are pulled
    lazily. The first exception cancels the rest and propagates (in a task group)."""
    limit = anyio.Semaphore(max(1, concurrency))

    async def run(item: T) -> None:
        try:
            await fn(item)
        finally:
            limit.release()

    async with unwrapped(), anyio.create_task_group() as tg:
        async for item in aiter_any(items):
            await limit.acquire()
            tg.start_soon(run, item)


class Check(StrEnum):
    """Why the object at an upload's key is looked at (for the reader: every reason takes
    the same proof, see :func:`is_ours`)."""

    #: resuming: an earlier process may have completed the upload before it crashed
    RESUME = "resume"
    #: our complete failed (not with 412): an earlier attempt may have completed it
    FAILED = "failed"
    #: our complete got 412 (If-None-Match): the key existed before it; a racer's?
    KEY_EXISTED = "key_existed"
    #: about to delete it (abort, rollback): a wrong yes deletes someone's data
    DELETE = "delete"


def is_ours(upload: PendingUpload, info: ObjectInfo | None, why: Check) -> bool:
    """The one rule for "is this object what completing ``upload`` made?", the same for
    every ``why``: only proof counts. The size must be the upload's length and the ETag
    the multipart ETag computed from the upload's part ETags (MD5 of their binary MD5s,
    ``-<parts>``). A same-size object of another form (a single PUT, another upload's
    parts) is never ours; where the multipart ETag cannot be computed (encrypted stores:
    part ETags that are not MD5s) nothing is ours, so nothing is adopted or deleted on a
    guess. The engine's complete retry applies the same rule."""
    del why  # kept for callers' clarity: how much proof it takes no longer varies
    return is_completed_object(upload, info)


async def nothing() -> None:
    """No request: an empty slot of :func:`gather` (a step that does not apply)."""


async def gather(*steps: Awaitable[Any]) -> list[Any]:
    """Run independent requests at once (one round trip, not one each) and wait for all
    of them; then the first error in argument order is raised, so which error a caller
    sees does not depend on timing. A cancellation or an interrupt is not waited on."""
    out: list[Any] = [None] * len(steps)
    errors: list[Exception | None] = [None] * len(steps)

    async def run(i: int, step: Awaitable[Any]) -> None:
        try:
            out[i] = await step
        except Exception as exc:  # kept, raised below in argument order
            errors[i] = exc

    async with unwrapped(), anyio.create_task_group() as tg:
        for i, step in enumerate(steps):
            tg.start_soon(run, i, step)
    for exc in errors:
        if exc is not None:
            raise exc
    return out


@dataclass(frozen=True)
class Outcome(Generic[T]):
    """What an awaited step gave: its value or the error it raised."""

    value: T | None = None
    error: Exception | None = None

    def get(self) -> T:
        """The value, or the step's error raised here."""
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


async def caught(step: Awaitable[T]) -> Outcome[T]:
    """``step``'s outcome, an error kept rather than raised (for :func:`gather`, when the
    caller decides which error counts first)."""
    try:
        return Outcome(await step)
    except Exception as exc:
        return Outcome(error=exc)


class Prefetched(AsyncIterator[T]):
    """What :func:`prefetch` read and is reading; a read error is raised here, after the
    items read before it."""

    def __init__(self, recv: MemoryObjectReceiveStream[T], failed: list[Exception]) -> None:
        self._recv = recv
        self._failed = failed

    def __aiter__(self) -> Prefetched[T]:
        return self

    async def __anext__(self) -> T:
        try:
            return await self._recv.receive()
        except anyio.EndOfStream:
            if self._failed:
                raise self._failed[0] from None
            raise StopAsyncIteration from None


@contextlib.asynccontextmanager
async def prefetch(
    source: AsyncIterable[T], buffer: int = PREFETCH
) -> AsyncIterator[Prefetched[T]]:
    """Start reading ``source`` (a listing) now, ``buffer`` items ahead at most, while the
    block does something else first: the listing's first request overlaps the block's
    instead of following it, and memory stays bounded. Leaving the block stops the read."""
    send, recv = anyio.create_memory_object_stream[T](max(1, buffer))
    failed: list[Exception] = []

    async def read() -> None:
        async with send:
            try:
                async for item in source:
                    await send.send(item)
            except Exception as exc:  # for the reader of the items, not the block
                failed.append(exc)

    async with unwrapped(), anyio.create_task_group() as tg, recv:
        tg.start_soon(read)
        try:
            yield Prefetched(recv, failed)
        finally:
            tg.cancel_scope.cancel()


async def read_optional(engine: Store, bucket: str, key: str, *, max_size: int) -> bytes | None:
    """The object's bytes, or None when it does not exist; a record larger than
    ``max_size`` (a named cap of :mod:`objectstore`) is ObjectTooLarge, read no further."""
    try:
        return await engine.get_object(bucket, key, max_size=max_size)
    except ObjectNotFound:
        return None


def check_record(
    rec: PendingRecord, dest: Destination, job_id: str, location: str, *, partitioned: bool
) -> None:
    """A record a job may complete: its bucket, under its destination, its job, and a key
    the job's naming rule made (the id in the file name's slot, not just somewhere)."""
    u = rec.upload
    rel = dest.rel(u.key) if u.bucket == dest.bucket else None
    if rel is None:
        raise RecordFormatError(
            f"upload {u.uri} is outside the destination {dest.uri}", location=location
        )
    if rec.job_id != job_id or not key_carries_job(u.key, job_id):
        raise RecordFormatError(
            f"upload {u.uri} does not belong to job {job_id}", location=location
        )
    if partitioned:
        try:
            check_partitioned_path(rel)
        except ValueError as exc:
            raise RecordFormatError(str(exc), location=location) from None


async def scan_pendingset(
    engine: Store, bucket: str, key: str, job_id: str | None
) -> AsyncIterator[PendingRecord | PendingSetHeader]:
    """Stream a pendingset straight from the store: each record, then the header once the
    file parsed to its end. For checks only: records come before the end is known."""
    location = f"s3://{bucket}/{key}"
    parser = PendingSetParser(location, expect_job_id=job_id)
    try:
        async for ev in aiter_object_stream(
            engine.iter_object(bucket, key, chunk_size=READ_CHUNK), "commits"
        ):
            rec = parser.handle(ev)
            if rec is not None:
                yield rec
    except JsonStreamError as exc:
        raise stream_error(exc, location) from None
    except ObjectNotFound:
        raise RecordFormatError("pendingset does not exist", location=location) from None
    yield parser.finish()


async def job_uploads(engine: Store, dest: Destination, job_id: str) -> AsyncIterator[UploadInfo]:
    """Pending uploads under the destination (``prefix + '/'``) that the job's naming rule
    made (its id in the file name's slot): never another job's, even one whose key mentions
    this id elsewhere, never a sibling destination's."""
    async for u in engine.list_uploads(dest.bucket, dest.list_prefix, directory=False):
        if dest.rel(u.key) is not None and key_carries_job(u.key, job_id):
            yield u


async def abort_uploads(
    engine: Store,
    uploads: AsyncIterable[UploadInfo],
    *,
    concurrency: int | None = None,
    on_abort: Callable[[UploadInfo], None] | None = None,
) -> int:
    """Abort a stream of uploads; returns how many were aborted (already gone counts)."""
    count = 0

    def seen(rec: Any, exc: BaseException | None) -> None:
        nonlocal count
        if exc is None:
            count += 1
            if on_abort is not None:
                on_abort(rec)

    result = await engine.abort_many(uploads, concurrency=concurrency, on_result=seen)
    if result.failed:
        first = result.failures[0]
        raise CommitterError(
            f"{result.failed} uploads could not be aborted, e.g. "
            f"s3://{first.bucket}/{first.key}: {first.error}"
        )
    return count


async def delete_keys(engine: Store, bucket: str, keys: AsyncIterable[str]) -> int:
    return await engine.delete_objects(bucket, keys)


async def keys_under(
    engine: Store,
    bucket: str,
    prefix: str,
    keep: Callable[[str], bool],
    *,
    skip: Iterable[str] = (),
) -> AsyncIterator[str]:
    """Keys under ``prefix`` for which ``keep`` is true (streamed from the listing)."""
    skipped = set(skip)
    async for obj in engine.list_objects(bucket, prefix):
        if obj.key not in skipped and keep(obj.key):
            yield obj.key


async def first_foreign(
    engine: Store, dest: Destination, prefix: str, job_id: str, limit: int = 5
) -> list[str]:
    """Up to ``limit`` objects under ``prefix`` not created by this job (ignoring every
    job's records). For the whole destination, top-level ``__magic*`` directories are
    skipped without listing them; the other directories are listed at once."""
    found: list[str] = []
    if prefix != dest.list_prefix:
        async for obj in engine.list_objects(dest.bucket, prefix):
            if is_foreign(dest, obj.key, job_id):
                found.append(obj.key)
                if len(found) >= limit:
                    break
        return found
    async for obj in engine.list_objects(dest.bucket, prefix, delimiter="/"):
        if is_foreign(dest, obj.key, job_id):
            found.append(obj.key)
            if len(found) >= limit:
                return found
    subs = [
        sub
        async for sub in engine.list_prefixes(dest.bucket, prefix)
        if not (dest.rel(sub) or "").startswith("__magic")
    ]
    return found + await first_foreign_in(engine, dest, subs, job_id, limit - len(found))


async def first_foreign_in(
    engine: Store, dest: Destination, prefixes: Sequence[str], job_id: str, limit: int = 5
) -> list[str]:
    """Up to ``limit`` objects not created by this job under any of ``prefixes`` (each
    listed by :func:`first_foreign`), in prefix order: the prefixes are listed
    ``LIST_CONCURRENCY`` at once, and no more are started once ``limit`` were found."""
    by_prefix: dict[int, list[str]] = {}

    def enough() -> bool:
        return sum(len(v) for v in by_prefix.values()) >= limit

    def indexes() -> Iterator[int]:
        for i in range(len(prefixes)):
            if enough():
                return
            yield i

    async def one(i: int) -> None:
        if not enough():
            by_prefix[i] = await first_foreign(engine, dest, prefixes[i], job_id, limit)

    await bounded_map(indexes(), one, LIST_CONCURRENCY)
    return [key for i in sorted(by_prefix) for key in by_prefix[i]][:limit]
