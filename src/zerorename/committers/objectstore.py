"""The store the committers work on, as a protocol: the few object and multipart
operations they call, with the engine's signatures and record types.

:class:`~zerorename.engine.UploadEngine` implements it against S3;
:class:`zerorename.testing.memstore.MemoryStore` implements it in memory, so the
job-commit protocol is tested with no server. :class:`Store` is what a job commit,
resume, abort and cleanup need; :class:`UploadStore` adds what task attempts need to
write their outputs as deferred uploads.

Behaviour every implementation keeps (S3's, where the committers depend on it):

- a multipart upload is invisible until completed; completing it makes the object
  appear at once, from exactly the listed parts, with ETag ``"<md5 of part md5s>-<n>"``;
- ``if_none_match`` on a put or complete: an existing key is :class:`PreconditionFailed`
  and nothing is written (the upload stays pending);
- reading a missing object is :class:`ObjectNotFound`; ``head_object`` answers None;
- ``get_object`` past its ``max_size`` is :class:`ObjectTooLarge`, the read stopped at the
  cap (records are read with the caps below: memory never follows what a store claims);
- listings are sorted by key; ``delete_objects`` of missing keys is no error;
- ``abort`` of an upload that is gone answers False (``abort_many`` counts it aborted);
  ``complete`` of one raises :class:`UploadNotFound`;
- ``complete_many``/``abort_many`` report a failed record to ``on_result`` and in the
  :class:`BatchResult`, never by raising; a record that fails validation sends nothing.
"""

from __future__ import annotations

from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
)
from types import TracebackType
from typing import Any, Literal, Protocol

from zerorename.engine.bodies.writers import AfterCreate
from zerorename.engine.events import ProgressCallback
from zerorename.engine.ops.completion import OnResult
from zerorename.engine.results import (
    BatchResult,
    ObjectInfo,
    PendingUpload,
    UploadInfo,
    UploadResult,
)
from zerorename.units import KiB, MiB

#: size caps of the records read whole from a store: a read stops at its cap and fails in
#: one line, changing nothing (each is far above what zerorename writes)
#: a job's marker (``job.json``)
MARKER_CAP = 64 * KiB
#: a job-commit journal
JOURNAL_CAP = 1 * MiB
#: a `.pending` record: one upload of up to 10,000 parts
PENDING_CAP = 4 * MiB
#: a job's commit plan (its pendingsets' names)
PLAN_CAP = 64 * MiB
#: a replace plan, or a partitions record (the older objects / partitions a replace lists)
REPLACE_PLAN_CAP = 256 * MiB
#: a destination's ``_SUCCESS`` (zerorename's or S3A's)
SUCCESS_CAP = 64 * MiB
#: the note an S3A job's abort keeps while it deletes the job's directory (the objects it
#: keeps: ~200 bytes each)
ABORT_NOTE_CAP = 256 * MiB
#: any record ``zerorename inspect`` shows
INSPECT_CAP = 64 * MiB


class StoreStats(Protocol):
    """Counters a job commit reads (and records in its journal and ``_SUCCESS``)."""

    retries: int
    throttles: int


