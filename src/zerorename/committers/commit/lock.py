"""The destination's commit lock: the commits of jobs on one destination take turns, so
whatever runs at once the result equals some serial order (invariant 6).

One object per destination, ``<dest>/__magic_commit/lock.json``, names the job whose
commit holds it. It is created only with If-None-Match (S3, RGW and moto refuse the
second creator with 412), taken before anything of a commit is visible (fail and
replace: before their conflict listing, so a replace plan never holds part of a commit
still running and two fail-mode commits never both find the destination empty; append:
with its journal, before its first complete) and deleted once the journal recorded the
end (``succeeded`` or the rollback), before the journal itself. Per destination, not per
partition: every mode and scope takes the same one object, so no two commits interleave
and no order of partition locks can deadlock; commits on one destination serialize.

Who may delete a lock naming job H (nobody else, so no delete removes another holder's
lock that replaced H's):

- H's commit, its resume or its abort, while H's journal exists: as long as a journal of H
  is stored, no other job touches H's lock (the lock goes in the request before the
  journal's delete, or with it);
- another job K, once H is *fenced*: H holds the lock but has no journal, and the lock is
  older than ``CommitOptions.lock_stale_after``. K then writes a tombstone journal for H
  (state ``rolling_back``, ``fenced_by`` K) with If-None-Match. If that succeeds, H's own
  first journal write (If-None-Match too) can never succeed, so H completes nothing, ever
  (it fails with :class:`LockLost`; ``jobs abort`` removes what it left); K re-reads the
  lock and deletes it if it is still H's. If the write finds a journal, H is committing:
  K waits. The time bound decides only when a silent holder is fenced, never whether two
  commits can act at once;
- H releasing without a journal (a commit refused before writing one) fences itself the
  same way first (``fenced_by`` H), then deletes the lock and the tombstone together;
- H (its commit refused as fenced off, or its abort) when H's journal is K's tombstone and
  the lock is not the record K fenced (the tombstone names that record's ``acquired``):
  H took it again after the fence. K never deletes it (it deletes only the record it
  fenced) and no other job touches it while the tombstone is there, so H deletes it;
  a commit only the very record it wrote, and always with the lock's ETag (If-Match: a
  store that honours it keeps a lock another job took meanwhile).

A job that finds the lock held waits (polling, reported as the commit's phase) at most
``CommitOptions.lock_wait`` seconds, then refuses with :class:`DestinationLocked`; its
commit wrote nothing (or removed the journal it wrote), so it can be run again.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import anyio

from zerorename.committers import objectstore as caps
from zerorename.committers.codec.validate import Fields, load_json
from zerorename.committers.commit.journal import Journal, State
from zerorename.committers.context import JobContext
from zerorename.committers.errors import (
    InvalidJobId,
    JobCommitError,
    RecordFormatError,
)
from zerorename.committers.paths import Destination, JobLayout, check_job_id
from zerorename.committers.store import read_optional
from zerorename.engine.errors import ObjectTooLarge, PreconditionFailed, S3Error

log = logging.getLogger("zerorename.committers")
LOCK_DIR = "__magic_commit"
LOCK_NAME = "lock.json"
LOCK_VERSION = 1
JSON = "application/json"
#: the codes of a store that refuses a DeleteObjects with ETags (it deletes nothing)
ETAG_REFUSED = ("MalformedXML", "InvalidArgument", "InvalidRequest", "NotImplemented")
#: the longest pause between two looks at a held lock
MAX_POLL = 2.0

__all__ = [
    "CommitLock",
    "DestinationLocked",
    "LockLost",
    "LockRecord",
    "Verdict",
    "acquire",
    "fence",
    "judge",
    "lock_key",
    "read_lock",
    "release_taken",
    "release_unjournaled",
    "taken_after_fence",
    "try_lock",
]


class DestinationLocked(JobCommitError):
    """Raised when a job commit (or resume) could not take its destination's commit lock
    within ``CommitOptions.lock_wait``: another job's commit holds it. Nothing of the
    commit is left written; commit (or resume) again once that job finished."""


class LockLost(JobCommitError):
    """Raised when a commit finds it was fenced off its destination's commit lock (it held
    the lock longer than ``lock_stale_after`` without a journal and another job released
    it): it completed nothing and never will; abort the job and run it again."""


def lock_key(dest: Destination) -> str:
    """The destination's commit lock (inside a ``__magic*`` directory: never data)."""
    return dest.key(f"{LOCK_DIR}/{LOCK_NAME}")


