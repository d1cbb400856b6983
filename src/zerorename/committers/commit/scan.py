"""The job commit's scan: every pendingset of the plan read once, parsed to its end and
each upload checked (task-side path rules, the job's, once) before anything is completed;
then the conflict pre-check. A scan (:class:`CommitScan`) returns what it counted
(:class:`ScanTally`); the run decides what of it to keep. Round 1 of a fresh commit is the
scan with the lock's try and the gate's reads (:func:`first_round`, :class:`FirstRound`);
a :class:`PreparedCommit` holds what a run starts from, round 1 once read ahead.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field

from zerorename.committers.codec.pending import MAX_SUCCESS_FILENAMES, PendingRecord, Unchecked
from zerorename.committers.codec.validate import UploadSet, check_output_key
from zerorename.committers.commit.journal import CommitPlan, Journal, check_plan
from zerorename.committers.commit.lock import LockRecord, fenced_off, lock_lost
from zerorename.committers.commit.spool import PendingSetCache
from zerorename.committers.commit.storage import job_is_active, list_replacement, read_journal
from zerorename.committers.conflict import ConflictMode, OldObject, plan_conflicts
from zerorename.committers.context import JobContext
from zerorename.committers.errors import (
    ConflictError,
    JobNotActive,
    JournalError,
    RecordNotFound,
)
from zerorename.committers.paths import Destination, partition_of
from zerorename.committers.s3a.layout import job_id_of_dir, job_id_of_shared_dir, shared_magic_dir
from zerorename.committers.s3a.read import is_s3a_job, shared_job_ids
from zerorename.committers.store import (
    Outcome,
    bounded_map,
    caught,
    check_record,
    first_foreign_in,
    gather,
    nothing,
)


@dataclass
class ScanTally:
    """What one scan counted: the uploads it read (from its start on; a scan from 0 gives
    the journal's totals), up to the first files for ``_SUCCESS``, the partitions they
    touch (when the job needs them), and what it could not check, for ``_SUCCESS``'s
    diagnostics (filled in once the scan ended)."""

    uploads: int = 0
    bytes: int = 0
    filenames: list[str] = field(default_factory=list)
    partitions: set[str] = field(default_factory=set)
    diagnostics: dict[str, str] = field(default_factory=dict)


@dataclass
class CommitScan:
    """One scan of a plan's pendingsets into ``sets`` (kept for the completion); it
    returns what it counted (:class:`ScanTally`) and changes nothing of the run's."""

    ctx: JobContext
    plan: CommitPlan
    sets: PendingSetCache
    #: every upload the scans of this run saw (the same one twice is refused)
    seen: UploadSet
    #: what this scan counted so far (read by progress reports while it runs)
    tally: ScanTally = field(default_factory=ScanTally)
    #: records per check they could not get (S3A's have no part sizes)
    unchecked: Counter[Unchecked] = field(default_factory=Counter)

    def check(self, rec: PendingRecord, location: str) -> None:
        """An upload the job may complete: where a task may write, the job's, once;
        counted into :attr:`tally`."""
        ctx = self.ctx
        check_output_key(rec, ctx.dest, location)
        check_record(rec, ctx.dest, ctx.job_id, location, partitioned=ctx.partitioned)
        self.seen.add(rec, location)
        self.unchecked.update(rec.unchecked)
        t = self.tally
        t.uploads += 1
        t.bytes += rec.upload.length
        need_parts = ctx.needs_partitions
        if need_parts or len(t.filenames) < MAX_SUCCESS_FILENAMES:
            rel = ctx.dest.rel(rec.upload.key) or ""
            if len(t.filenames) < MAX_SUCCESS_FILENAMES:
                t.filenames.append(rel)
            if need_parts:
                t.partitions.add(partition_of(rel))

    async def run(self, start: int = 0, *, missing_ok: bool = False) -> ScanTally:
        """Read the pendingsets from ``start`` on once each, parse them to their end and
        check every upload, before completing anything; ``missing_ok``: skip a
        pendingset that is gone. Returns :attr:`tally`."""
        ctx = self.ctx
        mismatched = 0

        async def scan_one(index: int) -> None:
            nonlocal mismatched
            planned = self.plan.pendingsets[index]
            try:
                loaded = await self.sets.load(
                    index, ctx.engine, ctx.dest.bucket, planned.key, ctx.job_id, self.check
                )
            except RecordNotFound:
                if not missing_ok:
                    raise
                return
            if planned.attempt is not None and loaded.header.attempt != planned.attempt:
                mismatched += 1  # a later attempt overwrote it: still a valid task output

        await bounded_map(range(start, len(self.plan.pendingsets)), scan_one, scan_width(ctx))
        if mismatched:
            self.tally.diagnostics["pendingsets_from_other_attempt"] = str(mismatched)
        self.tally.diagnostics.update(unchecked_diagnostics(self.unchecked))
        return self.tally


@dataclass(frozen=True)
class FirstRound:
    """Round 1's answers, each kept as it came: an error is raised where the commit judges
    it, in its order. The scan's tally; the lock's holder (None: taken, or not tried);
    for a fresh commit its gate: is the job active, which journal is stored already
    (None: not read)."""

    scanned: Outcome[ScanTally]
    holder: Outcome[LockRecord | None]
    active: Outcome[bool] | None = None
    stored: Outcome[Journal | None] | None = None

    def gate(self, ctx: JobContext) -> None:
        """A fresh commit only of an active job that has no journal yet (the marker's
        verdict first, then the journal's)."""
        if self.active is not None and not self.active.get():
            raise JobNotActive(
                f"job {ctx.job_id} is not active at {ctx.dest.uri} "
                f"(never set up, or already committed/aborted)"
            )
        stored = self.stored.get() if self.stored is not None else None
        if fenced_off(ctx, stored):  # as its first journal write would find it
            raise lock_lost(ctx, stored.fenced_by if stored is not None else None)
        if stored is not None:
            raise JournalError(
                f"job {ctx.job_id} already started a commit; use "
                f"resume() or abort() (zerorename jobs resume|abort)"
            )


async def first_round(
    ctx: JobContext, scan: CommitScan, lock: Awaitable[LockRecord | None], *, gate: bool
) -> FirstRound:
    """Round 1: the scan, the lock's try (``lock``) and with ``gate`` the job's marker and
    journal, at once; nothing is written but the lock, and no error raised."""
    steps: list[Awaitable[Outcome[object]]] = [caught(scan.run()), caught(lock)]
    if gate:
        steps += [caught(job_is_active(ctx)), caught(read_journal(ctx))]
    return FirstRound(*await gather(*steps))


class PreparedCommit:
    """What a run starts from, fixed before it runs: the plan (a fresh commit's; a resume
    reads its own), the caller's figures for ``_SUCCESS`` (e.g. rows), the scan's
    pendingset cache, the clock and the engine's counters, and round 1 once
    :meth:`read_ahead` read it. :meth:`close` drops what it read (the cache's spill file);
    a run closes it when it ends."""

    def __init__(
        self,
        ctx: JobContext,
        plan: CommitPlan | None = None,
        extra_metrics: Mapping[str, int | float] | None = None,
    ) -> None:
        self.ctx = ctx
        self.plan = plan if plan is not None else CommitPlan(ctx.job_id, (), "summaries")
        self.extra_metrics = dict(extra_metrics or {})
        self.sets = PendingSetCache(readers=scan_width(ctx))
        #: every upload the scans of the run saw (the same one twice is refused)
        self.seen = UploadSet()
        self.t0 = time.monotonic()
        self.stats = (ctx.engine.stats.retries, ctx.engine.stats.throttles)
        #: round 1, when read ahead
        self.ahead: FirstRound | None = None

    def check(self) -> None:
        """The plan names only the job's own pendingsets (:func:`~.journal.check_plan`)."""
        lay = self.ctx.layout
        check_plan(self.plan, lay, location=self.ctx.dest.uri_of(lay.plan))

    def scan(self) -> CommitScan:
        return CommitScan(self.ctx, self.plan, self.sets, self.seen)

    async def read_ahead(self) -> None:
        """Round 1 of the fresh commit, now (to go out with the caller's reads): nothing is
        written and no error raised; the run acts on what it found."""
        self.check()
        self.ahead = await first_round(self.ctx, self.scan(), nothing(), gate=True)

    def close(self) -> None:
        self.sets.close()


def unchecked_diagnostics(counts: Counter[Unchecked]) -> dict[str, str]:
    """What a scan could not check, for ``_SUCCESS``'s diagnostics: ``unchecked: <check>``
    -> how many records (none when every record was checked in full)."""
    return {f"unchecked: {check.value}": str(n) for check, n in counts.items() if n}


#: pendingsets read at once when the commit concurrency is not set (the engine's default
#: batch concurrency): a scan takes one round trip up to that many tasks
DEFAULT_SCAN_WIDTH = 64


def scan_width(ctx: JobContext) -> int:
    """Pendingsets read at once: ``scan_concurrency`` if set, else the commit's concurrency
    (as many as it completes), so the scan is one round trip up to that many tasks."""
    return ctx.opts.scan_concurrency or ctx.opts.concurrency or DEFAULT_SCAN_WIDTH


def precheck_needs_scan(ctx: JobContext) -> bool:
    """The pre-check lists the partitions the scan finds (scope ``partitions``), so it
    follows the scan; otherwise it lists the destination and may run beside the scan."""
    return plan_conflicts(ctx.conflict, ctx.scope, ctx.dest).needs_partitions


async def precheck(ctx: JobContext, partitions: set[str]) -> list[OldObject] | None:
    """Conflict mode 'fail': nothing there yet, else ConflictError; replace: the older
    objects listed now (the replace plan, stored by the caller with the journal), so
    replace deletes exactly these (if unchanged), never one written while the commit
    runs. Reads only: nothing is written, a refusal has nothing to undo."""
    plan = plan_conflicts(ctx.conflict, ctx.scope, ctx.dest, partitions)
    if plan.check_prefixes:
        found = await first_foreign_in(ctx.engine, ctx.dest, plan.check_prefixes, ctx.job_id)
        if found:
            raise ConflictError(
                f"destination {ctx.dest.uri} already has objects where job "
                f"{ctx.job_id} writes (conflict mode 'fail'), e.g. "
                f"{ctx.dest.uri_of(found[0])}",
                job_id=ctx.job_id,
                conflicts=tuple(found),
            )
    if plan.mode is not ConflictMode.REPLACE:
        return None  # a replace of no partition (the job wrote nothing) plans to delete none
    seen: set[str] = set()
    whole = ctx.dest.list_prefix in plan.replace_prefixes  # the listing holds the root
    busy = [] if whole else await s3a_jobs_under(ctx)
    old = await list_replacement(
        ctx, plan.replace_prefixes, lambda key: _add(seen, s3a_job_of(ctx.dest, key))
    )
    busy = busy or sorted(seen - {ctx.job_id})
    if busy:
        raise ConflictError(
            f"job {ctx.job_id} commit refused: S3A job {busy[0]} has its directory under "
            f"{ctx.dest.uri} (Hadoop's commits take no lock: it may be completing its files "
            "now, and a replace would delete part of them); nothing changed: commit again "
            f"once it finished, or if its driver is gone: zerorename jobs resume|abort "
            f"{ctx.dest.uri} {busy[0]}",
            job_id=ctx.job_id,
        )
    return old


def _add(seen: set[str], job: str | None) -> None:
    if job is not None:
        seen.add(job)


def s3a_job_of(dest: Destination, key: str) -> str | None:
    """The S3A job whose records ``key`` is (``dest/__magic_job-<id>/job-<id>/...``, or
    Hadoop 3.3's ``dest/__magic/job-<id>/...``)."""
    rel = dest.rel(key)
    top, _, rest = (rel or "").partition("/")
    if top == "__magic":  # Hadoop 3.3's directory, shared by its jobs
        name, slash, _ = rest.partition("/")
        return job_id_of_shared_dir(dest, dest.key(f"__magic/{name}/")) if slash else None
    job = job_id_of_dir(dest, dest.key(top + "/")) if top else None
    return job if job is not None and rest.startswith(f"job-{job}/") else None


async def s3a_jobs_under(ctx: JobContext) -> list[str]:
    """S3A magic jobs whose directory is right under the destination. Hadoop's commits
    take no lock, and a directory lives from the job's first request to the end of its
    commit: a replace of the whole destination sees one in its own listing (so it never
    lists part of one); a replace by partition looks before its listing (a job that
    starts its whole run after that look and is part way through its commit during the
    listing escapes it)."""
    dest = ctx.dest
    subs = [s async for s in ctx.engine.list_prefixes(dest.bucket, dest.list_prefix)]
    jobs = [j for j in (job_id_of_dir(dest, s) for s in subs) if j and j != ctx.job_id]
    kinds = await gather(*(is_s3a_job(ctx.engine, dest, j) for j in jobs))
    # Hadoop 3.3's jobs, in dest/__magic/ (one more listing only where that is there)
    old = await shared_job_ids(ctx.engine, dest) if shared_magic_dir(dest) in subs else []
    return [job for job, s3a in zip(jobs, kinds, strict=True) if s3a] + old
