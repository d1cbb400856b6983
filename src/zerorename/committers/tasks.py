"""Task attempts: where a task's outputs go until job commit, and task commit/abort.

- :class:`MagicTaskAttempt`: each output streams straight to its final key as a deferred
  multipart upload; a ``.pending`` record per output is kept under the job's magic
  directory so another process can abort the attempt.
- :class:`StagingTaskAttempt`: outputs are local files in a per-attempt directory; task
  commit uploads them (bounded concurrency) as deferred uploads.

Task commit writes the attempt's uploads as one pendingset, named per task: a later
attempt of the same task overwrites it (last commit wins, never an error).
"""

from __future__ import annotations

import asyncio
import builtins
import json
import logging
import shutil
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio

from zerorename.aio import to_the_end
from zerorename.committers import objectstore as caps
from zerorename.committers.codec.pending import PendingRecord, PendingSetHeader, pendingset_bytes
from zerorename.committers.codec.validate import Fields, load_json
from zerorename.committers.commit.storage import job_is_active
from zerorename.committers.context import JobContext
from zerorename.committers.errors import (
    CommitterError,
    JobNotActive,
    PathError,
    RecordFormatError,
    TaskAttemptError,
    wrap_engine_errors,
)
from zerorename.committers.objectstore import OutputWriter, SyncOutputWriter, UploadStore
from zerorename.committers.paths import (
    PENDING_SUFFIX,
    attempt_name,
    check_partitioned_path,
    check_relative_path,
    pending_record_destination,
    task_name,
    with_job_id,
)
from zerorename.committers.store import bounded_map
from zerorename.engine.errors import EngineError
from zerorename.engine.results import PendingUpload, UploadResult

log = logging.getLogger("zerorename.committers")


@dataclass(frozen=True)
class TaskCommitSummary:
    """What a committed task attempt hands to the job driver: small and JSON-serialisable.

    ``bytes`` counts the data uploaded (not the zero bytes visible before job commit).
    """

    job_id: str
    task_id: str
    attempt: int
    pendingset: str  # s3://bucket/key of the task's pendingset
    files: int
    bytes: int
    uploads: int
    committer: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TaskCommitSummary:
        """Check every field's type and range (the driver acts on what it names)."""
        f = Fields(dict(d) if isinstance(d, Mapping) else d, "task commit summary", "")
        task_id = f.d.get("task_id")
        return cls(
            job_id=f.str_("job_id"),
            task_id=str(f.int_("task_id")) if type(task_id) is int else f.str_("task_id"),
            attempt=f.int_("attempt"),
            pendingset=f.str_("pendingset"),
            files=f.int_("files"),
            bytes=f.int_("bytes"),
            uploads=f.int_("uploads"),
            committer=f.str_("committer"),
        )

    @classmethod
    def from_json(cls, text: str | builtins.bytes) -> TaskCommitSummary:
        return cls.from_dict(load_json(text, "task commit summary", ""))


