"""Job commit, resume and rollback: the I/O that runs the journal's state machine, in few
round trips (against a remote store a commit's time is its chain of dependent requests).

A fresh commit; each step is one round trip, its requests sent together:

1. read: the job's marker (HEAD), its journal (none yet), every pendingset of the plan
   (parsed to its end and checked, see :mod:`.spool`) and, for conflicts judged over the
   whole destination, the conflict listing (fail: nothing there; replace: the older
   objects, the replace plan). Nothing is written: a bad record or a conflict refuses
   with nothing to undo. (By partition, the listing needs the scan's partitions: one
   round more.)
2. write: the journal (``completing``, first), the plan, and for replace its plan and
   touched partitions. Completes start only once all are stored; a crash in between can
   leave a journal without its plan: nothing was completed, resume refuses, abort
   removes it.
3. complete every upload, at most ``window`` pendingsets in flight (:mod:`.complete`);
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

A caller's own records ride on these rounds as values (:class:`CommitRecords`, a
streaming sink's log), sent by the run itself: round 1 sent early with the caller's reads
(:meth:`PreparedCommit.read_ahead`), writes with round 2 (before any complete), writes
with the journal's ``succeeded`` (after every complete), keys deleted with the journal.

What to do in which state, and what a failure means, is :mod:`.policy`'s (pure, on the
journal's state machine); :class:`JobCommitRun` does the I/O of each piece of work it
names (one method each) and reacts to a failure as it says. A fresh commit
(:meth:`JobCommitRun.commit`) and a resume (:meth:`JobCommitRun.resume`) differ only in
where they start and in the work the policy gives them.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import NoReturn

from zerorename.aio import to_the_end
from zerorename.committers.commit.complete import Completed, complete_sets
from zerorename.committers.commit.journal import (
    Event,
    Journal,
    State,
    check_plan,
    completed_event,
    resumable_plan,
)
from zerorename.committers.commit.lock import CommitLock, first_journal, releasable
from zerorename.committers.commit.policy import (
    Entry,
    OnFailure,
    Raise,
    Work,
    fault_of,
    left_behind,
    reaction,
    works,
)
from zerorename.committers.commit.result import (
    CommitProgress,
    CommitRecords,
    JobCommitResult,
    ProgressFn,
    ProgressTicker,
    RecordWrite,
    success_record,
)
from zerorename.committers.commit.scan import (
    CommitScan,
    FirstRound,
    PreparedCommit,
    ScanTally,
    first_round,
    precheck,
)
from zerorename.committers.commit.storage import (
    AbortResult,
    cut_short,
    job_is_active,
    read_stored,
    release_job_storage,
    releasing,
    replace_records,
    rollback_job,
    run_replacement,
    stored_replace_records,
)
from zerorename.committers.conflict import ConflictMode, OldObject, plan_conflicts
from zerorename.committers.context import JobContext
from zerorename.committers.errors import ConflictError, JobCommitError, RecordFormatError
from zerorename.committers.store import caught, gather, nothing

__all__ = [
    "CommitProgress",
    "CommitRecords",
    "FirstRound",
    "JobCommitResult",
    "JobCommitRun",
    "PreparedCommit",
    "ProgressFn",
    "RecordWrite",
]

log = logging.getLogger("zerorename.committers")
JSON = "application/json"


class JobCommitRun:
    """One process's work on one job commit: a fresh commit, a resume, or a rollback. It
    does the work :func:`~.policy.works` names, one method each, then finishes; on a
    failure it does what :func:`~.policy.reaction` says."""

    def __init__(
        self,
        start: PreparedCommit,
        entry: Entry,
        progress: ProgressFn | None = None,
        records: CommitRecords | None = None,
    ) -> None:
        ctx = self.ctx = start.ctx
        self.entry = entry
        self.progress = progress
        #: the caller's records this run sends in its rounds
        self.records = records or CommitRecords()
        self.job_id = ctx.job_id
        self.engine, self.dest, self.layout, self.opts = ctx.engine, ctx.dest, ctx.layout, ctx.opts
        self.plan = start.plan
        #: the caller's own figures for _SUCCESS (e.g. rows), merged into its metrics
        self.extra_metrics = start.extra_metrics
        self.sets, self.seen = start.sets, start.seen
        self._ahead = start.ahead
        self._t0, self._stats0 = start.t0, start.stats
        self.journal = Journal(ctx.job_id, window=self.opts.window)
        #: a state move not stored yet (stored with the next write)
        self._unsaved = False
        self.partitions: set[str] = set()
        #: the replace plan this process listed or read (None: read it back)
        self._replace_plan: list[OldObject] | None = None
        self.phase = "starting" if self._ahead is None else "scanning"
        self.c = Completed()
        #: what the scan counting the journal's totals counted so far (progress reports)
        self._counting: ScanTally | None = None
        self.diagnostics: dict[str, str] = {}
        #: this run's hold on the destination's commit lock
        self.lock = CommitLock(ctx, self._waiting)

    @classmethod
    def fresh(
        cls,
        prepared: PreparedCommit,
        progress: ProgressFn | None = None,
        records: CommitRecords | None = None,
    ) -> JobCommitRun:
        """A fresh commit of ``prepared`` (:meth:`commit`)."""
        return cls(prepared, Entry.COMMIT, progress, records)

    @classmethod
    def resuming(
        cls,
        ctx: JobContext,
        progress: ProgressFn | None = None,
        records: CommitRecords | None = None,
    ) -> JobCommitRun:
        """A resume (:meth:`resume`); of ``records`` it sends only ``with_succeeded``."""
        kept = CommitRecords(with_succeeded=records.with_succeeded) if records else None
        return cls(PreparedCommit(ctx), Entry.RESUME, progress, kept)

    @classmethod
    def aborting(cls, ctx: JobContext) -> JobCommitRun:
        """An abort (:meth:`rollback`)."""
        return cls(PreparedCommit(ctx), Entry.ABORT)

    # ---------------------------------------------------------------- progress & journal
    def snapshot(self) -> CommitProgress:
        j, counting = self.journal, self._counting
        return CommitProgress(
            self.job_id,
            self.phase,
            self.c.sets,
            len(self.plan.pendingsets),
            self.c.uploads,
            counting.uploads if counting is not None else j.uploads_total,
            self.c.bytes,
            counting.bytes if counting is not None else j.bytes_total,
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

    async def _save_journal(self, *, first: bool = False) -> None:
        """Store the journal; ``first`` (a fresh commit's): with If-None-Match."""
        j = self.journal
        self._unsaved = False
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
        """Take a journal event (the state machine's one step); it is stored with the next
        write (:attr:`_unsaved`), with the requests that may go with it."""
        self.phase = self.journal.apply(event).value
        self._unsaved = True

    def _scan(self) -> CommitScan:
        """A scan of the current plan into this run's pendingset cache."""
        return CommitScan(self.ctx, self.plan, self.sets, self.seen)

    def _counted(self, tally: ScanTally) -> None:
        """A scan from the first pendingset: its counts are the journal's totals."""
        j = self.journal
        j.pendingsets_total = len(self.plan.pendingsets)
        j.uploads_total, j.bytes_total, j.filenames = tally.uploads, tally.bytes, tally.filenames
        self.partitions |= tally.partitions
        self.diagnostics.update(tally.diagnostics)
        self._counting = None

    # ---------------------------------------------------------------- entry points
    async def commit(self) -> JobCommitResult:
        """The fresh commit of the prepared plan (round 1 not sent again when it was read
        ahead). The pendingset cache is closed when this returns."""
        if self.entry is not Entry.COMMIT:
            raise ValueError(f"commit() of a run made for {self.entry.value}")
        if self._ahead is None:  # else checked when read ahead
            check_plan(self.plan, self.layout, location=self.dest.uri_of(self.layout.plan))
        return await self._run(works(Entry.COMMIT, self.journal.state, self.ctx.conflict))

    async def resume(self) -> JobCommitResult:
        """Read the journal and what the commit stored before its first complete (one
        round trip), then go on from the journal's state."""
        if self.entry is not Entry.RESUME:
            raise ValueError(f"resume() of a run made for {self.entry.value}")
        ctx = self.ctx
        j, plan_data, replace_data, parts_data = await read_stored(ctx)
        self.journal = j
        j.processes += 1
        j.error = None
        self.c.uploads, self.c.sets = j.uploads_done, j.watermark
        if j.state is State.ROLLING_BACK:
            await self.rollback()
            raise JobCommitError(
                f"job {self.job_id} was rolling back; the rollback is now finished",
                job_id=self.job_id,
                rolled_back=True,
                state=j.state.value,
            )
        if j.state is State.SUCCEEDED and (plan_data is None or not await job_is_active(ctx)):
            # its release began (the plan goes in it; the marker goes with the lock, after
            # _SUCCESS and the journal were stored): finish it, and nothing more. Another
            # job may have committed since the lock went (a replace may have removed this
            # job's files, a newer _SUCCESS may be there): no complete, no _SUCCESS
            self.lock.held = await releasable(ctx, j)
            return await self._finish_release()
        if plan_data is None:
            raise cut_short(ctx, "plan", j.state)
        self.plan = resumable_plan(plan_data, j, self.layout, self.dest.uri)
        if ctx.replaces and j.state in (State.COMPLETING, State.REPLACING):
            try:
                parts, self._replace_plan = stored_replace_records(
                    ctx, j.state, replace_data, parts_data
                )
            except RecordFormatError as exc:
                raise self._refused(exc) from exc
            self.partitions = set(parts)
        return await self._run(works(Entry.RESUME, j.state, ctx.conflict))

    async def _run(self, todo: tuple[Work, ...]) -> JobCommitResult:
        """Do ``todo`` in order while progress is reported, then finish; the pendingset
        cache is closed when this returns."""
        work: Mapping[Work, Callable[[], Awaitable[None]]] = {
            Work.LOCK: self._hold_lock,
            Work.START: self._start,
            Work.RESTART: self._restart,
            Work.COMPLETE: self._complete,
            Work.COMPLETE_REST: self._complete_rest,
            Work.VERIFY: self._verify,
            Work.REPLACE: self._replace,
        }
        with self.sets:
            async with ProgressTicker(self._report, self.opts.progress_interval):
                for step in todo:
                    await work[step]()
                return await self._finish()

    # ---------------------------------------------------------------- the work
    async def _hold_lock(self) -> None:
        """A resume holds the lock if its job's commit does, else takes it when it
        completes or deletes (:meth:`~.lock.CommitLock.for_resume`)."""
        await self.lock.for_resume(self.journal)

    async def _start(self) -> None:
        """Rounds 1 and 2 of a fresh commit (see the module's docstring); the gate first:
        only an active job with no journal yet."""
        first, lock_now = await self._first_round(gate=True)
        try:
            first.gate(self.ctx)
        except BaseException:
            await to_the_end(self.lock.release_unjournaled())
            raise
        await self._second_round(first, lock_now, self._fresh_records)

    async def _restart(self) -> None:
        """A resume of a journal in ``started`` (an older zerorename's): rounds 1 and 2
        again, without the gate (its journal is there) and the plan (it was read)."""
        first, lock_now = await self._first_round(gate=False)
        await self._second_round(first, lock_now, self._restarted_records)

    async def _first_round(self, *, gate: bool) -> tuple[FirstRound, bool]:
        """Round 1, or what was read ahead of it; and whether the lock is taken in it (fail
        and replace take it in round 1 and list after it; append in round 2:
        :mod:`.lock`)."""
        lock_now = self.ctx.conflict is not ConflictMode.APPEND and not self.lock.held
        self.phase = "scanning"
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            self._counting = ahead.scanned.value
            if lock_now:
                ahead = dataclasses.replace(ahead, holder=await caught(self.lock.take()))
            return ahead, lock_now
        scan = self._scan()
        self._counting = scan.tally
        lock = self.lock.take() if lock_now else nothing()
        return await first_round(self.ctx, scan, lock, gate=gate), lock_now

    async def _second_round(
        self,
        first: FirstRound,
        lock_now: bool,
        records: Callable[[], list[Awaitable[object]]],
    ) -> None:
        """Round 1 judged (the lock's answer, then the scan's), the conflict pre-check,
        then round 2: ``records()``, the replace records and append's try of the lock, at
        once. Completes start only once all are stored."""
        ctx = self.ctx
        try:
            holder = first.holder.get()
            self._counted(first.scanned.get())
            if lock_now and not self.lock.held:
                await self.lock.wait(holder)
                self.phase = "scanning"
            self._replace_plan = await precheck(ctx, self.partitions)
            self._apply(Event.SCANNED)
            writes = records()
            if self._replace_plan is not None:
                writes += replace_records(ctx, self._replace_plan, self.partitions)
            writes.append(caught(self.lock.take() if not self.lock.held else nothing()))
            holder = (await gather(*writes))[-1].get()
            if not self.lock.held:  # append: another commit holds it; the journal waits
                await self.lock.wait(holder)
        except BaseException as exc:
            await to_the_end(self._failed(exc), cleanup=True)
        await self._report()

    def _fresh_records(self) -> list[Awaitable[object]]:
        """A fresh commit's round 2: the caller's records, then the journal
        (If-None-Match) before the plan: a crash during these writes leaves no plan
        without its journal (all are answered before a complete)."""
        return [
            *self._callers(self.records.with_journal),
            self._save_journal(first=True),
            self.engine.put_object(
                self.dest.bucket, self.layout.plan, self.plan.to_json(), content_type=JSON
            ),
        ]

    def _restarted_records(self) -> list[Awaitable[object]]:
        """A restarted commit's round 2: its journal again (the plan is there)."""
        return [nothing(), self._save_journal()]

    async def _complete(self) -> None:
        """Every upload of the plan (:mod:`.complete`)."""
        await self._complete_from(uncertain_until=self.journal.watermark)

    async def _complete_rest(self) -> None:
        """A resume: the sets not yet done, parsed and checked before anything is
        completed; those of the first window may be done already (checked first)."""
        j = self.journal
        try:
            self.phase = "scanning"
            self.diagnostics.update((await self._scan().run(j.watermark)).diagnostics)
        except BaseException as exc:
            await to_the_end(self._failed(exc), cleanup=True)
        await self._complete_from(uncertain_until=j.watermark + j.window)

    async def _complete_from(self, *, uncertain_until: int) -> None:
        """Complete the sets from the watermark on (those below ``uncertain_until`` checked
        first); then the journal's move, stored with the next write together with the
        final watermark."""
        j = self.journal
        try:
            self.phase = "completing"
            await complete_sets(
                self.ctx,
                self.sets,
                len(self.plan.pendingsets),
                j.window,
                j.watermark,
                uncertain_until,
                self.c,
                self._save_mark,
                j.state.value,
            )
        except BaseException as exc:
            await to_the_end(self._failed(exc), cleanup=True)
        j.watermark = len(self.plan.pendingsets)
        self._apply(completed_event(self.ctx.conflict))

    async def _verify(self) -> None:
        """A resume of a journal that says every upload is complete (replacing, succeeded):
        check it before _SUCCESS and the cleanup (which aborts the job's uploads): each
        planned upload's object is there as completed, or its complete is run now. While
        the job is active every pendingset must be there; once its cleanup began (the
        marker is gone) a deleted one is skipped."""
        try:
            self.phase = "verifying"
            missing_ok = not await job_is_active(self.ctx)
            tally = await self._scan().run(0, missing_ok=missing_ok)
            self.diagnostics.update(tally.diagnostics)
            total = len(self.plan.pendingsets)
            await complete_sets(
                self.ctx, self.sets, total, self.journal.window, 0, total, self.c, None, "verifying"
            )
        except BaseException as exc:
            await self._stopped_after_completes(exc)

    async def _replace(self) -> None:
        """Delete the planned older objects still unchanged; the journal's move to
        ``replacing`` (when not stored yet) is stored while they are listed, before any
        is deleted."""
        try:
            meanwhile = self._save_journal() if self._unsaved else None
            self.phase = "replacing"
            deleted = await run_replacement(
                self.ctx, self._replace_prefixes(), self._replace_plan, meanwhile=meanwhile
            )
            log.info("job %s replaced %d older objects (its replace plan)", self.job_id, deleted)
            self._apply(Event.REPLACED)
        except BaseException as exc:
            await self._stopped_after_completes(exc)

    def _replace_prefixes(self) -> tuple[str, ...]:
        plan = plan_conflicts(ConflictMode.REPLACE, self.ctx.scope, self.dest, self.partitions)
        return plan.replace_prefixes

    # ---------------------------------------------------------------- the end
    async def _finish(self) -> JobCommitResult:
        """``_SUCCESS`` and the journal's ``succeeded`` (when not stored yet) at once, while
        the job's records and uploads are listed; then the release."""
        async with releasing(
            self.ctx, self.records.release_also, lock=self.lock.held, lock_etag=self.lock.etag
        ) as release:
            try:
                theirs = self._callers(self.records.with_succeeded)
                success_key, *_ = await gather(
                    self._write_success(),
                    self._save_journal() if self._unsaved else nothing(),
                    *theirs,
                )
            except BaseException as exc:
                await self._stopped_after_completes(exc)
            await self._report()
            self.phase = "cleanup"
            cleanup_error = None
            try:
                await release()
            except Exception as exc:
                cleanup_error = f"{type(exc).__name__}: {exc}"
                log.warning(
                    "job %s committed, but cleaning up its records failed: %s", self.job_id, exc
                )
        return await self._committed(success_key, cleanup_error)

    async def _finish_release(self) -> JobCommitResult:
        """A ``succeeded`` journal whose release began (its plan or its marker is gone):
        the release after ``_SUCCESS`` was cut short (it begins only once ``_SUCCESS`` and
        the journal were stored); finish it. ``_SUCCESS`` is left as it is."""
        if self.records.with_succeeded:  # before the journal goes
            await gather(*self._callers(self.records.with_succeeded))
        self.phase = "cleanup"
        await release_job_storage(self.ctx, lock=self.lock.held, lock_etag=self.lock.etag)
        success_key = self.layout.success if self.opts.write_success else None
        return await self._committed(success_key, None)

    async def _committed(
        self, success_key: str | None, cleanup_error: str | None
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
            resumed=self.entry is Entry.RESUME,
            cleanup_error=cleanup_error,
        )

    def _callers(self, records: tuple[RecordWrite, ...]) -> list[Awaitable[str]]:
        """The PUTs of the caller's ``records``, their bodies made now (:meth:`snapshot`)."""
        snap = self.snapshot()
        bodies = [(r, r.payload(snap)) for r in records]  # all made before any request
        return [
            self.engine.put_object(self.dest.bucket, r.key, body, content_type=r.content_type)
            for r, body in bodies
        ]

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

    # ---------------------------------------------------------------- failures
    async def _failed(self, exc: BaseException) -> NoReturn:
        """A failure before any old file was touched (:mod:`.policy`, rule 4): roll back
        or keep the journal, as :func:`~.policy.reaction` says. One that stopped
        before its journal releases the lock first; DestinationLocked is raised there
        (:meth:`~.lock.CommitLock.stopped`)."""
        j = self.journal
        await self.lock.stopped(exc)
        does = reaction(
            OnFailure.ROLL_BACK, fault_of(exc), self.entry, j.state, self.opts.rollback_on_failure
        )
        if does.raises is Raise.REFUSED:
            if does.save_error:  # a refusal decides nothing: its store is not shielded
                j.error = describe(exc)
                await self._save_journal()
            raise self._refused(exc) from exc
        j.error = describe(exc)
        rolled = does.roll_back and await self._rolled_back(exc)
        if does.save_error:
            try:
                await self._save_journal()
            except Exception:
                log.exception("could not save the journal of job %s", j.job_id)
        if does.raises is Raise.AS_IS:
            raise exc
        what = left_behind(rolled, self.entry, j.state)
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

    async def _rolled_back(self, exc: BaseException) -> bool:
        """Roll the job back after ``exc``; False (logged) when that failed too."""
        try:
            # a racer's object at one of our keys carries our job id: keep it
            keep = exc.conflicts if isinstance(exc, ConflictError) else ()
            await self.rollback(keep=keep, check_success=False)
            return True
        except Exception:
            log.exception("rolling back job %s failed; its journal is left", self.job_id)
            return False

    async def _stopped_after_completes(self, exc: BaseException) -> NoReturn:
        """A failure once every file is complete: never rolled back; the journal (with the
        error) is left for resume (:func:`~.policy.reaction`)."""
        j = self.journal
        does = reaction(
            OnFailure.ROLL_FORWARD,
            fault_of(exc),
            self.entry,
            j.state,
            self.opts.rollback_on_failure,
        )
        if does.raises is Raise.REFUSED:
            raise self._refused(exc) from exc  # the journal is left as it was
        if does.save_error:
            j.error = describe(exc)
            try:
                await to_the_end(self._save_journal())
            except Exception:
                log.exception("could not save the journal of job %s", j.job_id)
        if does.raises is Raise.AS_IS:
            raise exc
        raise JobCommitError(
            f"job {j.job_id} failed in state {j.state.value} after its files were "
            f"completed: {exc}; run resume to finish it",
            job_id=j.job_id,
            rolled_back=False,
            state=j.state.value,
        ) from exc

    def _refused(self, exc: BaseException) -> JobCommitError:
        j = self.journal
        return JobCommitError(
            f"job {j.job_id} {self.entry.value} refused: a record is bad: {exc}; no upload "
            f"was completed or aborted: fix or remove the record, or abort the job "
            f"(zerorename jobs abort {self.dest.uri} {j.job_id})",
            job_id=j.job_id,
            rolled_back=False,
            state=j.state.value,
        )

    # ---------------------------------------------------------------- rollback
    async def rollback(
        self, *, keep: Iterable[str] = (), check_success: bool = True
    ) -> AbortResult:
        """Abort the job: nothing of it left (:func:`~.storage.rollback_job`)."""

        async def aborting(j: Journal) -> None:
            self.journal = j
            self._apply(Event.ABORT)
            await self._save_journal()

        return await rollback_job(self.ctx, aborting, keep=keep, check_success=check_success)


def describe(exc: BaseException) -> str:
    """A failure as a journal's ``error`` records it."""
    return f"{type(exc).__name__}: {exc}"
