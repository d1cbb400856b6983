"""Job commit, resume and rollback: the I/O that runs the journal's state machine.

Commit: fix the plan (pendingsets) -> scan: read every pendingset once into a spool, parse
it to its end and check it (totals, touched partitions), keeping its parsed uploads or its
spilled bytes (see :mod:`spool`) -> conflict pre-check -> complete from what the scan kept,
feeding the uploads to ``engine.complete_many`` with at most ``window`` pendingsets in
flight -> (replace: delete older objects) -> ``_SUCCESS`` -> abort this job's leftover
uploads and delete its records. Memory does not grow with the number of uploads. The
journal in the store lets another process resume or roll back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field

import anyio

from zerorename.aio import unwrapped
from zerorename.committers.conflict import ConflictMode, ConflictScope, OldObject, plan_conflicts
from zerorename.committers.context import JobContext
from zerorename.committers.errors import (
    CommitterError,
    ConflictError,
    JobCommitError,
    JobNotActive,
    JournalError,
    RecordFormatError,
)
from zerorename.committers.jobscan import CommitScan, precheck
from zerorename.committers.jobstorage import (
    AbortResult,
    abort_job_storage,
    job_is_active,
    parse_partitions_record,
    read_journal,
    release_job_storage,
    run_replacement,
)
from zerorename.committers.journal import (
    CommitPlan,
    Event,
    Journal,
    State,
    can_abort,
    check_plan,
    completed_event,
    resumable_plan,
)
from zerorename.committers.records import SuccessData
from zerorename.committers.spool import PendingSetCache
from zerorename.committers.store import Check, both, is_ours, read_optional
from zerorename.committers.validate import UploadSet
from zerorename.committers.window import Action, CompletionWindow
from zerorename.engine.errors import EngineError, PreconditionFailed
from zerorename.engine.records import PendingUpload

__all__ = ["CommitProgress", "JobCommitResult", "JobCommitRun", "ProgressFn"]

log = logging.getLogger("zerorename.committers")


@dataclass(frozen=True)
class CommitProgress:
    """A snapshot handed to the progress callback (at least once a second while working)."""

    job_id: str
    phase: str
    pendingsets_done: int
    pendingsets_total: int
    uploads_done: int
    uploads_total: int
    bytes_done: int
    bytes_total: int
    elapsed: float


ProgressFn = Callable[[CommitProgress], "Awaitable[None] | None"]


@dataclass(frozen=True)
class JobCommitResult:
    """What a successful job commit did."""

    job_id: str
    files: int
    bytes: int
    pendingsets: int
    duration: float
    retries: int
    throttles: int
    success_key: str | None
    resumed: bool = False
    cleanup_error: str | None = None


@dataclass
class _Counters:
    uploads_done: int = 0
    bytes_done: int = 0
    sets_done: int = 0
    diagnostics: dict[str, str] = field(default_factory=dict)


class JobCommitRun:
    """One process's work on one job commit (a fresh commit, a resume, or a rollback)."""

    def __init__(
        self,
        ctx: JobContext,
        progress: ProgressFn | None = None,
        extra_metrics: Mapping[str, int | float] | None = None,
    ) -> None:
        self.ctx = ctx
        self.job_id = ctx.job_id
        #: the caller's own figures for _SUCCESS (e.g. rows), merged into its metrics
        self.extra_metrics = dict(extra_metrics or {})
        self.engine = ctx.engine
        self.dest = ctx.dest
        self.layout = ctx.layout
        self.opts = ctx.opts
        self.progress = progress
        self.journal = Journal(ctx.job_id, window=self.opts.window)
        self.plan = CommitPlan(ctx.job_id, (), "summaries")
        self.partitions: set[str] = set()
        #: the replace plan this process listed and stored (None: read it back)
        self._replace_plan: list[OldObject] | None = None
        self.phase = "starting"
        self.c = _Counters()
        #: what the scan read of the pendingsets, for the completion (closed by _run)
        self.sets = PendingSetCache()
        #: every upload the scans of this run saw (the same one twice is refused)
        self.seen = UploadSet()
        self._t0 = time.monotonic()
        self._stats0 = (self.engine.stats.retries, self.engine.stats.throttles)

    # ---------------------------------------------------------------- progress & journal
    def snapshot(self) -> CommitProgress:
        j = self.journal
        return CommitProgress(
            self.job_id,
            self.phase,
            self.c.sets_done,
            len(self.plan.pendingsets),
            self.c.uploads_done,
            j.uploads_total,
            self.c.bytes_done,
            j.bytes_total,
            time.monotonic() - self._t0,
        )

    async def _report(self) -> None:
        if self.progress is None:
            return
        try:
            out = self.progress(self.snapshot())
            if out is not None:
                await out
        except Exception:
            log.exception("job commit progress callback raised")

    async def _ticker(self) -> None:
        while True:
            await self._report()
            await anyio.sleep(self.opts.progress_interval)

    async def _save_journal(self) -> None:
        j = self.journal
        j.updated = time.time()
        j.uploads_done = max(j.uploads_done, self.c.uploads_done)
        r0, t0 = self._stats0
        j.retries += self.engine.stats.retries - r0
        j.throttles += self.engine.stats.throttles - t0
        self._stats0 = (self.engine.stats.retries, self.engine.stats.throttles)
        await self.engine.put_object(
            self.dest.bucket, self.layout.journal, j.to_json(), content_type="application/json"
        )

    async def _move(self, event: Event) -> None:
        """Take a journal event (the state machine's one step) and save the journal."""
        self.phase = self.journal.apply(event).value
        await self._save_journal()
        await self._report()

    def _scan(self) -> CommitScan:
        """A scan of the current plan into this run's cache, journal and checks."""
        return CommitScan(
            self.ctx,
            self.plan,
            self.journal,
            self.sets,
            self.seen,
            self.partitions,
            self.c.diagnostics,
        )

    # ---------------------------------------------------------------- entry points
    async def commit(self, plan: CommitPlan) -> JobCommitResult:
        async def journal_or_error() -> Journal | Exception | None:
            try:
                return await read_journal(self.ctx)
            except Exception as exc:  # raised below, after the marker's verdict
                return exc

        # two independent reads at once: one round trip
        active, journal = await both(job_is_active(self.ctx), journal_or_error())
        if not active:
            raise JobNotActive(
                f"job {self.job_id} is not active at {self.dest.uri} "
                f"(never set up, or already committed/aborted)"
            )
        if isinstance(journal, Exception):
            raise journal
        if journal is not None:
            raise JournalError(
                f"job {self.job_id} already started a commit; use "
                f"resume() or abort() (zerorename jobs resume|abort)"
            )
        check_plan(plan, self.layout, location=self.dest.uri_of(self.layout.plan))
        self.plan = plan
        await self.engine.put_object(
            self.dest.bucket, self.layout.plan, plan.to_json(), content_type="application/json"
        )
        await self._save_journal()
        return await self._run(resumed=False)

    async def resume(self) -> JobCommitResult:
        j = await read_journal(self.ctx)
        if j is None:
            raise JournalError(
                f"job {self.job_id} has no journal at {self.dest.uri}: it "
                f"never started committing (nothing to resume; abort it)"
            )
        data = await read_optional(self.engine, self.dest.bucket, self.layout.plan)
        if data is None:
            raise JournalError(f"job {self.job_id} has a journal but no plan")
        self.plan = resumable_plan(data, j, self.layout, self.dest.uri)
        self.journal = j
        j.processes += 1
        j.error = None
        self.c.uploads_done = j.uploads_done
        self.c.sets_done = j.watermark
        if j.state is State.ROLLING_BACK:
            await self.rollback()
            raise JobCommitError(
                f"job {self.job_id} was rolling back; the rollback is now finished",
                job_id=self.job_id,
                rolled_back=True,
                state=j.state.value,
            )
        return await self._run(resumed=True)

    async def _run(self, *, resumed: bool) -> JobCommitResult:
        with self.sets:
            async with unwrapped(), anyio.create_task_group() as tg:
                tg.start_soon(self._ticker)
                try:
                    return await self._steps(resumed)
                finally:
                    tg.cancel_scope.cancel()
        raise AssertionError("unreachable")

    async def _steps(self, resumed: bool) -> JobCommitResult:
        j = self.journal
        #: a resumed journal that claims every complete done: verified before _SUCCESS
        claims_done = resumed and j.state in (State.REPLACING, State.SUCCEEDED)
        try:
            if j.state is State.STARTED:
                self.phase = "scanning"
                await self._scan().run(0, tally=True)
                self._replace_plan = await precheck(self.ctx, self.partitions)
                await self._move(Event.SCANNED)
            elif j.state is State.COMPLETING:
                # the sets not yet done, parsed and checked before anything is completed
                self.phase = "scanning"
                await self._scan().run(j.watermark, tally=False)
            if j.state is State.COMPLETING:
                self.phase = "completing"
                await self._complete(
                    j.watermark,
                    uncertain_until=j.watermark + j.window if resumed else j.watermark,
                )
                # the state move saves the final watermark too: one journal write
                j.watermark = len(self.plan.pendingsets)
                await self._move(completed_event(self.ctx.conflict))
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await self._failed(exc, resumed)
            raise AssertionError("unreachable") from exc  # _failed always raises
        try:
            if claims_done:
                await self._verify_completed()
            if j.state is State.REPLACING:
                await self._replace()
                await self._move(Event.REPLACED)
            success_key = await self._write_success()
        except BaseException as exc:
            if isinstance(exc, RecordFormatError):
                raise self._refused(exc, resumed) from exc  # the journal is left as it was
            with anyio.CancelScope(shield=True):
                j.error = f"{type(exc).__name__}: {exc}"
                try:
                    await self._save_journal()
                except Exception:
                    log.exception("could not save the journal of job %s", j.job_id)
            if not isinstance(exc, Exception) or isinstance(exc, JobCommitError):
                raise
            raise JobCommitError(
                f"job {j.job_id} failed in state {j.state.value} after its files were "
                f"completed: {exc}; run resume to finish it",
                job_id=j.job_id,
                rolled_back=False,
                state=j.state.value,
            ) from exc
        self.phase = "cleanup"
        cleanup_error = None
        try:
            await self._cleanup_records()
        except Exception as exc:
            cleanup_error = f"{type(exc).__name__}: {exc}"
            log.warning("job %s committed, but cleaning up its records failed: %s", j.job_id, exc)
        self.phase = "committed"
        self.c.sets_done = len(self.plan.pendingsets)
        await self._report()
        return JobCommitResult(
            job_id=j.job_id,
            files=j.uploads_total,
            bytes=j.bytes_total,
            pendingsets=len(self.plan.pendingsets),
            duration=time.time() - j.started,
            retries=j.retries,
            throttles=j.throttles,
            success_key=success_key,
            resumed=resumed,
            cleanup_error=cleanup_error,
        )

    def _refused(self, exc: RecordFormatError, resumed: bool) -> JobCommitError:
        j = self.journal
        verb = "resume" if resumed else "commit"
        return JobCommitError(
            f"job {j.job_id} {verb} refused: a record is bad: {exc}; no upload was completed "
            f"or aborted: fix or remove the record, or abort the job "
            f"(zerorename jobs abort {self.dest.uri} {j.job_id})",
            job_id=j.job_id,
            rolled_back=False,
            state=j.state.value,
        )

    async def _failed(self, exc: BaseException, resumed: bool) -> None:
        """A commit failed before any old file was touched: roll back or leave a journal.
        A bad record is never a reason to roll back: it changes nothing (a fresh commit
        refused by its scan removes the plan and journal it wrote)."""
        j = self.journal
        if isinstance(exc, RecordFormatError):
            if not resumed and j.state is State.STARTED:
                try:
                    await self.engine.delete_objects(
                        self.dest.bucket, [self.layout.plan, self.layout.journal]
                    )
                except Exception:
                    log.exception("could not remove the plan and journal of job %s", j.job_id)
            elif not resumed:
                j.error = f"{type(exc).__name__}: {exc}"
                await self._save_journal()
            raise self._refused(exc, resumed) from exc
        j.error = f"{type(exc).__name__}: {exc}"
        rolled = False
        if self.opts.rollback_on_failure and isinstance(exc, Exception):
            try:
                # a racer's object at one of our keys carries our job id: keep it
                await self.rollback(keep=exc.conflicts if isinstance(exc, ConflictError) else ())
                rolled = True
            except Exception:
                log.exception("rolling back job %s failed; its journal is left", j.job_id)
        else:
            try:
                await self._save_journal()
            except Exception:
                log.exception("could not save the journal of job %s", j.job_id)
        if not isinstance(exc, Exception):
            raise exc
        what = (
            "rolled back: nothing of it is left"
            if rolled
            else "left for resume/abort (see its journal)"
        )
        msg = f"job {j.job_id} commit failed in state {j.state.value}: {exc}; {what}"
        if isinstance(exc, ConflictError):
            raise ConflictError(
                msg,
                job_id=j.job_id,
                rolled_back=rolled,
                state=j.state.value,
                conflicts=exc.conflicts,
            ) from exc
        raise JobCommitError(msg, job_id=j.job_id, rolled_back=rolled, state=j.state.value) from exc

    # ---------------------------------------------------------------- phases
    async def _verify_completed(self) -> None:
        """Resuming a journal that says every upload is complete (replacing, succeeded):
        check it before _SUCCESS and the cleanup (which aborts the job's uploads): each
        planned upload's object is there as completed, or its complete is run now. While
        the job is active every pendingset must be there; once its cleanup began (the
        marker is gone) a deleted one is skipped."""
        self.phase = "verifying"
        missing_ok = not await job_is_active(self.ctx)
        await self._scan().run(0, tally=False, missing_ok=missing_ok)
        await self._complete(0, uncertain_until=len(self.plan.pendingsets), journal=False)

    async def _settled(self, upload: PendingUpload, exc: BaseException) -> bool:
        """After a failed complete: is the object there already, ours (an earlier attempt or
        process completed it)? A PreconditionFailed on someone else's object is a conflict."""
        try:
            info = await self.engine.head_object(upload.bucket, upload.key)
        except EngineError:
            return False
        why = Check.KEY_EXISTED if isinstance(exc, PreconditionFailed) else Check.FAILED
        if is_ours(upload, info, why):
            return True
        if isinstance(exc, PreconditionFailed):
            raise ConflictError(
                f"another writer created {upload.uri} during the commit (If-None-Match)",
                job_id=self.job_id,
                conflicts=(upload.key,),
            ) from exc
        return False

    async def _complete(self, start: int, uncertain_until: int, *, journal: bool = True) -> None:
        """Complete the uploads of the scanned pendingsets from ``start`` on; those below
        ``uncertain_until`` may be done already (checked first). The window decides what
        to hand out and when to save the watermark (``journal``: into the journal); this
        loop does the I/O. The caller saves the final watermark with its state move."""
        win = CompletionWindow(
            start, self.journal.window, len(self.plan.pendingsets), uncertain_until=uncertain_until
        )
        inflight: dict[tuple[str, str], int] = {}
        changed = anyio.Event()

        def wake() -> None:
            nonlocal changed
            changed.set()
            changed = anyio.Event()

        async def save(mark: int) -> None:
            if journal:
                self.journal.watermark = mark
                with anyio.CancelScope(shield=True):
                    await self._save_journal()
            win.saved(mark)

        def done(upload: PendingUpload) -> None:
            self.c.uploads_done += 1
            self.c.bytes_done += upload.length

        async def on_result(upload: PendingUpload, exc: BaseException | None) -> None:
            idx = inflight.pop((upload.key, upload.upload_id))
            if exc is not None:
                try:
                    if await self._settled(upload, exc):
                        exc = None
                except ConflictError as conflict:
                    exc = conflict
            if exc is None:
                done(upload)
                win.succeeded(idx)
                self.c.sets_done = win.low
            else:
                win.failed(exc)
            wake()

        async def records() -> AsyncIterator[PendingUpload]:
            while True:
                step = win.poll()
                if step.action is Action.STOP:
                    return
                if step.action is Action.SAVE:
                    await save(step.index)
                    continue
                if step.action is Action.WAIT:
                    await changed.wait()
                    continue
                idx = step.index
                win.open(idx)
                # read by the scan of this process, else (a resumed completion) now; parsed
                # to its end and checked either way before any of its uploads is handed out
                loaded = self.sets.pop(idx)
                for up in loaded.uploads() if loaded is not None else ():
                    if win.stopped:
                        return
                    if win.must_check(idx) and is_ours(
                        up, await self.engine.head_object(up.bucket, up.key), Check.RESUME
                    ):
                        done(up)
                        continue
                    win.handed_out(idx)
                    inflight[(up.key, up.upload_id)] = idx
                    yield up
                win.close(idx)  # a set gone after the job's cleanup began closes empty
                self.c.sets_done = win.low

        async with unwrapped():
            await self.engine.complete_many(
                records(),
                concurrency=self.opts.concurrency,
                if_none_match=self.ctx.conflict is ConflictMode.FAIL,
                on_result=on_result,
            )
        if win.failures:
            first = win.failures[0]
            if isinstance(first, CommitterError):
                raise first
            raise JobCommitError(
                f"{len(win.failures)} uploads could not be completed: {first}",
                job_id=self.job_id,
                rolled_back=False,
                state=self.journal.state.value,
            ) from first
        if win.unfinished:
            raise JobCommitError(
                f"internal error: {win.unfinished} pendingsets unfinished",
                job_id=self.job_id,
                rolled_back=False,
                state="completing",
            )

    async def _replace(self) -> None:
        """Delete the older objects in the destination or the touched partitions."""
        self.phase = "replacing"
        parts: list[str] = sorted(self.partitions)
        if self.ctx.scope is ConflictScope.PARTITIONS and self._replace_plan is None:
            data = await read_optional(self.engine, self.dest.bucket, self.layout.partitions)
            if data is None:
                raise JournalError(f"job {self.job_id}: partitions record missing")
            parts = parse_partitions_record(data, self.dest.uri_of(self.layout.partitions))
        plan = plan_conflicts(ConflictMode.REPLACE, self.ctx.scope, self.dest, parts)
        deleted = await run_replacement(self.ctx, plan.replace_prefixes, self._replace_plan)
        log.info("job %s replaced %d older objects (its replace plan)", self.job_id, deleted)

    async def _write_success(self) -> str | None:
        if not self.opts.write_success:
            return None
        j = self.journal
        r0, t0 = self._stats0
        metrics: dict[str, int | float] = {
            "files": j.uploads_total,
            "uploads": j.uploads_total,
            "bytes": j.bytes_total,
            "pendingsets": len(self.plan.pendingsets),
            "duration_seconds": round(time.time() - j.started, 3),
            "retries": j.retries + self.engine.stats.retries - r0,
            "throttles": j.throttles + self.engine.stats.throttles - t0,
            "commit_processes": j.processes,
            **self.extra_metrics,
        }
        diag = {
            "conflict": self.ctx.conflict.value,
            "scope": self.ctx.scope.value,
            "destination": self.dest.uri,
            **self.c.diagnostics,
        }
        data = SuccessData(
            job_id=j.job_id,
            committer=self.ctx.kind.value,
            metrics=metrics,
            description=f"zerorename {self.ctx.kind.value} committer",
            diagnostics=diag,
            filenames=list(j.filenames),
        )
        await self.engine.put_object(
            self.dest.bucket, self.layout.success, data.to_json(), content_type="application/json"
        )
        return self.layout.success

    async def _cleanup_records(self) -> None:
        """After _SUCCESS: abort this job's leftover uploads (failed or superseded attempts,
        stragglers) and delete its records; the journal goes last."""
        await release_job_storage(self.ctx)

    # ---------------------------------------------------------------- rollback
    async def _check_abort_unread(self, exc: RecordFormatError) -> None:
        """An abort with a malformed journal: its state is unknown, so abort only while
        the store proves the commit cannot have passed the point of no return (job still
        active, no _SUCCESS of the job, a conflict mode that deletes no older file)."""
        why = ""
        if self.ctx.replaces:
            why = "the job replaces older files, which its commit may have deleted already"
        elif not await job_is_active(self.ctx):
            why = "the job's marker is gone: its commit may have succeeded"
        else:
            data = await read_optional(self.engine, self.dest.bucket, self.layout.success)
            if data is not None and f'"{self.job_id}"'.encode() in data:
                why = "a _SUCCESS of the job exists: its commit succeeded"
        if why:
            raise JournalError(
                f"job {self.job_id}: abort refused: {exc.location} is malformed and "
                f"{why}; repair the journal (or remove it once sure) and retry"
            ) from exc

    async def rollback(self, *, keep: Iterable[str] = ()) -> AbortResult:
        """Abort every pending upload of the job and delete every object it completed and its
        records: afterwards nothing of the job is left. Refused once old files were
        deleted (replace) or _SUCCESS was written. ``keep``: keys not deleted (another
        writer's objects found at the job's keys)."""
        try:
            j = await read_journal(self.ctx)
        except RecordFormatError as exc:
            await self._check_abort_unread(exc)
            j = None  # proven safe to abort without it; it is deleted last
        if j is not None:
            if not can_abort(j.state):
                raise JournalError(
                    f"job {self.job_id} is in state {j.state.value}: its files are "
                    f"complete and older files may be gone; resume it instead of aborting"
                )
            self.journal = j
            j.apply(Event.ABORT)
            self.phase = "rolling_back"
            await self._save_journal()
        return await abort_job_storage(self.ctx, keep=keep)