@dataclass(frozen=True)
class LockRecord:
    """``lock.json``: which job's commit holds the destination, since when (its clock)."""

    job_id: str
    acquired: float = field(default_factory=time.time)
    hostname: str = field(default_factory=socket.gethostname)

    def to_json(self) -> bytes:
        d = {
            "version": LOCK_VERSION,
            "jobId": self.job_id,
            "acquired": self.acquired,
            "hostname": self.hostname,
        }
        return json.dumps(d, ensure_ascii=False).encode()

    @classmethod
    def from_json(cls, data: bytes | str, *, location: str = "") -> LockRecord:
        """Parse and check; RecordFormatError for anything but a lock record."""
        f = Fields(load_json(data, "commit lock", location), "commit lock", location)
        if f.d.get("version") != LOCK_VERSION:
            raise f.fail("version", f"{f.d.get('version')!r} is not {LOCK_VERSION}")
        rec = cls(
            f.str_("jobId"),
            f.time_("acquired"),
            f.str_("hostname", required=False, empty=True),
        )
        try:
            check_job_id(rec.job_id)
        except InvalidJobId as exc:
            raise f.fail("jobId", str(exc)) from None
        return rec


class Verdict(StrEnum):
    OURS = "ours"  # the lock names this job (a retried create, or an earlier process)
    WAIT = "wait"  # another job's commit holds it, or may still start
    FENCE = "fence"  # its holder wrote no journal within the bound: fence it off


def judge(holder: LockRecord, me: str, journal: bool, now: float, stale_after: float) -> Verdict:
    """What a job does about a lock held by ``holder`` (``journal``: the holder has one)."""
    if holder.job_id == me:
        return Verdict.OURS
    if journal or now - holder.acquired < stale_after:
        return Verdict.WAIT
    return Verdict.FENCE


async def read_lock(ctx: JobContext) -> LockRecord | None:
    """The destination's lock record, or None when it is free."""
    key = lock_key(ctx.dest)
    try:
        data = await read_optional(ctx.engine, ctx.dest.bucket, key, max_size=caps.MARKER_CAP)
        if data is None:
            return None
        return LockRecord.from_json(data, location=ctx.dest.uri_of(key))
    except ObjectTooLarge:  # a bad record, as one that does not parse (not a failed read)
        raise RecordFormatError(
            f"commit lock is larger than {caps.MARKER_CAP} bytes, so not one zerorename "
            f"wrote; delete it once no job commits to {ctx.dest.uri}",
            location=ctx.dest.uri_of(key),
        ) from None
    except RecordFormatError as exc:
        raise RecordFormatError(
            f"{exc.detail}; delete it once no job commits to {ctx.dest.uri}",
            location=exc.location,
        ) from None


#: a resend's recheck (the engine's ``delete_objects``): the batch's keys still to delete
Recheck = Callable[[list[str]], Awaitable[list[str]]]

#: what :func:`try_lock` answers when the lock was released between its two requests
FREE = LockRecord("00000000-0000-4000-8000-000000000000", 0.0, "")


async def try_lock(
    ctx: JobContext,
    record: LockRecord | None = None,
    took: Callable[[str], None] | None = None,
) -> LockRecord | None:
    """Create the lock for this job (If-None-Match) with ``record`` (None: a fresh one).
    None: it is this job's now (also when it named this job already); else the holder's
    record (:data:`FREE` if it was gone by the time it was read). ``took`` is given the
    ETag of the record this call wrote (not called when it found its own record there)."""
    engine, key = ctx.engine, lock_key(ctx.dest)
    try:
        etag = await engine.put_object(
            ctx.dest.bucket,
            key,
            (record or LockRecord(ctx.job_id)).to_json(),
            if_none_match=True,
            content_type=JSON,
        )
        if took is not None:
            took(etag)
        return None
    except PreconditionFailed:
        pass
    holder = await read_lock(ctx)
    if holder is None:
        return FREE
    return None if holder.job_id == ctx.job_id else holder


def tombstone(job_id: str, by: str, fenced: LockRecord | None = None) -> bytes:
    """The journal that fences job ``job_id`` off the lock (its first journal write, with
    If-None-Match, then fails); abort (``zerorename jobs abort``) finishes it. ``fenced``:
    the lock record the fencer deletes (another job's fence)."""
    why = f"fenced off the destination's commit lock by job {by} before its commit began"
    at = None if fenced is None else fenced.acquired
    return Journal(job_id, State.ROLLING_BACK, error=why, fenced_by=by, fenced_lock=at).to_json()


