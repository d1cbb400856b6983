"""A job's storage as a whole: the record of the partitions it touched, the replace plan,
the abort that removes exactly what the job wrote, and the release of its records after a
successful commit.

What a job owns (invariant 7): its records, by their directory (``__magic_job-<id>/``); its
pending uploads, by the naming rule (:func:`~zerorename.committers.paths.job_id_of_key`);
its completed objects, by its own pendingsets: a key is deleted only when a pendingset of
the job that checks out lists it and the object there is the one completing that upload
made (its multipart ETag).
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import anyio

from zerorename.committers import objectstore as caps
from zerorename.committers.codec.pending import PendingRecord
from zerorename.committers.codec.success import SuccessData, success_filename
from zerorename.committers.codec.validate import load_json, malformed
from zerorename.committers.commit.journal import Journal, State, can_abort
from zerorename.committers.commit.lock import (
    ETAG_REFUSED,
    LockLost,
    LockRecord,
    delete_lock,
    first_journal,
    read_lock,
    release_held,
    taken_after_fence,
    tombstone,
)
from zerorename.committers.conflict import (
    ConflictMode,
    ConflictScope,
    OldObject,
    is_foreign,
    parse_replace_plan,
    plan_conflicts,
    replace_plan_record,
    still_planned,
)
from zerorename.committers.context import JobContext
from zerorename.committers.errors import (
    CommitterError,
    JournalError,
    NothingToResume,
    PathError,
    RecordFormatError,
)
from zerorename.committers.paths import (
    PENDINGSET_SUFFIX,
    Destination,
    check_relative_path,
    key_carries_job,
    parse_hive_partition,
)
from zerorename.committers.store import (
    LIST_CONCURRENCY,
    Check,
    Outcome,
    abort_uploads,
    bounded_map,
    caught,
    check_record,
    gather,
    is_ours,
    job_uploads,
    keys_under,
    nothing,
    prefetch,
    read_optional,
    scan_pendingset,
)
from zerorename.engine.errors import S3Error
from zerorename.engine.ops.objects import DELETE_BATCH

log = logging.getLogger("zerorename.committers")

#: a store's codes for a DeleteObjects whose ETag elements it does not understand
_ETAG_REFUSED = ETAG_REFUSED
#: HEADs at once while an abort checks the objects its pendingsets name
_CHECK_CONCURRENCY = 16
JSON = "application/json"


@dataclass
class AbortResult:
    """What a job abort (or rollback) removed."""

    job_id: str
    uploads_aborted: int = 0
    objects_deleted: int = 0


async def job_is_active(ctx: JobContext) -> bool:
    """True while the job's ``job.json`` exists (set up, not yet committed or aborted)."""
    return await ctx.engine.head_object(ctx.dest.bucket, ctx.layout.marker) is not None


async def read_journal(ctx: JobContext) -> Journal | None:
    """The job's journal, checked field by field; RecordFormatError if malformed,
    JournalError if it is another job's."""
    dest, where = ctx.dest, ctx.dest.uri_of(ctx.layout.journal)
    data = await read_optional(
        ctx.engine, dest.bucket, ctx.layout.journal, max_size=caps.JOURNAL_CAP
    )
    if data is None:
        return None
    try:
        j = Journal.from_json(data, location=where)
    except RecordFormatError as exc:
        raise malformed("journal.json", "journal", exc, dest.uri, ctx.job_id) from None
    if j.job_id != ctx.job_id:
        raise JournalError(f"journal at {where} is of job {j.job_id}, not {ctx.job_id}")
    return j


async def read_stored(ctx: JobContext) -> tuple[Journal, bytes | None, bytes | None, bytes | None]:
    """A resume's one round: the journal (NothingToResume when there is none), the plan and,
    for replace, its plan and touched partitions (None: not there, or not read)."""
    lay, bucket = ctx.layout, ctx.dest.bucket
    parts_record = ctx.replaces and ctx.scope is ConflictScope.PARTITIONS
    j, plan_data, replace_data, parts_data = await gather(
        read_journal(ctx),
        read_optional(ctx.engine, bucket, lay.plan, max_size=caps.PLAN_CAP),
        read_optional(ctx.engine, bucket, lay.replace, max_size=caps.REPLACE_PLAN_CAP)
        if ctx.replaces
        else nothing(),
        read_optional(ctx.engine, bucket, lay.partitions, max_size=caps.REPLACE_PLAN_CAP)
        if parts_record
        else nothing(),
    )
    if j is None:
        raise NothingToResume(
            f"job {ctx.job_id} has no journal at {ctx.dest.uri}: it "
            f"never started committing (nothing to resume; abort it)"
        )
    return j, plan_data, replace_data, parts_data