class TaskAttempt:
    """One attempt of one task of a job. ``await setup()``, write outputs, then
    ``await commit()`` (when the driver allows) or ``await abort()``."""

    kind = "base"

    def __init__(self, ctx: JobContext, task_id: int | str, attempt: int) -> None:
        self.ctx = ctx
        self.task_id = task_name(task_id)
        self.attempt = attempt
        self.name = attempt_name(task_id, attempt)
        self._lock = threading.Lock()
        self._records: list[PendingRecord] = []
        self._files = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._state = "new"

    @property
    def engine(self) -> UploadStore:
        return self.ctx.engine

    def final_rel(self, rel: str) -> str:
        """Path (relative to the destination) an output finally gets: validated, with the
        job id in its file name."""
        rel = with_job_id(check_relative_path(rel), self.ctx.job_id)
        if self.ctx.partitioned:
            check_partitioned_path(rel)
        return rel

    def _check_open(self) -> None:
        if self._state != "active":
            raise TaskAttemptError(
                f"task attempt {self.name} is {self._state}: outputs can "
                f"only be opened between setup() and commit()/abort()"
            )

    async def setup(self) -> None:
        """Start the attempt; JobNotActive if the job is not set up (or already over)."""
        self._loop = asyncio.get_running_loop()
        async with wrap_engine_errors(f"setup of task attempt {self.name}"):
            active = await job_is_active(self.ctx)
        if not active:
            raise JobNotActive(f"job {self.ctx.job_id} is not active at {self.ctx.dest.uri}")
        self._state = "active"

    def _add(self, rec: PendingRecord) -> None:
        with self._lock:
            self._records.append(rec)
            self._files += 1

    def _record(self, upload: PendingUpload) -> PendingRecord:
        return PendingRecord(
            upload,
            self.ctx.job_id,
            self.task_id,
            self.attempt,
            text=f"zerorename {self.kind} committer",
        )

    async def _still_active(self) -> None:
        """Run once each output's upload exists: JobNotActive (the writer then aborts the
        upload) when the job's marker is gone. The release deletes the marker before its
        last listing of the job's uploads, so an upload created before this check found the
        marker is listed and aborted there, and one created later aborts itself here: a
        straggler (a speculative copy Spark killed, a task of a finished job) leaves no
        pending upload behind as long as its process lives."""
        if not await job_is_active(self.ctx):
            raise JobNotActive(
                f"job {self.ctx.job_id} finished while task attempt {self.name} wrote; "
                "its output is discarded"
            )

    async def _save_pendingset(self) -> TaskCommitSummary:
        """Write the task's pendingset (overwriting an earlier attempt's), re-checking the job
        is active before and after; a finished job's straggler cleans up after itself."""
        job = self.ctx
        if not await job_is_active(job):
            raise JobNotActive(
                f"job {job.job_id} is no longer active: task attempt {self.name} may not commit"
            )
        header = PendingSetHeader(
            job.job_id, self.task_id, self.attempt, extra={"committer": self.kind}
        )
        key = job.layout.pendingset(self.task_id)
        with self._lock:
            records = list(self._records)
        await self.engine.put_object(
            job.dest.bucket, key, pendingset_bytes(header, records), content_type="application/json"
        )
        if not await job_is_active(job):
            await self.engine.delete_objects(job.dest.bucket, [key])
            raise JobNotActive(
                f"job {job.job_id} finished while task attempt {self.name} "
                f"committed; its output is discarded"
            )
        return TaskCommitSummary(
            job_id=job.job_id,
            task_id=self.task_id,
            attempt=self.attempt,
            pendingset=job.dest.uri_of(key),
            files=len(records),
            bytes=sum(r.upload.length for r in records),
            uploads=len(records),
            committer=self.kind,
        )

    async def _abort_records(self) -> None:
        with self._lock:
            records, self._records = self._records, []
        if records:
            await self.engine.abort_many([r.upload for r in records])

    async def commit(self) -> TaskCommitSummary:
        """Promote the attempt's output to the job (visible only at job commit)."""
        if self._state != "active":
            raise TaskAttemptError(f"task attempt {self.name} is {self._state}; cannot commit")
        try:
            summary = await self._commit()
        except BaseException as exc:
            self._state = "failed"
            try:
                await to_the_end(self._abort_all(), cleanup=True)
            except Exception:
                log.exception("aborting task attempt %s after a failed commit", self.name)
            if isinstance(exc, CommitterError) or not isinstance(exc, Exception):
                raise
            raise TaskAttemptError(f"task attempt {self.name} failed to commit: {exc}") from exc
        self._state = "committed"
        return summary

    async def abort(self) -> None:
        """Abort the attempt's uploads and delete its records and local files."""
        self._state = "aborted"
        async with wrap_engine_errors(f"abort of task attempt {self.name}"):
            await self._abort_all()

    # subclass hooks
    async def _commit(self) -> TaskCommitSummary:
        raise NotImplementedError

    async def _abort_all(self) -> None:
        raise NotImplementedError

    def needs_commit(self) -> bool:
        raise NotImplementedError

    def open_sync(self, rel: str, **object_args: Any) -> Any:
        """A blocking binary file for output ``rel`` (for a thread other than the loop's)."""
        raise NotImplementedError

    def open(self, rel: str, **object_args: Any) -> Any:
        """An async writer for output ``rel``: ``async with ta.open(rel) as out: ...``."""
        raise NotImplementedError


