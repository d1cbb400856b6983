"""Job commit, resume and rollback: the I/O that runs the journal's state machine, in few
round trips (against a remote store a commit's time is its chain of dependent requests).

A fresh commit; each step is one round trip, its requests sent together:

1. read: the job's marker (HEAD), its journal (none yet), every pendingset of the plan
   (parsed to its end and checked, see :mod:`spool`) and, for conflicts judged over the
   whole destination, the conflict listing (fail: nothing there; replace: the older
   objects, the replace plan). Nothing is written: a bad record or a conflict refuses
   with nothing to undo. (By partition, the listing needs the scan's partitions: one
   round more.)
2. write: the journal (``completing``, first), the plan, and for replace its plan and
   touched partitions. Completes start only once all are stored; a crash in between can
   leave a journal without its plan: nothing was completed, resume refuses, abort
   removes it.
3. complete every upload, at most ``window`` pendingsets in flight (:mod:`jobcomplete`);
   the journal is saved in between only when more sets are left than the window holds.
4. replace only: the journal's move to ``replacing`` (abort refuses from then on) while
   the older objects are listed again; then the planned ones still unchanged are deleted.
5. ``_SUCCESS`` and the journal's move to ``succeeded``, while the job's records and
   pending uploads are listed. A crash may keep ``_SUCCESS`` and lose the journal's
   write: every file is complete then, abort refuses it (it looks for the job's
   ``_SUCCESS``) and resume finishes.
6. the marker and records deleted, the leftover uploads aborted; then the journal. A
   crash before the journal's delete leaves a ``succeeded`` journal that resume finishes,
   without its plan when that was deleted already (``_SUCCESS`` was stored before 6).

Append: 6 requests in sequence up to ``concurrency`` tasks; replace: 8. Memory does not
grow with the number of uploads: pendingsets are spooled, listings streamed.

A caller's own records can ride on these rounds (:class:`CommitHooks`, a streaming sink's
log): round 1 sent early with the caller's reads (:meth:`JobCommitRun.read_ahead`), a
write with round 2 (before any complete), a write with the journal's ``succeeded`` (after
every complete), keys deleted with the journal.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Iterable, Mapping
from typing import Any

import anyio

from zerorename.aio import to_the_end, unwrapped
from zerorename.committers import objectstore as caps
from zerorename.committers.commitlock import (
    CommitLock,
    LockLost,
    fenced_off,
    first_journal,
    lock_lost,
    releasable,
)
from zerorename.committers.conflict import (
    ConflictMode,
    ConflictScope,
    OldObject,
    plan_conflicts,
)
from zerorename.committers.context import JobContext
from zerorename.committers.errors import (
    ConflictError,
    JobCommitError,
    JobNotActive,
    JournalError,
    NothingToResume,
    RecordFormatError,
)
from zerorename.committers.jobcomplete import Completed, complete_sets
from zerorename.committers.jobresult import (
    CommitHooks,
    CommitProgress,
    JobCommitResult,
    ProgressFn,
    success_record,
)
from zerorename.committers.jobscan import CommitScan, precheck, scan_width
from zerorename.committers.jobstorage import (
    AbortResult,
    cut_short,
    job_is_active,
    read_journal,
    release_job_storage,
    releasing,
    replace_records,
    rollback_job,
    run_replacement,
    stored_replace_records,
)
from zerorename.committers.journal import (
    CommitPlan,
    Event,
    Journal,
    State,
    check_plan,
    completed_event,
    resumable_plan,
)
from zerorename.committers.spool import PendingSetCache
from zerorename.committers.store import Outcome, caught, gather, nothing, read_optional
from zerorename.committers.validate import UploadSet

__all__ = ["CommitHooks", "CommitProgress", "JobCommitResult", "JobCommitRun", "ProgressFn"]

log = logging.getLogger("zerorename.committers")
JSON = "application/json"


class JobCommitRun:
    """One process's work on one job commit (a fresh commit, a resume, or a rollback)."""

    def __init__(
        self,
        ctx: JobContext,
        progress: ProgressFn | None = None,
        extra_metrics: Mapping[str, int | float] | None = None,
        hooks: CommitHooks | None = None,
    ) -> None:
        self.ctx = ctx
        self.hooks = hooks or CommitHooks()
        #: round 1's outcomes when sent ahead (:meth:`read_ahead`)
        self._read: list[Any] | None = None
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
        #: the replace plan this process listed or read (None: read it back)
        self._replace_plan: list[OldObject] | None = None
        self.phase = "starting"
        self.c = Completed()
        self.diagnostics: dict[str, str] = {}
        #: what the scan read of the pendingsets, for the completion (closed by _run)
        self.sets = PendingSetCache(readers=scan_width(ctx))
        #: every upload the scans of this run saw (the same one twice is refused)
        self.seen = UploadSet()
        self._t0 = time.monotonic()
        self._stats0 = (self.engine.stats.retries, self.engine.stats.throttles)
        #: this run's hold on the destination's commit lock
        self.lock = CommitLock(ctx, self._waiting)

    # ---------------------------------------------------------------- progress & journal
    def snapshot(self) -> CommitProgress:
        j = self.journal
        return CommitProgress(
            self.job_id,
            self.phase,
            self.c.sets,
            len(self.plan.pendingsets),
            self.c.uploads,
            j.uploads_total,
            self.c.bytes,
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

    def _waiting(self, job: str) -> None:
        self.phase = f"waiting for job {job}'s commit"

    async def _ticker(self) -> None:
        while True:
            await self._report()
            await anyio.sleep(self.opts.progress_interval)

    async def _save_journal(self, *, first: bool = False) -> None:
        """Store the journal; ``first`` (a fresh commit's): with If-None-Match."""
        j = self.journal
        j.updated = time.time()
        j.uploads_done = max(j.uploads_done, self.c.uploads)
        r0, t0 = self._stats0
        j.retries += self.engine.stats.retries - r0
        j.throttles += self.engine.stats.throttles - t0
        self._stats0 = (self.engine.stats.retries, self.engine.stats.throttles)
        if first:
            await first_journal(self.ctx, j.to_json())
            self.lock.journaled = True
            return
        await self.engine.put_object(
            self.dest.bucket, self.layout.journal, j.to_json(), content_type=JSON
        )

    async def _save_mark(self, mark: int) -> None:
        """The completion window's watermark save."""
        self.journal.watermark = mark
        await self._save_journal()

    def _apply(self, event: Event) -> None:
        """Take a journal event (the state machine's one step); the caller saves it, with
        the requests that may go with it."""
        self.phase = self.journal.apply(event).value

    def _scan(self) -> CommitScan:
        """A scan of the current plan into this run's cache, journal and checks."""
        return CommitScan(
            self.ctx,
            self.plan,
            self.journal,
            self.sets,
            self.seen,
            self.partitions,
            self.diagnostics,
        )

    # ---------------------------------------------------------------- entry points
    async def commit(self, plan: CommitPlan | None = None) -> JobCommitResult:
        """Commit ``plan`` (None: the one :meth:`read_ahead` read, whose round 1 is not
        sent again). The pendingset cache is closed when this returns."""
        if plan is not None:
            self._check(plan)
        elif self._read is None:
            raise ValueError("commit() needs a plan unless read_ahead() ran")
        return await self._run(resumed=False)

    async def read_ahead(self) -> None:
        """Round 1 of a fresh commit of :attr:`plan`, now (to go out with the caller's
        reads): nothing is written and no error raised; :meth:`commit` acts on what it
        found (or :meth:`close` drops it)."""
        self._check(self.plan)
        self._read = await self._read_round(False, False)

    def close(self) -> None:
        """Drop what :meth:`read_ahead` read (the pendingset cache's spill file)."""
        self.sets.close()

    def _check(self, plan: CommitPlan) -> None:
        check_plan(plan, self.layout, location=self.dest.uri_of(self.layout.plan))
        self.plan = plan

    async def resume(self) -> JobCommitResult:
        """Read the journal and what the commit stored before its first complete (one
        round trip), then go on from the journal's state."""
        ctx, lay = self.ctx, self.layout
        parts_record = ctx.replaces and ctx.scope is ConflictScope.PARTITIONS
        j, plan_data, replace_data, parts_data = await gather(
            read_journal(ctx),
            read_optional(self.engine, self.dest.bucket, lay.plan, max_size=caps.PLAN_CAP),
            read_optional(
                self.engine, self.dest.bucket, lay.replace, max_size=caps.REPLACE_PLAN_CAP
            )
            if ctx.replaces
            else nothing(),
            read_optional(
                self.engine, self.dest.bucket, lay.partitions, max_size=caps.REPLACE_PLAN_CAP
            )
            if parts_record
            else nothing(),
        )
        if j is None:
            raise NothingToResume(
                f"job {self.job_id} has no journal at {self.dest.uri}: it "
                f"never started committing (nothing to resume; abort it)"
            )
        self.journal = j
        j.processes += 1
        j.error = None
        self.c.uploads = j.uploads_done
        self.c.sets = j.watermark
        if j.state is State.ROLLING_BACK:
            await self.rollback()
            raise JobCommitError(
                f"job {self.job_id} was rolling back; the rollback is now finished",
                job_id=self.job_id,
                rolled_back=True,
                state=j.state.value,
            )
        if j.state is State.SUCCEEDED and (plan_data is None or not await job_is_active(self.ctx)):
            # its release began (the plan goes in it; the marker goes with the lock, after
            # _SUCCESS and the journal were stored): finish it, and nothing more. Another
            # job may have committed since the lock went (a replace may have removed this
            # job's files, a newer _SUCCESS may be there): no complete, no _SUCCESS
            self.lock.held = await releasable(self.ctx, j)
            return await self._finish_release()
        if plan_data is None:
            raise cut_short(self.ctx, "plan", j.state)
        self.plan = resumable_plan(plan_data, j, lay, self.dest.uri)
        if ctx.replaces and j.state in (State.COMPLETING, State.REPLACING):
            try:
                parts, self._replace_plan = stored_replace_records(
                    ctx, j.state, replace_data, parts_data
                )
            except RecordFormatError as exc:
                raise self._refused(exc, True) from exc
            self.partitions = set(parts)
        return await self._run(resumed=True)

    def _replace_prefixes(self) -> tuple[str, ...]:
        plan = plan_conflicts(ConflictMode.REPLACE, self.ctx.scope, self.dest, self.partitions)
        return plan.replace_prefixes

    async def _run(self, *, resumed: bool) -> JobCommitResult:
        with self.sets:
            async with unwrapped(), anyio.create_task_group() as tg:
                tg.start_soon(self._ticker)
                try:
                    return await self._steps(resumed)
                finally:
                    tg.cancel_scope.cancel()
        raise AssertionError("unreachable")

    def _gate(self, active: Outcome[bool], journal: Outcome[Journal | None]) -> None:
        """A fresh commit only of an active job that has no journal yet (the marker's
        verdict first, then the journal's)."""
        if not active.get():
            raise JobNotActive(
                f"job {self.job_id} is not active at {self.dest.uri} "
                f"(never set up, or already committed/aborted)"
            )
        stored = journal.get()
        if fenced_off(self.ctx, stored):  # as its first journal write would find it
            raise lock_lost(self.ctx, stored.fenced_by if stored is not None else None)
        if stored is not None:
            raise JournalError(
                f"job {self.job_id} already started a commit; use "
                f"resume() or abort() (zerorename jobs resume|abort)"
            )

    async def _read_round(self, resumed: bool, lock: bool) -> list[Any]:
        """Round 1: read and check everything, errors kept, not raised; nothing written but,
        with ``lock``, the destination's commit lock tried."""
        ctx = self.ctx
        self.phase = "scanning"
        steps: list[Awaitable[Outcome[object]]] = [
            caught(self._scan().run(0, tally=True)),
            caught(self.lock.take() if lock else nothing()),
        ]
        if not resumed:
            steps += [caught(job_is_active(ctx)), caught(read_journal(ctx))]
        return list(await gather(*steps))

    async def _start(self, resumed: bool) -> None:
        """Round 1 (unless read ahead) and round 2 (the journal, the plan, the replace
        records and the caller's ``with_journal`` at once): see the module's docstring.
        Fail and replace take the destination's lock in round 1 and list after it; append
        takes it in round 2 (:mod:`commitlock`). A journal in state ``started`` (written by
        an older zerorename) resumes here too."""
        ctx = self.ctx
        ahead, self._read = self._read, None
        lock_now = ctx.conflict is not ConflictMode.APPEND and not self.lock.held
        outcomes = ahead if ahead is not None else await self._read_round(resumed, lock_now)
        if lock_now and ahead is not None:
            outcomes[1] = await caught(self.lock.take())
        if not resumed:
            try:
                self._gate(outcomes[2], outcomes[3])
            except BaseException:
                await to_the_end(self.lock.release_unjournaled())
                raise
        try:
            holder, _ = outcomes[1].get(), outcomes[0].get()
            if lock_now and not self.lock.held:
                await self.lock.wait(holder)
                self.phase = "scanning"
            old = await precheck(ctx, self.partitions)
            self._replace_plan = old if isinstance(old, list) else None
            self._apply(Event.SCANNED)
            # the caller's record, then the journal before the plan: a crash during these
            # writes leaves no plan without its journal (all are answered before a complete)
            hook = self.hooks.with_journal if not resumed else None
            writes: list[Awaitable[object]] = [hook() if hook is not None else nothing()]
            writes.append(self._save_journal(first=not resumed))
            if not resumed:
                writes.append(
                    self.engine.put_object(
                        self.dest.bucket, self.layout.plan, self.plan.to_json(), content_type=JSON
                    )
                )
            if self._replace_plan is not None:
                writes += replace_records(ctx, self._replace_plan, self.partitions)
            writes.append(caught(self.lock.take() if not self.lock.held else nothing()))
            holder = (await gather(*writes))[-1].get()
            if not self.lock.held:  # append: another commit holds it; the journal waits
                await self.lock.wait(holder)
        except BaseException as exc:
            await to_the_end(self._failed(exc, resumed), cleanup=True)
            raise AssertionError("unreachable") from exc  # _failed always raises
        await self._report()

    async def _steps(self, resumed: bool) -> JobCommitResult:
        j = self.journal
        #: a resumed journal that claims every complete done: verified before _SUCCESS
        claims_done = resumed and j.state in (State.REPLACING, State.SUCCEEDED)
        if resumed:
            await self.lock.for_resume(j)
        if not resumed or j.state is State.STARTED:
            await self._start(resumed)
        if j.state is State.COMPLETING:
            try:
                if resumed:
                    # the sets not yet done, parsed and checked before anything is completed
                    self.phase = "scanning"
                    await self._scan().run(j.watermark, tally=False)
                self.phase = "completing"
                await complete_sets(
                    self.ctx,
                    self.sets,
                    len(self.plan.pendingsets),
                    j.window,
                    j.watermark,
                    j.watermark + j.window if resumed else j.watermark,
                    self.c,
                    self._save_mark,
                    j.state.value,
                )
            except BaseException as exc:
                await to_the_end(self._failed(exc, resumed), cleanup=True)
                raise AssertionError("unreachable") from exc  # _failed always raises
            # the state move saves the final watermark too: one journal write
            j.watermark = len(self.plan.pendingsets)
            self._apply(completed_event(self.ctx.conflict))
            moved = True
        else:
            moved = False
        try:
            if claims_done:
                await self._verify_completed()
            if j.state is State.REPLACING:
                await self._replace(self._save_journal() if moved else None)
                self._apply(Event.REPLACED)
                moved = True
        except BaseException as exc:
            await self._stopped_after_completes(exc, resumed)
        return await self._finish(moved, resumed)

    async def _finish(self, moved: bool, resumed: bool) -> JobCommitResult:
        """``_SUCCESS`` and the journal's ``succeeded`` (when ``moved`` there now) at once,
        while the job's records and uploads are listed; then the release."""
        j, hook = self.journal, self.hooks.with_succeeded
        also = () if resumed else self.hooks.release_also
        async with releasing(
            self.ctx, also, lock=self.lock.held, lock_etag=self.lock.etag
        ) as release:
            try:
                success_key, _, _ = await gather(
                    self._write_success(),
                    self._save_journal() if moved else nothing(),
                    hook(self.snapshot()) if hook is not None else nothing(),
                )
            except BaseException as exc:
                await self._stopped_after_completes(exc, resumed)
            await self._report()
            self.phase = "cleanup"
            cleanup_error = None
            try:
                await release()
            except Exception as exc:
                cleanup_error = f"{type(exc).__name__}: {exc}"
                log.warning(
                    "job %s committed, but cleaning up its records failed: %s", j.job_id, exc
                )
        return await self._committed(success_key, resumed, cleanup_error)

    async def _finish_release(self) -> JobCommitResult:
        """A ``succeeded`` journal whose release began (its plan or its marker is gone):
        the release after ``_SUCCESS`` was cut short (it begins only once ``_SUCCESS`` and
        the journal were stored); finish it. ``_SUCCESS`` is left as it is."""
        if self.hooks.with_succeeded is not None:  # before the journal goes
            await self.hooks.with_succeeded(self.snapshot())
        self.phase = "cleanup"
        await release_job_storage(self.ctx, lock=self.lock.held, lock_etag=self.lock.etag)
        success_key = self.layout.success if self.opts.write_success else None
        return await self._committed(success_key, True, None)

    async def _committed(
        self, success_key: str | None, resumed: bool, cleanup_error: str | None
    ) -> JobCommitResult:
        j = self.journal
        self.phase = "committed"
        self.c.sets = j.pendingsets_total
        await self._report()
        return JobCommitResult(
            job_id=j.job_id,
            files=j.uploads_total,
            bytes=j.bytes_total,
            pendingsets=j.pendingsets_total,
            duration=time.time() - j.started,
            retries=j.retries,
            throttles=j.throttles,
            success_key=success_key,
            resumed=resumed,
            cleanup_error=cleanup_error,
        )

    async def _stopped_after_completes(self, exc: BaseException, resumed: bool) -> None:
        """A failure once every file is complete: never rolled back; the journal (with the
        error) is left for resume. Always raises."""
        j = self.journal
        if isinstance(exc, RecordFormatError):
            raise self._refused(exc, resumed) from exc  # the journal is left as it was
        j.error = f"{type(exc).__name__}: {exc}"
        try:
            await to_the_end(self._save_journal())
        except Exception:
            log.exception("could not save the journal of job %s", j.job_id)
        if not isinstance(exc, Exception) or isinstance(exc, JobCommitError):
            raise exc
        raise JobCommitError(
            f"job {j.job_id} failed in state {j.state.value} after its files were "
            f"completed: {exc}; run resume to finish it",
            job_id=j.job_id,
            rolled_back=False,
            state=j.state.value,
        ) from exc

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
        refuses it in its first round, before writing anything)."""
        j = self.journal
        await self.lock.stopped(exc)  # raises DestinationLocked: nothing left to undo
        if isinstance(exc, RecordFormatError):
            if not resumed and j.state is not State.STARTED:
                j.error = f"{type(exc).__name__}: {exc}"
                await self._save_journal()
            raise self._refused(exc, resumed) from exc
        j.error = f"{type(exc).__name__}: {exc}"
        rolled = False
        if self.opts.rollback_on_failure and isinstance(exc, Exception):
            try:
                # a racer's object at one of our keys carries our job id: keep it
                keep = exc.conflicts if isinstance(exc, ConflictError) else ()
                await self.rollback(keep=keep, check_success=False)
                rolled = True
            except Exception:
                log.exception("rolling back job %s failed; its journal is left", j.job_id)
        elif j.state is not State.STARTED and not isinstance(exc, LockLost):
            try:
                await self._save_journal()
            except Exception:
                log.exception("could not save the journal of job %s", j.job_id)
        if not isinstance(exc, Exception):
            raise exc
        if rolled:
            what = "rolled back: nothing of it is left"
        elif j.state is State.STARTED and not resumed:
            what = "nothing of the commit was written: commit again, or abort the job"
        else:
            what = "left for resume/abort (see its journal)"
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
        total = len(self.plan.pendingsets)
        await complete_sets(
            self.ctx, self.sets, total, self.journal.window, 0, total, self.c, None, "verifying"
        )

    async def _replace(self, meanwhile: Awaitable[None] | None) -> None:
        """Delete the planned older objects still unchanged; ``meanwhile`` (the journal's
        move to ``replacing``) is stored while they are listed, before any is deleted."""
        self.phase = "replacing"
        deleted = await run_replacement(
            self.ctx, self._replace_prefixes(), self._replace_plan, meanwhile=meanwhile
        )
        log.info("job %s replaced %d older objects (its replace plan)", self.job_id, deleted)

    async def _write_success(self) -> str | None:
        if not self.opts.write_success:
            return None
        r0, t0 = self._stats0
        stats = (self.engine.stats.retries - r0, self.engine.stats.throttles - t0)
        data = success_record(
            self.ctx,
            self.journal,
            len(self.plan.pendingsets),
            stats,
            self.extra_metrics,
            self.diagnostics,
        )
        await self.engine.put_object(
            self.dest.bucket, self.layout.success, data.to_json(), content_type=JSON
        )
        return self.layout.success

    # ---------------------------------------------------------------- rollback
    async def rollback(
        self, *, keep: Iterable[str] = (), check_success: bool = True
    ) -> AbortResult:
        """Abort the job: nothing of it left (:func:`~.jobstorage.rollback_job`)."""

        async def aborting(j: Journal) -> None:
            self.journal = j
            self._apply(Event.ABORT)
            await self._save_journal()

        return await rollback_job(self.ctx, aborting, keep=keep, check_success=check_success)