def partitions_record(items: list[str]) -> bytes:
    """The record of the partitions a job touched (what ``replace`` clears, and where
    an abort looks for the job's objects)."""
    return json.dumps({"version": 1, "partitions": items}, ensure_ascii=False).encode()


def parse_partitions_record(data: bytes, location: str) -> list[str]:
    """The partitions a replace-by-partition commit touches; RecordFormatError otherwise
    (strict JSON: deep nesting, NaN or bad UTF-8 are the record error too)."""
    d = load_json(data, "partitions record", location)
    try:
        items = d["partitions"]
        if d.get("version") != 1 or not isinstance(items, list):
            raise ValueError("bad version or entries")
        for item in items:  # each a k=v/... directory under the destination
            if not isinstance(item, str):
                raise ValueError(f"entry {item!r} is not a string")
            parse_hive_partition(check_relative_path(item))
        return list(items)
    except (ValueError, KeyError, TypeError, AttributeError, PathError) as exc:
        raise RecordFormatError(f"malformed partitions record: {exc}", location=location) from None


async def recorded_uploads(ctx: JobContext) -> AsyncIterator[list[PendingRecord]]:
    """The records of each of the job's pendingsets (in its own directory) that checks out
    to its end, one list per pendingset. One that fails validation is skipped with a
    warning: it proves nothing, and a commit completes nothing of a pendingset that fails."""
    engine, dest, lay = ctx.engine, ctx.dest, ctx.layout
    async for obj in engine.list_objects(dest.bucket, lay.pendingsets_dir):
        if not obj.key.endswith(PENDINGSET_SUFFIX):
            continue
        where = dest.uri_of(obj.key)
        recs: list[PendingRecord] = []
        try:
            async for item in scan_pendingset(engine, dest.bucket, obj.key, ctx.job_id):
                if isinstance(item, PendingRecord):
                    check_record(item, dest, ctx.job_id, where, partitioned=ctx.partitioned)
                    recs.append(item)
        except RecordFormatError as exc:
            log.warning("job %s: %s; the keys it names are left alone", ctx.job_id, exc)
            continue
        yield recs


async def delete_recorded_objects(ctx: JobContext, keep: Iterable[str] = ()) -> int:
    """Delete the objects the job completed, proven by its records: listed by one of its
    valid pendingsets, named by its rule, not in ``keep``, and still the object completing
    that upload made. Each goes with the ETag its HEAD proved (a conditional delete: a
    store that honours it keeps an object rewritten between the HEAD and the delete).
    Returns how many were deleted."""
    engine, bucket, job_id = ctx.engine, ctx.dest.bucket, ctx.job_id
    kept = set(keep)
    deleted = 0
    async for recs in recorded_uploads(ctx):
        doomed: dict[str, str] = {}

        async def check(rec: PendingRecord, doomed: dict[str, str] = doomed) -> None:
            u = rec.upload
            if u.key in kept or not key_carries_job(u.key, job_id):
                return
            info = await engine.head_object(bucket, u.key)
            if info is not None and is_ours(u, info, Check.DELETE):
                doomed[u.key] = info.etag.strip('"')
            elif info is not None:
                log.warning("job %s: %s is not the object it completed; left", job_id, u.uri)

        await bounded_map(recs, check, _CHECK_CONCURRENCY)
        if doomed:
            deleted += await engine.delete_objects(bucket, sorted(doomed), if_match=doomed)
    return deleted


async def abort_job_uploads(ctx: JobContext) -> int:
    """Abort every pending upload of the job; a CommitterError saying to run the abort
    again when any could not be aborted (the job's records are all still there)."""
    try:
        return await abort_uploads(ctx.engine, job_uploads(ctx.engine, ctx.dest, ctx.job_id))
    except CommitterError as exc:
        raise CommitterError(
            f"aborting job {ctx.job_id} at {ctx.dest.uri}: {exc}; the job and its records "
            f"are kept: run the abort again"
        ) from exc