class MagicOutput:
    """An output of a magic task attempt, async: ``async with ta.open(rel) as out:
    await out.write(b)``. On a clean exit the deferred upload is recorded."""

    def __init__(self, ta: MagicTaskAttempt, rel: str, writer: OutputWriter) -> None:
        self.rel = rel
        self._ta = ta
        self._writer = writer
        self.closed = False

    async def __aenter__(self) -> MagicOutput:
        await self._writer.__aenter__()
        return self

    async def write(self, data: bytes | bytearray | memoryview) -> int:
        return await self._writer.write(data)

    @property
    def bytes_written(self) -> int:
        return self._writer.bytes_written

    async def __aexit__(self, et: Any, ev: Any, tb: Any) -> None:
        try:
            await self._writer.__aexit__(et, ev, tb)
        finally:
            self.closed = True
            self._ta._open_outputs.discard(self)
        if et is None:
            result = self._writer.result
            assert isinstance(result, PendingUpload)
            await self._ta._register(self.rel, result)


class MagicTaskAttempt(TaskAttempt):
    """Outputs stream to their final keys as deferred uploads (nothing visible until job
    commit); ``.pending`` records go under ``__magic_job-<id>/tasks/<task>-<n>/__base/``."""

    kind = "magic"

    def __init__(self, ctx: JobContext, task_id: int | str, attempt: int) -> None:
        super().__init__(ctx, task_id, attempt)
        self._open_outputs: set[MagicOutput | SyncOutputWriter] = set()

    def open(self, rel: str, **object_args: Any) -> MagicOutput:
        self._check_open()
        final = self.final_rel(rel)
        w = self.engine.open_writer(
            self.ctx.dest.bucket,
            self.ctx.dest.key(final),
            defer=True,
            after_create=self._still_active,
            **object_args,
        )
        out = MagicOutput(self, final, w)
        self._open_outputs.add(out)
        return out

    def open_sync(self, rel: str, **object_args: Any) -> SyncOutputWriter:
        """For a thread other than the event loop's (the loop of ``setup()``): the engine's
        blocking writer itself, whose ``close()`` also records the deferred upload."""
        self._check_open()
        assert self._loop is not None
        final = self.final_rel(rel)
        w = self.engine.open_sync_writer(
            self.ctx.dest.bucket,
            self.ctx.dest.key(final),
            loop=self._loop,
            defer=True,
            after_create=self._still_active,
            **object_args,
        )

        async def record(result: UploadResult | PendingUpload) -> None:
            assert isinstance(result, PendingUpload)
            self._open_outputs.discard(w)
            await self._register(final, result)

        w.after_close(record)
        self._open_outputs.add(w)
        return w

    async def _register(self, rel: str, upload: PendingUpload) -> None:
        rec = self._record(upload)
        if self.ctx.opts.pending_records:
            key = self.ctx.layout.pending_record(self.task_id, self.attempt, rel)
            try:
                await self.engine.put_object(
                    self.ctx.dest.bucket,
                    key,
                    rec.to_json().encode(),
                    content_type="application/json",
                )
            except BaseException:
                await to_the_end(self.engine.abort(upload))
                raise
        self._add(rec)

    def needs_commit(self) -> bool:
        with self._lock:
            return bool(self._records)

    async def _commit(self) -> TaskCommitSummary:
        still_open = [o for o in self._open_outputs if not o.closed]
        if still_open:
            raise TaskAttemptError(
                f"task attempt {self.name} still has "
                f"{len(still_open)} open outputs; close them first"
            )
        summary = await self._save_pendingset()
        if self.ctx.opts.pending_records:
            await self._delete_attempt_dir()
        return summary

    async def _delete_attempt_dir(self) -> None:
        bucket, prefix = (
            self.ctx.dest.bucket,
            self.ctx.layout.attempt_dir(self.task_id, self.attempt),
        )
        await self.engine.delete_objects(
            bucket, (o.key async for o in self.engine.list_objects(bucket, prefix))
        )

    async def _abort_all(self) -> None:
        for out in list(self._open_outputs):
            if not isinstance(out, MagicOutput) and not out.closed:
                await anyio.to_thread.run_sync(out.abort)  # it waits on this loop
        self._open_outputs.clear()
        await self._abort_records()
        # uploads recorded by another process running this attempt (recovery)
        bucket = self.ctx.dest.bucket
        prefix = self.ctx.layout.attempt_dir(self.task_id, self.attempt)
        async for obj in self.engine.list_objects(bucket, prefix):
            if not obj.key.endswith(PENDING_SUFFIX):
                continue
            try:
                rec = PendingRecord.from_json(
                    await self.engine.get_object(bucket, obj.key, max_size=caps.PENDING_CAP),
                    location=self.ctx.dest.uri_of(obj.key),
                )
            except (RecordFormatError, EngineError) as exc:
                log.warning("skipping unreadable record %s: %s", obj.key, exc)
                continue
            if rec.upload.key == pending_record_destination(obj.key):
                await self.engine.abort(rec.upload)
        await self._delete_attempt_dir()