def taken_after_fence(j: Journal | None, holder: LockRecord | None, me: str) -> bool:
    """Whether job ``me`` releases the lock ``holder`` although its journal ``j`` is
    another job's tombstone: the lock names ``me`` and is not the record that job fenced
    (and deletes), so ``me`` took it after the fence and nobody else will release it.
    A tombstone that names no fenced record (an older zerorename's) proves nothing."""
    return (
        j is not None
        and j.fenced_by not in (None, me)
        and j.fenced_lock is not None
        and holder is not None
        and holder.job_id == me
        and holder.acquired != j.fenced_lock
    )


async def fence(ctx: JobContext, holder: LockRecord) -> bool:
    """Fence ``holder`` (which has no journal) and release its lock: False when it has a
    journal by now (it is committing: wait)."""
    engine, dest = ctx.engine, ctx.dest
    journal = JobLayout(dest, holder.job_id).journal
    try:
        await engine.put_object(
            dest.bucket,
            journal,
            tombstone(holder.job_id, ctx.job_id, holder),
            if_none_match=True,
            content_type=JSON,
        )
    except PreconditionFailed:
        return False
    # from here only this job deletes the holder's lock; If-Match still keeps a lock taken
    # after a lost answer of this delete (the engine's resend) on a store that honours it
    if not await delete_lock(ctx, holder):
        # the holder finished and released it meanwhile: nothing of it to fence
        await engine.delete_objects(dest.bucket, [journal])
    return True


async def holder_has_journal(ctx: JobContext, holder: LockRecord) -> bool:
    lay = JobLayout(ctx.dest, holder.job_id)
    return await ctx.engine.head_object(ctx.dest.bucket, lay.journal) is not None


async def acquire(
    ctx: JobContext,
    holder: LockRecord | None,
    on_wait: Callable[[str], None],
    fresh: Callable[[], LockRecord] | None = None,
    took: Callable[[str], None] | None = None,
) -> None:
    """Take the lock, ``holder`` being what :func:`try_lock` answered: wait while another
    job's commit holds it (``on_wait(job id)`` each time), fence a silent holder; after
    ``lock_wait`` seconds :class:`DestinationLocked`. Nothing is written but the lock
    (and a fenced holder's tombstone). ``fresh``: the record each try writes."""
    opts = ctx.opts
    fresh = fresh or (lambda: LockRecord(ctx.job_id))
    # the event loop's clock (monotonic; a test's loop may make it virtual), as the sleeps
    deadline = anyio.current_time() + opts.lock_wait
    pause = 0.05
    while holder is not None:
        if holder is not FREE:
            has_journal = await holder_has_journal(ctx, holder)
            verdict = judge(holder, ctx.job_id, has_journal, time.time(), opts.lock_stale_after)
            if verdict is Verdict.FENCE and await fence(ctx, holder):
                holder = await try_lock(ctx, fresh(), took)
                continue
            on_wait(holder.job_id)
            left = deadline - anyio.current_time()
            if left <= 0:
                state = "is committing" if has_journal else "has not started committing"
                raise DestinationLocked(
                    f"job {ctx.job_id} commit refused: {ctx.dest.uri} is locked by job "
                    f"{holder.job_id}, which {state} (lock taken {ago(holder)}); waited "
                    f"{opts.lock_wait:g} s; commit again once it finished, or if its process "
                    f"is gone: zerorename jobs resume|abort {ctx.dest.uri} {holder.job_id}",
                    job_id=ctx.job_id,
                    rolled_back=False,
                    state=State.STARTED.value,
                )
            await anyio.sleep(min(pause, left))
            pause = min(pause * 2, MAX_POLL)
        holder = await try_lock(ctx, fresh(), took)


def ago(holder: LockRecord) -> str:
    return f"{max(0.0, time.time() - holder.acquired):.0f} s ago on {holder.hostname or '?'}"


async def release_unjournaled(ctx: JobContext) -> bool:
    """Release this job's lock when it has no journal (a commit refused before writing
    one): fence itself first, so no other job's takeover races the delete; then the lock
    and the tombstone go in one request. False (nothing done) when a journal of the job
    exists (fenced by another job: that job releases the lock; or its commit started)."""
    engine, dest = ctx.engine, ctx.dest
    lay = JobLayout(dest, ctx.job_id)
    try:
        await engine.put_object(
            dest.bucket,
            lay.journal,
            tombstone(ctx.job_id, ctx.job_id),
            if_none_match=True,
            content_type=JSON,
        )
    except PreconditionFailed:
        return False
    now = await read_lock(ctx)
    if now is not None and now.job_id == ctx.job_id:  # If-Match: see fence()
        await delete_lock(ctx, now, [lay.journal])
    else:
        await engine.delete_objects(dest.bucket, [lay.journal])
    return True