async def abort_job_storage(
    ctx: JobContext,
    *,
    keep: Iterable[str] = (),
    lock: bool = False,
    taken: LockRecord | None = None,
) -> AbortResult:
    """Abort (or roll back) the job: its pending uploads first (by the naming rule: tasks
    that died before writing a record count too), then the marker (stragglers stop), its
    uploads again (a straggler's started in between), the objects its pendingsets prove it
    completed (but the ``keep`` keys), its records, journal last (with ``lock``: the
    destination's commit lock with it, see :mod:`.lock`; with ``taken``: the lock
    with it while it is that record, If-Match). Nothing of the job's
    records goes before every upload of it is aborted, so a failed abort leaves the job
    for the next one to find. Nothing that only mentions the job id elsewhere in its key
    is touched."""
    engine, dest, lay = ctx.engine, ctx.dest, ctx.layout
    res = AbortResult(ctx.job_id)
    res.uploads_aborted = await abort_job_uploads(ctx)
    await engine.delete_objects(dest.bucket, [lay.marker])
    res.uploads_aborted += await abort_job_uploads(ctx)
    res.objects_deleted = await delete_recorded_objects(ctx, keep)
    records = keys_under(engine, dest.bucket, lay.root, lambda k: True, skip=[lay.journal])
    await engine.delete_objects(dest.bucket, records)
    # once more, now that the records (a marker a stream straggler wrote again among them)
    # are gone: an upload made before that delete is listed here, a later one finds no
    # marker and aborts itself (TaskAttempt._still_active); the journal stays until then
    res.uploads_aborted += await abort_job_uploads(ctx)
    held = await read_lock(ctx) if lock and taken is None else None
    if held is not None and held.job_id == ctx.job_id:
        taken = held  # If-Match: a resend after a lost answer keeps a lock taken meanwhile
    if taken is not None:
        await delete_lock(ctx, taken, also=[lay.journal])
    else:
        await engine.delete_objects(dest.bucket, [lay.journal])
    await anyio.to_thread.run_sync(lambda: shutil.rmtree(ctx.local_job_dir, ignore_errors=True))
    return res


async def list_replacement(
    ctx: JobContext, prefixes: Sequence[str], every: Callable[[str], None] | None = None
) -> list[OldObject]:
    """The older objects under ``prefixes`` (not this job's, not records): what a replace
    deletes once the new files are complete, if they are still the same then. ``every``
    sees each key listed under them (records too)."""
    engine, dest = ctx.engine, ctx.dest
    found: dict[str, OldObject] = {}

    async def one(prefix: str) -> None:
        async for obj in engine.list_objects(dest.bucket, prefix):
            # a store (or gateway) that lists more than was asked (day=10/ for day=1/)
            # never widens what a replace deletes
            if not obj.key.startswith(prefix):
                continue
            if every is not None:
                every(obj.key)
            if is_foreign(dest, obj.key, ctx.job_id) and obj.etag:
                found[obj.key] = OldObject(obj.key, obj.etag.strip('"'))

    await bounded_map(prefixes, one, LIST_CONCURRENCY)
    return sorted(found.values(), key=lambda o: o.key)


def replace_records(
    ctx: JobContext, old: Sequence[OldObject], partitions: Iterable[str]
) -> list[Awaitable[str]]:
    """The writes that store a replace commit's plan (and, by partition, the touched
    partitions): sent with the journal, before anything is completed."""
    engine, dest, lay = ctx.engine, ctx.dest, ctx.layout
    puts: list[Awaitable[str]] = [
        engine.put_object(dest.bucket, lay.replace, replace_plan_record(old), content_type=JSON)
    ]
    if ctx.scope is ConflictScope.PARTITIONS:
        record = partitions_record(sorted(partitions))
        puts.append(engine.put_object(dest.bucket, lay.partitions, record, content_type=JSON))
    return puts


async def plan_replacement(ctx: JobContext, prefixes: Sequence[str]) -> list[OldObject]:
    """List the older objects under ``prefixes`` and store them as the job's replace plan
    (:func:`list_replacement`, then its record). Returns them."""
    old = await list_replacement(ctx, prefixes)
    await ctx.engine.put_object(
        ctx.dest.bucket, ctx.layout.replace, replace_plan_record(old), content_type=JSON
    )
    return old