class Store(Protocol):
    """Whole-object and multipart operations a job commit, resume, abort and cleanup use."""

    @property
    def stats(self) -> StoreStats:
        """Request counters (retries and throttles so far)."""
        ...

    async def put_object(
        self,
        bucket: str,
        key: str,
        data: bytes,
        *,
        if_none_match: bool = False,
        content_type: str | None = None,
    ) -> str:
        """Write a small object; its ETag. ``if_none_match``: PreconditionFailed if it exists."""
        ...

    async def get_object(self, bucket: str, key: str, *, max_size: int = ...) -> bytes:
        """A whole small object; ObjectNotFound when missing, ObjectTooLarge (the read
        stopped at the cap) when it holds more than ``max_size`` bytes."""
        ...

    def iter_object(self, bucket: str, key: str, *, chunk_size: int = ...) -> AsyncIterator[bytes]:
        """An object in chunks; ObjectNotFound when missing."""
        ...

    async def head_object(self, bucket: str, key: str) -> ObjectInfo | None:
        """Size, ETag and time of an object; None when it does not exist."""
        ...

    def list_objects(
        self, bucket: str, prefix: str = "", *, delimiter: str | None = None
    ) -> AsyncIterator[ObjectInfo]:
        """Objects under a plain string prefix, sorted by key."""
        ...

    def list_prefixes(
        self, bucket: str, prefix: str, *, delimiter: str = "/"
    ) -> AsyncIterator[str]:
        """The common prefixes ('subdirectories') right under ``prefix``."""
        ...

    async def delete_objects(
        self,
        bucket: str,
        keys: Iterable[str] | AsyncIterable[str],
        *,
        if_match: Mapping[str, str] | None = None,
        recheck: Callable[[list[str]], Awaitable[list[str]]] | None = None,
    ) -> int:
        """Delete keys (missing ones are fine); how many were deleted. A key ``if_match``
        names is deleted only while it has that ETag (kept and not counted otherwise) on a
        store that honours S3's conditional DeleteObjects; one that ignores it deletes.
        ``recheck``: awaited with a batch's keys before the engine resends it (after a
        failure or a lost answer); it returns the keys still to delete."""
        ...

    def list_uploads(
        self, bucket: str, prefix: str = "", *, directory: bool = True
    ) -> AsyncIterator[UploadInfo]:
        """Pending multipart uploads under ``prefix`` (a directory unless ``directory=False``)."""
        ...

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
        """Complete records pulled lazily, ``concurrency`` in flight; failures reported."""
        ...

    async def abort(
        self, p: PendingUpload | UploadInfo, *, progress: ProgressCallback | None = None
    ) -> bool:
        """Abort one pending upload; False when it was already gone."""
        ...

    async def abort_many(
        self,
        records: Iterable[PendingUpload | UploadInfo] | AsyncIterable[PendingUpload | UploadInfo],
        *,
        concurrency: int | None = None,
        on_result: OnResult | None = None,
        progress: ProgressCallback | None = None,
    ) -> BatchResult:
        """Abort records pulled lazily; one already gone counts as aborted."""
        ...


class OutputWriter(Protocol):
    """An async writer of one output: ``async with store.open_writer(b, k) as w``."""

    result: UploadResult | PendingUpload | None

    @property
    def bytes_written(self) -> int: ...

    async def __aenter__(self) -> Any: ...

    async def write(self, data: bytes | bytearray | memoryview) -> int: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Any: ...


class SyncOutputWriter(Protocol):
    """A blocking writer of one output for a thread other than the event loop's."""

    result: UploadResult | PendingUpload | None

    @property
    def closed(self) -> bool: ...

    @property
    def bytes_written(self) -> int: ...

    def write(self, data: Any) -> int: ...

    def tell(self) -> int: ...

    def close(self) -> None: ...

    def abort(self) -> None: ...

    def after_close(self, hook: Callable[[UploadResult | PendingUpload], Awaitable[None]]) -> None:
        """Run ``await hook(result)`` on the loop once ``close()`` finished the upload,
        before ``close()`` returns; its error is ``close()``'s."""
        ...


class UploadStore(Store, Protocol):
    """A :class:`Store` that also takes outputs as (deferred) multipart uploads: what task
    attempts write with."""

    async def upload(
        self,
        bucket: str,
        key: str,
        source: Any,
        *,
        defer: Literal[True],
        progress: ProgressCallback | None = None,
        size: int | None = None,
        after_create: AfterCreate | None = None,
        **object_args: Any,
    ) -> PendingUpload:
        """Upload ``source`` (bytes, a path, a file, an iterable of bytes) as a deferred
        multipart upload: every part sent, nothing completed; ``after_create`` runs once
        the upload exists (raising aborts it)."""
        ...

    def open_writer(
        self,
        bucket: str,
        key: str,
        *,
        defer: bool = False,
        progress: ProgressCallback | None = None,
        after_create: AfterCreate | None = None,
        **object_args: Any,
    ) -> OutputWriter:
        """An async writer whose ``result`` is the upload (a PendingUpload with ``defer``);
        ``after_create`` runs once the upload exists (raising aborts it)."""
        ...

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
    ) -> SyncOutputWriter:
        """A blocking writer for another thread than ``loop``'s."""
        ...


__all__ = [
    "INSPECT_CAP",
    "JOURNAL_CAP",
    "MARKER_CAP",
    "PENDING_CAP",
    "PLAN_CAP",
    "REPLACE_PLAN_CAP",
    "SUCCESS_CAP",
    "OutputWriter",
    "Store",
    "StoreStats",
    "SyncOutputWriter",
    "UploadStore",
]