def _still(ctx: JobContext, etag: str) -> Recheck:
    """A resend's recheck (``delete_objects``): the lock's key stays in the batch only
    while the lock is still the object of ``etag`` (one HEAD). A store that ignores
    If-Match would otherwise let the engine's resend, after a lost answer, delete a lock
    another job took once the first send had freed it."""
    key = lock_key(ctx.dest)

    async def recheck(keys: list[str]) -> list[str]:
        if key not in keys:
            return keys
        info = await ctx.engine.head_object(ctx.dest.bucket, key)
        if info is not None and info.etag.strip('"') == etag.strip('"'):
            return keys
        return [k for k in keys if k != key]

    return recheck


async def delete_lock_of(ctx: JobContext, etag: str, also: Sequence[str] = ()) -> None:
    """Delete the lock while it is the object of ``etag`` (If-Match, and a recheck before
    any resend), with ``also`` in the same request. A store that refuses ETags in
    DeleteObjects gets the delete again without, if a HEAD finds the lock still that
    object (the HEAD-to-delete window is left on such a store; README: the commit lock)."""
    engine, dest, key = ctx.engine, ctx.dest, lock_key(ctx.dest)
    keys = [key, *also]
    recheck = _still(ctx, etag)
    try:
        await engine.delete_objects(dest.bucket, keys, if_match={key: etag}, recheck=recheck)
    except S3Error as exc:
        if exc.code not in ETAG_REFUSED:
            raise
        await engine.delete_objects(dest.bucket, await recheck(keys), recheck=recheck)


async def delete_lock(ctx: JobContext, record: LockRecord, also: Sequence[str] = ()) -> bool:
    """Delete the lock if it is ``record`` (its HEAD first, then its body: the ETag sent
    is the one of the body compared), with ``also`` in the same request; the lock goes
    with If-Match (:func:`delete_lock_of`). True when it was ``record``."""
    engine, dest, key = ctx.engine, ctx.dest, lock_key(ctx.dest)
    info = await engine.head_object(dest.bucket, key)
    now = None if info is None else await read_lock(ctx)
    if info is None or now != record:
        if also:
            await engine.delete_objects(dest.bucket, list(also))
        return False
    await delete_lock_of(ctx, info.etag, also)
    return True


async def release_held(ctx: JobContext, etag: str | None, also: Sequence[str] = ()) -> None:
    """A commit's release of the lock it holds (its journal is its own, so no other job
    touches the lock), with ``also`` in the same request: with the ETag its PutObject
    answered, one conditional delete; without (a resume, or a write whose answer was
    lost) the lock is read first and goes only while it names this job."""
    if etag is not None:
        await delete_lock_of(ctx, etag, also)
        return
    now = await read_lock(ctx)
    if now is not None and now.job_id == ctx.job_id:
        await delete_lock(ctx, now, also)
    elif also:
        await ctx.engine.delete_objects(ctx.dest.bucket, list(also))


async def release_taken(ctx: JobContext, written: LockRecord | None) -> bool:
    """A commit refused as fenced off (:class:`LockLost`) that wrote ``written`` (its
    last lock record) in this run: release the lock when it is that very record and the
    tombstone fenced another one (:func:`taken_after_fence`). True when released."""
    if written is None:
        return False
    data = await read_optional(
        ctx.engine, ctx.dest.bucket, ctx.layout.journal, max_size=caps.JOURNAL_CAP
    )
    j = (
        None
        if data is None
        else Journal.from_json(data, location=ctx.dest.uri_of(ctx.layout.journal))
    )
    if not taken_after_fence(j, written, ctx.job_id):
        return False
    return await delete_lock(ctx, written)


async def releasable(ctx: JobContext, journal: Journal | None) -> bool:
    """Whether this job (its commit, resume or abort) releases the destination's lock:
    it names the job and the job's journal is its own (not another job's tombstone)."""
    if journal is not None and journal.fenced_by not in (None, ctx.job_id):
        return False
    holder = await read_lock(ctx)
    return holder is not None and holder.job_id == ctx.job_id


async def first_journal(ctx: JobContext, data: bytes) -> None:
    """A fresh commit's first journal write, with If-None-Match: :class:`LockLost` when a
    tombstone is there (another job fenced this one off the lock). A journal without
    ``fenced_by`` is this write's own (its answer was lost and the retry found it)."""
    engine, dest, lay = ctx.engine, ctx.dest, ctx.layout
    try:
        await engine.put_object(
            dest.bucket, lay.journal, data, if_none_match=True, content_type=JSON
        )
        return
    except PreconditionFailed:
        pass
    stored = await read_optional(engine, dest.bucket, lay.journal, max_size=caps.JOURNAL_CAP)
    j = None if stored is None else Journal.from_json(stored, location=dest.uri_of(lay.journal))
    if j is not None and j.fenced_by is None:
        return
    raise lock_lost(ctx, j.fenced_by if j is not None else None)