class StagingOutput:
    """An async writer of a local staged file; an error inside the block deletes it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.bytes_written = 0
        self._file: Any = None

    async def __aenter__(self) -> StagingOutput:
        self._file = await anyio.open_file(self.path, "wb")
        return self

    async def write(self, data: bytes | bytearray | memoryview) -> int:
        n: int = await self._file.write(data)
        self.bytes_written += n
        return n

    async def __aexit__(self, et: Any, ev: Any, tb: Any) -> None:
        await self._file.aclose()
        if et is not None:
            await anyio.Path(self.path).unlink(missing_ok=True)


class StagingTaskAttempt(TaskAttempt):
    """Outputs are local files under ``<staging_dir>/zerorename-<job>/<task>-<n>/``; task
    commit uploads them as deferred uploads and deletes them."""

    kind = "staging"

    def __init__(self, ctx: JobContext, task_id: int | str, attempt: int) -> None:
        super().__init__(ctx, task_id, attempt)
        self.local_dir = ctx.local_job_dir / self.name

    def local_path(self, rel: str) -> Path:
        """Local file for output ``rel`` (parents created); write it any way you like."""
        self._check_open()
        path = self.local_dir / self.final_rel(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    async def setup(self) -> None:
        await super().setup()
        self.local_dir.mkdir(parents=True, exist_ok=True)

    def open(self, rel: str, **object_args: Any) -> StagingOutput:
        """An async writer for output ``rel``: ``async with ta.open(rel) as out:
        await out.write(b)`` (object arguments are not supported)."""
        if object_args:
            raise TaskAttemptError("staging outputs take no object arguments")
        return StagingOutput(self.local_path(rel))

    def open_sync(self, rel: str, **object_args: Any) -> Any:
        """A plain binary file for output ``rel`` (object arguments are not supported)."""
        if object_args:
            raise TaskAttemptError("staging outputs take no object arguments")
        return self.local_path(rel).open("wb")

    def _local_files(self) -> list[tuple[str, Path]]:
        if not self.local_dir.is_dir():
            return []
        out = []
        for p in sorted(self.local_dir.rglob("*")):
            if p.is_file():
                out.append((p.relative_to(self.local_dir).as_posix(), p))
        return out

    def needs_commit(self) -> bool:
        return bool(self._local_files())

    async def _commit(self) -> TaskCommitSummary:
        files = []
        for rel, path in self._local_files():
            try:
                files.append((self.final_rel(rel), path))
            except PathError as exc:
                raise TaskAttemptError(f"local output {path} cannot be committed: {exc}") from None
        dest = self.ctx.dest

        async def upload(item: tuple[str, Path]) -> None:
            rel, path = item
            up = await self.engine.upload(
                dest.bucket, dest.key(rel), path, defer=True, after_create=self._still_active
            )
            self._add(self._record(up))

        await bounded_map(files, upload, self.ctx.opts.task_concurrency)
        summary = await self._save_pendingset()
        await anyio.to_thread.run_sync(self._delete_local)
        return summary

    def _delete_local(self) -> None:
        shutil.rmtree(self.local_dir, ignore_errors=True)

    async def _abort_all(self) -> None:
        await self._abort_records()
        await anyio.to_thread.run_sync(self._delete_local)