async def read_replace_plan(ctx: JobContext, prefixes: Sequence[str]) -> list[OldObject]:
    """The stored replace plan, checked (:func:`parse_replace_plan`); RecordFormatError
    when it is missing or names anything but an older object under ``prefixes``."""
    where = ctx.dest.uri_of(ctx.layout.replace)
    data = await read_optional(
        ctx.engine, ctx.dest.bucket, ctx.layout.replace, max_size=caps.REPLACE_PLAN_CAP
    )
    if data is None:
        raise RecordFormatError("the replace plan is missing; nothing replaced", location=where)
    return parse_replace_plan(data, where, ctx.dest, ctx.job_id, prefixes)


async def run_replacement(
    ctx: JobContext,
    prefixes: Sequence[str],
    plan: Sequence[OldObject] | None = None,
    *,
    meanwhile: Awaitable[object] | None = None,
) -> int:
    """After the new files are complete: delete the planned older objects that are still
    the same (key and ETag); anything written after the plan stays. ``plan``: the one this
    process stored or read (else it is read back and checked). ``meanwhile`` (the
    journal's move to ``replacing``) runs while the objects are listed, and nothing is
    deleted before it returned. Each delete carries the object's planned ETag: a store
    that honours it (S3) keeps an object rewritten after that listing too; one that
    ignores it (moto, Ceph RGW 16) deletes it; one that refuses it gets the request again
    without. Returns how many were deleted."""
    engine, dest = ctx.engine, ctx.dest
    if plan is None:
        plan = await read_replace_plan(ctx, prefixes)
    planned = {o.key: o.etag for o in plan}
    doomed: list[str] = []  # at most the plan's objects

    async def one(prefix: str) -> None:
        async for obj in engine.list_objects(dest.bucket, prefix):
            if obj.key.startswith(prefix) and still_planned(planned, obj.key, obj.etag):
                del planned[obj.key]  # once, however many prefixes list it
                doomed.append(obj.key)

    await gather(meanwhile or nothing(), bounded_map(prefixes, one, LIST_CONCURRENCY))
    doomed.sort()
    return await delete_planned(ctx, doomed, {o.key: o.etag for o in plan})


async def delete_planned(ctx: JobContext, doomed: list[str], etags: Mapping[str, str]) -> int:
    """Delete the ``doomed`` keys of a replace plan in batches, each with its planned ETag
    (see :func:`run_replacement`); how many were deleted."""
    engine, dest = ctx.engine, ctx.dest
    deleted, conditional = 0, True
    for i in range(0, len(doomed), DELETE_BATCH):
        batch = doomed[i : i + DELETE_BATCH]
        if conditional:
            try:  # a store that honours the ETags keeps an object rewritten since the listing
                deleted += await engine.delete_objects(
                    dest.bucket, batch, if_match={k: etags[k] for k in batch}
                )
                continue
            except S3Error as exc:
                if exc.code not in _ETAG_REFUSED:
                    raise
                conditional = False  # refused whole, nothing deleted: once more without
                log.warning(
                    "job %s: %s refuses a DeleteObjects with ETags (%s); its replace deletes "
                    "without them, so an object rewritten between the last listing and the "
                    "delete is deleted too",
                    ctx.job_id,
                    dest.uri,
                    exc.code,
                )
        deleted += await engine.delete_objects(dest.bucket, batch)
    if deleted < len(doomed):
        log.info(
            "job %s: %d of the %d older objects its replace plan deletes were rewritten "
            "since the plan's last listing and are kept",
            ctx.job_id,
            len(doomed) - deleted,
            len(doomed),
        )
    return deleted