def fenced_off(ctx: JobContext, j: Journal | None) -> bool:
    """Whether ``j`` (the job's stored journal) is the tombstone another job wrote to
    fence this job off the lock (:func:`fence`)."""
    return j is not None and j.fenced_by not in (None, ctx.job_id)


def lock_lost(ctx: JobContext, by: str | None) -> LockLost:
    """The refusal of a commit that job ``by`` fenced off the lock."""
    return LockLost(
        f"job {ctx.job_id} commit refused: job {by or '?'} released its lock on {ctx.dest.uri} "
        f"(held without a journal past that job's lock_stale_after); nothing was "
        f"completed: abort the job (zerorename jobs abort {ctx.dest.uri} {ctx.job_id}) "
        f"and run it again",
        job_id=ctx.job_id,
        rolled_back=False,
        state=State.STARTED.value,
    )


async def held_by_job(ctx: JobContext) -> bool:
    """For a release of the job's storage outside its commit (cleanup, a stream's sweep of
    a dead run): True when the lock names the job and goes with its records (its journal
    is its own); a lock it holds without a journal is released here at once."""
    holder = await read_lock(ctx)
    if holder is None or holder.job_id != ctx.job_id:
        return False
    data = await read_optional(
        ctx.engine, ctx.dest.bucket, ctx.layout.journal, max_size=caps.JOURNAL_CAP
    )
    if data is None:
        await release_unjournaled(ctx)
        return False
    j = Journal.from_json(data, location=ctx.dest.uri_of(ctx.layout.journal))
    return j.fenced_by in (None, ctx.job_id)


class CommitLock:
    """One commit run's hold on its destination's lock: whether it holds it and whether it
    wrote its commit's first journal (until then it releases with a self-fence)."""

    def __init__(self, ctx: JobContext, on_wait: Callable[[str], None]) -> None:
        self.ctx = ctx
        self.on_wait = on_wait
        self.held = False
        self.journaled = False
        #: the lock record this run wrote last (what proves a lock is the one it took)
        self.written: LockRecord | None = None
        #: the ETag of the lock record this run wrote last (None: not known)
        self.etag: str | None = None

    def _fresh(self) -> LockRecord:
        self.written, self.etag = LockRecord(self.ctx.job_id), None
        return self.written

    def _took(self, etag: str) -> None:
        self.etag = etag

    async def take(self) -> LockRecord | None:
        """One try (:func:`try_lock`); the holder when another job's commit has it."""
        holder = await try_lock(self.ctx, self._fresh(), self._took)
        self.held = holder is None
        return holder

    async def wait(self, holder: LockRecord | None) -> None:
        """Wait for it (:func:`acquire`): DestinationLocked after ``lock_wait``."""
        await acquire(self.ctx, holder, self.on_wait, self._fresh, self._took)
        self.held = True

    async def for_resume(self, j: Journal) -> None:
        """A resume holds the lock if its job's commit does; one that completes or deletes
        takes it (a commit from before the lock, or one that waited for it)."""
        self.held = await releasable(self.ctx, j)
        if not self.held and j.state in (State.STARTED, State.COMPLETING, State.REPLACING):
            await self.wait(await self.take())

    async def release_unjournaled(self) -> None:
        """A commit that stops before its journal: release the lock if it holds it; one
        fenced off (a tombstone is its journal) releases only a record it wrote after
        the fence (:func:`release_taken`)."""
        if self.held and not self.journaled:
            try:
                if not await release_unjournaled(self.ctx):
                    await release_taken(self.ctx, self.written)
            except Exception:
                log.exception("job %s could not release its lock", self.ctx.job_id)
            self.held = False

    async def stopped(self, exc: BaseException) -> None:
        """The commit failed with ``exc``: one fenced off holds nothing; one that stopped
        before its journal releases the lock; :class:`DestinationLocked` (raised again
        here) after the journal was written (append waits with it) removes the commit's
        records first, so nothing of it is left."""
        await self.release_unjournaled()
        if isinstance(exc, DestinationLocked):
            if self.journaled:
                lay = self.ctx.layout
                await self.ctx.engine.delete_objects(
                    self.ctx.dest.bucket, [lay.journal, lay.plan, lay.replace, lay.partitions]
                )
            raise exc