@contextlib.asynccontextmanager
async def releasing(
    ctx: JobContext, also: Sequence[str] = (), *, lock: bool = False, lock_etag: str | None = None
) -> AsyncIterator[Callable[[], Awaitable[int]]]:
    """The release of a job's storage after its commit (:func:`release_job_storage`),
    its two listings (records, pending uploads) started on entry: the block writes what
    must come first (``_SUCCESS``, the journal) meanwhile, then calls the release.
    Nothing is deleted or aborted before that call. ``also``: the caller's keys deleted
    in the journal's request (a streaming sink's note of the job: gone only with it).
    ``lock``: the destination's commit lock goes with the marker, before the journal's
    delete (while the journal exists no other job touches the lock), in a request of its
    own, only while it is the record this job wrote (``lock_etag``, its PutObject's ETag;
    None: read first, :func:`release_held`): never a lock another job took after a lost
    answer of this delete."""
    engine, dest, lay = ctx.engine, ctx.dest, ctx.layout
    skip = [lay.journal, lay.marker]
    records = keys_under(engine, dest.bucket, lay.root, lambda k: True, skip=skip)
    async with (
        prefetch(records) as listed,
        prefetch(job_uploads(engine, dest, ctx.job_id)) as uploads,
    ):

        async def doomed() -> AsyncIterator[str]:
            if not lock:  # else the marker goes with the lock
                yield lay.marker  # first: a straggler task attempt stops
            async for key in listed:
                yield key

        async def release() -> int:
            # the marker and the lock in one request: a job whose marker is gone has
            # released its lock, so a resume of its succeeded journal only finishes this
            # release (another job may have committed since: jobcommit's resume)
            _, aborted, _ = await gather(
                engine.delete_objects(dest.bucket, doomed()),
                abort_uploads(engine, uploads),
                release_held(ctx, lock_etag, also=[lay.marker]) if lock else nothing(),
            )
            # last: until this delete, a resume finds the journal and finishes the release.
            # Beside it, the job's uploads and records listed again now that the marker is
            # gone: a straggler's upload (or record) made after the first listings began
            # was made before the marker's delete (listed here) or finds the marker gone
            # and aborts itself (TaskAttempt._still_active). The marker once more: a stream
            # straggler may have written it again since (the sink's ensure_job); with the
            # caller's note it must not outlive the note
            _, late, _ = await gather(
                engine.delete_objects(dest.bucket, [lay.journal, lay.marker, *also]),
                abort_uploads(engine, job_uploads(engine, dest, ctx.job_id)),
                engine.delete_objects(
                    dest.bucket,
                    keys_under(engine, dest.bucket, lay.root, lambda k: True, skip=skip),
                ),
            )
            await anyio.to_thread.run_sync(
                lambda: shutil.rmtree(ctx.local_job_dir, ignore_errors=True)
            )
            return int(aborted) + int(late)

        yield release


async def release_job_storage(
    ctx: JobContext, *, lock: bool = False, lock_etag: str | None = None
) -> int:
    """After a successful commit (or for cleanup): the marker (stragglers stop) and the
    job's records deleted and its leftover uploads aborted, all at once (neither depends
    on the other), the journal last. Returns uploads aborted."""
    async with releasing(ctx, lock=lock, lock_etag=lock_etag) as release:
        return await release()


def cut_short(ctx: JobContext, what: str, state: State) -> JournalError:
    """The error for a record (``plan``, ``replace``, ``partitions``) that a commit stores
    with its journal, before its first complete, found missing by resume: in a state that
    can abort, the commit stopped before completing anything."""
    where = ctx.dest.uri_of(getattr(ctx.layout, what))
    head = f"job {ctx.job_id}: its journal ({state.value}) has no {what} record ({where})"
    if can_abort(state):
        return JournalError(
            f"{head}: the commit stopped before completing anything; abort it "
            f"(zerorename jobs abort {ctx.dest.uri} {ctx.job_id})"
        )
    return JournalError(f"{head}; restore it to resume")


def stored_replace_records(
    ctx: JobContext, state: State, plan: bytes | None, partitions: bytes | None
) -> tuple[list[str], list[OldObject]]:
    """For a resumed replace commit: the touched partitions (scope ``partitions``) and the
    replace plan as stored, checked before anything is completed or deleted."""
    parts: list[str] = []
    if ctx.scope is ConflictScope.PARTITIONS:
        if partitions is None:
            raise cut_short(ctx, "partitions", state)
        parts = parse_partitions_record(partitions, ctx.dest.uri_of(ctx.layout.partitions))
    where = ctx.dest.uri_of(ctx.layout.replace)
    if plan is None:
        if state is State.COMPLETING:
            raise cut_short(ctx, "replace", state)
        raise RecordFormatError("the replace plan is missing; nothing replaced", location=where)
    prefixes = plan_conflicts(ConflictMode.REPLACE, ctx.scope, ctx.dest, parts).replace_prefixes
    return parts, parse_replace_plan(plan, where, ctx.dest, ctx.job_id, prefixes)


def success_names_commit(data: bytes, dest: Destination, job_id: str, j: Journal | None) -> bool:
    """Whether ``_SUCCESS`` ``data`` is the one job ``job_id``'s commit (journal ``j``)
    writes: it names the job, and, given the journal, lists the files that journal lists.
    A _SUCCESS of an earlier run of the same job id (set up again) lists that run's files:
    no proof this commit finished. One that cannot be parsed, or a journal with no file
    names, is judged by the job id alone (a refusal, never a deletion, follows from it)."""
    if f'"{job_id}"'.encode() not in data:
        return False
    if j is None or not j.filenames:
        return True
    try:
        got = SuccessData.from_json(data)
    except RecordFormatError:
        return True
    names = list(got.filenames)  # S3A's "/" + key, or zerorename 0.1's relative names
    want = [success_filename(dest.key(rel)) for rel in j.filenames]
    return got.job_id != job_id or names in (want, list(j.filenames))


async def success_of_job(ctx: JobContext, j: Journal | None = None) -> bool:
    """A _SUCCESS at the destination names the job (and, given its journal ``j``, this
    commit of it: :func:`success_names_commit`): its commit completed every file."""
    data = await read_optional(
        ctx.engine, ctx.dest.bucket, ctx.layout.success, max_size=caps.SUCCESS_CAP
    )
    return data is not None and success_names_commit(data, ctx.dest, ctx.job_id, j)


async def check_abort_unread(ctx: JobContext, exc: RecordFormatError) -> None:
    """An abort with a malformed journal: its state is unknown, so abort only while the
    store proves the commit cannot have passed the point of no return (job still active,
    no _SUCCESS of the job, a conflict mode that deletes no older file)."""
    why = ""
    if ctx.replaces:
        why = "the job replaces older files, which its commit may have deleted already"
    elif not await job_is_active(ctx):
        why = "the job's marker is gone: its commit may have succeeded"
    elif await success_of_job(ctx):
        why = "a _SUCCESS of the job exists: its commit succeeded"
    if why:
        raise JournalError(
            f"job {ctx.job_id}: abort refused: {exc.location} is malformed and "
            f"{why}; repair the journal (or remove it once sure) and retry"
        ) from exc


async def rollback_job(
    ctx: JobContext,
    aborting: Callable[[Journal], Awaitable[None]],
    *,
    keep: Iterable[str] = (),
    check_success: bool = True,
) -> AbortResult:
    """Abort every pending upload of the job and delete every object it completed and its
    records: afterwards nothing of the job is left. Refused once old files were
    deleted (replace) or _SUCCESS was written (``check_success``: look for it even
    when the journal did not record it yet). ``keep``: keys not deleted (another
    writer's objects found at the job's keys). ``aborting(journal)`` moves the journal
    to ``rolling_back`` and stores it. The destination's commit lock goes with the
    journal when it names the job and the journal is not another job's tombstone; one
    with no journal is fenced first; one the job took again after another job fenced it
    (:func:`.lock.taken_after_fence`) goes too, If-Match (:mod:`.lock`)."""
    j_read, lock_read = await gather(caught(read_journal(ctx)), caught(read_lock(ctx)))
    try:
        j = j_read.get()
    except RecordFormatError as exc:
        await check_abort_unread(ctx, exc)
        j = None  # proven safe to abort without it; it is deleted last (the lock stays)
        lock_read = Outcome(None)
    holder = lock_read.get()
    lock = holder is not None and holder.job_id == ctx.job_id
    if lock and j is None:  # fence itself first: no other job's takeover races this
        with contextlib.suppress(LockLost):
            await first_journal(ctx, tombstone(ctx.job_id, ctx.job_id))
        j = await read_journal(ctx)
    taken = holder if taken_after_fence(j, holder, ctx.job_id) else None
    lock = lock and (j is None or j.fenced_by in (None, ctx.job_id))
    if j is not None:
        done = check_success and j.state is State.COMPLETING and await success_of_job(ctx, j)
        if not can_abort(j.state) or done:
            state = "succeeded (its _SUCCESS is written)" if done else j.state.value
            raise JournalError(
                f"job {ctx.job_id} is in state {state}: its files are "
                f"complete and older files may be gone; resume it instead of aborting"
            )
        await aborting(j)
    return await abort_job_storage(ctx, keep=keep, lock=lock, taken=taken)
