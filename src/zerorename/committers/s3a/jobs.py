"""Hadoop S3A magic jobs under a destination, from Python: list, show, resume, abort.

S3A's job commit cannot be resumed: when its driver dies mid-commit, the job's records sit
in ``dest/__magic_job-<uuid>/`` (Hadoop 3.4) or ``dest/__magic/job-<uuid>/`` (Hadoop 3.3,
in a directory every job on the destination shares; layouts: :mod:`.layout`), some of
its files are visible and the rest are pending multipart uploads. ``resume`` completes
every upload of the task pendingsets of the job's attempt, aborts the uploads of task
attempts that never committed, writes an S3A ``_SUCCESS`` and deletes the job's directory.
``abort`` aborts every pending upload the job's records name and deletes the job's
directory; it deletes no object: S3A keys carry no job id, and an object identical to what
completing the job's upload made (same key, size and multipart ETag) may be a re-run's, so
each is kept and reported.

A job is committed when the destination's ``_SUCCESS`` names it, or when every upload its
committed tasks recorded is a completed object (its commit finished and a later job's
``_SUCCESS`` replaced its own, or its cleanup died): abort refuses it, and resume only
finishes its cleanup, writing its ``_SUCCESS`` only where no newer one exists. Every record
is read and checked before the first request that changes anything; a bad one changes
nothing. The records are held in memory while a command runs (as S3A's own job commit
holds them).
"""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from zerorename.committers.codec.success import SuccessData, success_filename
from zerorename.committers.commit.journal import Journal, State, can_abort
from zerorename.committers.commit.storage import success_names_commit
from zerorename.committers.errors import CommitterError, NothingToResume, wrap_engine_errors
from zerorename.committers.objectstore import JOURNAL_CAP, SUCCESS_CAP, Store
from zerorename.committers.paths import Destination, JobLayout
from zerorename.committers.s3a.abort import (
    S3AAbortResult,
    abort_s3a_job,
    delete_job_directory,
    fail_batch,
    read_note,
    refuse_if_noted,
)
from zerorename.committers.s3a.layout import (
    FLAT,
    S3AJobLayout,
    S3ALayoutKind,
    attempt_label,
    job_id_of_dir,
)
from zerorename.committers.s3a.read import (
    S3AJobScan,
    UploadState,
    all_completed,
    find_s3a_job,
    open_scan,
    pending_index,
    read_commits,
    read_success,
    rolled_back,
    scan_job,
    shared_job_ids,
    states_of,
)
from zerorename.committers.store import Check, read_optional

#: keys of one state a ``show`` lists (all are counted)
SHOW_LIMIT = 100
#: what S3A's magic committer calls itself in ``_SUCCESS``
S3A_MAGIC = "magic"

Report = Callable[[str], None]
#: what an abort that found nothing to roll back says (:func:`rolled_back`)
NOTHING_ROLLED_BACK = (
    "no upload its committed tasks recorded was pending, so nothing was rolled back (it "
    "may have committed and its output since been replaced or deleted, or its uploads were "
    "aborted)"
)
#: what ``jobs abort`` of a job with no records left (only uploads named as its) says
UNRECORDED = (
    "so nothing was rolled back (it committed or was aborted before, or is an S3A job "
    "whose directory is gone)"
)


@dataclass(frozen=True)
class S3AJobEntry:
    """One S3A magic job found under a destination."""

    job_id: str
    attempts: tuple[int, ...]
    pendingsets: int
    pending_records: int
    objects: int
    created: float
    layout: S3ALayoutKind = S3ALayoutKind.HADOOP_34
    #: ``jobs abort`` began and was cut short (its note is there: :mod:`.abort`)
    abort_begun: bool = False

    @property
    def state(self) -> str:
        said = f"{self.pendingsets} committed tasks, {self.pending_records} open task records"
        said += ", an abort began (run jobs abort again)" if self.abort_begun else ""
        return said + (
            ", in __magic/ (Hadoop 3.3)" if self.layout is S3ALayoutKind.HADOOP_33 else ""
        )


async def list_s3a_jobs(store: Store, dest: Destination) -> AsyncIterator[S3AJobEntry]:
    """S3A magic jobs directly under the destination (directories holding ``job-<uuid>/``
    and none of zerorename's own records), then Hadoop 3.3's, each ``job-<uuid>/`` in
    ``dest/__magic/`` (an id in both layouts is listed twice: commands refuse it)."""
    async with wrap_engine_errors(f"listing S3A jobs under {dest.uri}"):
        layouts = [
            S3AJobLayout(dest, job_id)
            async for job_id in _ids(store.list_prefixes(dest.bucket, dest.list_prefix), dest)
        ]
        layouts += [
            S3AJobLayout(dest, job_id, S3ALayoutKind.HADOOP_33)
            for job_id in await shared_job_ids(store, dest)
        ]
        for layout in layouts:
            scan = await scan_job(store, layout)
            if scan.s3a and not scan.zerorename:
                yield S3AJobEntry(
                    layout.job_id,
                    tuple(scan.attempts),
                    sum(len(v) for v in scan.pendingsets.values()),
                    len(scan.pendings),
                    scan.objects,
                    scan.created,
                    layout.kind,
                    scan.abort_note,
                )


async def _ids(subs: AsyncIterator[str], dest: Destination) -> AsyncIterator[str]:
    async for sub in subs:
        job_id = job_id_of_dir(dest, sub)
        if job_id is not None:
            yield job_id


def _attempt_to_finish(scan: S3AJobScan) -> int:
    """The one job attempt whose pendingsets a resume completes. None is refused (no task
    committed: S3A's job commit, which runs after every task committed, never started, and
    "finishing" it would publish an empty job), and so are pendingsets in two attempts
    (which attempt's commit died is unknown)."""
    attempts = scan.attempts
    if not attempts:
        raise NothingToResume(
            f"S3A job {scan.layout.job_id} has no committed task: its job commit never "
            "started, there is nothing to finish; `zerorename jobs abort` rolls it back"
        )
    if len(attempts) > 1:
        names = ", ".join(attempt_label(a) for a in attempts)
        raise CommitterError(
            f"S3A job {scan.layout.job_id} has committed tasks in attempts {names}: resume "
            "cannot tell which attempt's commit to finish; `zerorename jobs abort` rolls it back"
        )
    return attempts[0]


def newer_success(success: float | None, completed: Sequence[float]) -> bool:
    """A ``_SUCCESS`` (its last-modified time; None: none there) written at or after the
    last of the job's completed objects: a later job's, kept (pure; a tie keeps it)."""
    return success is not None and (not completed or success >= max(completed))


def _limited(items: list[str]) -> list[str]:
    return items[:SHOW_LIMIT] + (
        [f"... {len(items) - SHOW_LIMIT} more"] if len(items) > SHOW_LIMIT else []
    )


async def show_s3a_job(store: Store, dest: Destination, job_id: str) -> dict[str, Any]:
    """What an S3A job left: its attempts and records, which uploads are completed (the
    object exists and is what completing it makes), pending, or missing, and whether the
    destination's ``_SUCCESS`` names it. Reads only."""
    async with wrap_engine_errors(f"reading S3A job {job_id} under {dest.uri}"):
        scan = await open_scan(store, dest, job_id)
        attempts = sorted(
            set(scan.attempts) | {e.attempt for e in scan.pendings if e.attempt is not None}
        )
        commits = await read_commits(store, scan, attempts)
        index = await pending_index(store, dest)
        states, _ = await states_of(store, commits, index, Check.RESUME)
        success = await read_success(store, dest)
        note = await read_note(store, scan)
    by_state: dict[str, list[str]] = {s.value: [] for s in UploadState}
    committed = {(c.record.upload.key, c.record.upload.upload_id) for c in commits if c.committed}
    open_pending: set[tuple[str, str]] = set()
    for c, s in zip(commits, states, strict=True):
        u = c.record.upload
        if c.committed:
            by_state[s.value].append(u.uri)
        elif s is UploadState.PENDING and (u.key, u.upload_id) not in committed:
            open_pending.add((u.key, u.upload_id))
    named = {(c.record.upload.key, c.record.upload.upload_id) for c in commits}
    named_by_success = success is not None and success.job_id == job_id
    # an abort began: it refused a committed job, so the job is not (it refuses resume)
    every = note is None and all_completed(
        [s for c, s in zip(commits, states, strict=True) if c.committed]
    )
    begun = (
        {}
        if note is None
        else {
            "abortBegun": scan.layout.uri(scan.layout.abort_note),
            "keptByAbort": _limited(
                sorted(dest.uri_of(k) for k in [*note.maybe_completed, *note.kept])
            ),
        }
    )
    # a 3.3 job's records may sit in no attempt directory: no attempt to name
    layout = {"layout": scan.layout.kind.value} if scan.layout.shared else {}
    return {
        "jobId": job_id,
        "kind": "s3a-magic",
        **layout,
        "directory": scan.layout.uri(scan.layout.root),
        "attempts": [attempt_label(a) for a in attempts if a != FLAT],
        "committedTasks": sum(len(v) for v in scan.pendingsets.values()),
        "openTaskRecords": len(scan.pendings),
        "objects": scan.objects,
        "committed": named_by_success or every,
        "committedBecause": "_SUCCESS names it"
        if named_by_success
        else "every upload its committed tasks recorded is a completed object"
        if every
        else None,
        "uploads": {k: len(v) for k, v in by_state.items()},
        **{k: _limited(v) for k, v in by_state.items()},
        "openTaskUploadsPending": len(open_pending),
        "otherPendingUploadsUnderDestination": len(index - named),
        **begun,
    }


async def job_committed(store: Store, dest: Destination, job_id: str) -> bool:
    """Whether ``jobs abort`` of the job refuses because it committed (read only): an S3A
    job that ``_SUCCESS`` names or whose every committed upload is a completed object; a
    zerorename job whose journal is past the point of no return. Anything unreadable:
    False (no proof)."""
    lay = JobLayout(dest, job_id)
    committed = False
    try:
        async with wrap_engine_errors(f"reading job {job_id} under {dest.uri}"):
            if await find_s3a_job(store, dest, job_id) is not None:
                committed = bool((await show_s3a_job(store, dest, job_id))["committed"])
            else:
                data = await read_optional(store, dest.bucket, lay.journal, max_size=JOURNAL_CAP)
                j = (
                    None
                    if data is None
                    else Journal.from_json(data, location=dest.uri_of(lay.journal))
                )
                committed = j is not None and not can_abort(j.state)
                if j is not None and j.state is State.COMPLETING:
                    # as abort refuses it: its _SUCCESS names it (the journal's
                    # `succeeded` was not stored yet)
                    ok = await read_optional(store, dest.bucket, lay.success, max_size=SUCCESS_CAP)
                    committed = ok is not None and success_names_commit(ok, dest, job_id, j)
    except CommitterError:
        return False
    return committed


@dataclass(frozen=True)
class S3AResumeResult:
    """What ``resume`` did to an S3A job."""

    job_id: str
    files: int
    bytes: int
    completed_now: int
    already_completed: int
    open_uploads_aborted: int
    records_deleted: int
    #: False: a newer ``_SUCCESS`` (a later job's) was there and kept
    success_written: bool = True


#: seconds between two progress lines of a long batch
PROGRESS_INTERVAL = 5.0


def _ticker(verb: str, total: int, say: Report) -> Callable[[Any, BaseException | None], None]:
    """An ``on_result`` that reports a long batch's progress at most every
    :data:`PROGRESS_INTERVAL` seconds (a silent commit of hours looks hung)."""
    done = 0
    last = time.monotonic()

    def tick(_: Any, exc: BaseException | None) -> None:
        nonlocal done, last
        done += exc is None
        now = time.monotonic()
        if now - last >= PROGRESS_INTERVAL:
            last = now
            say(f"{verb} {done}/{total} uploads")

    return tick


async def resume_s3a_job(
    store: Store,
    dest: Destination,
    job_id: str,
    *,
    concurrency: int | None = None,
    report: Report | None = None,
) -> S3AResumeResult:
    """Finish an S3A job whose job commit died: complete every pending upload of its
    committed tasks (one already completed counts as done), abort the uploads of task
    attempts that never committed, write an S3A ``_SUCCESS``, delete the job's directory.
    Refused, with nothing changed, when a record is bad, an upload is missing, no task
    committed, or tasks committed in two application attempts."""
    say = report or (lambda _: None)
    async with wrap_engine_errors(f"resuming S3A job {job_id} under {dest.uri}"):
        scan = await open_scan(store, dest, job_id)
        refuse_if_noted(scan, "be resumed")
        success = await read_success(store, dest)
        if success is not None and success.job_id == job_id:
            return await _finish_cleanup(store, scan, success, concurrency, say)
        attempt = _attempt_to_finish(scan)
        others = {e.attempt for e in scan.pendings if e.attempt is not None} - {attempt}
        attempts = [attempt, *sorted(others)]
        commits = await read_commits(store, scan, attempts)
        mine = [c for c in commits if c.committed]
        index = await pending_index(store, dest)
        states, infos = await states_of(store, mine, index, Check.RESUME)
        missing = [c for c, s in zip(mine, states, strict=True) if s is UploadState.MISSING]
        if missing:
            u = missing[0].record.upload
            raise CommitterError(
                f"S3A job {job_id}: {len(missing)} uploads are neither pending nor completed, "
                f"e.g. {u.uri} (upload {u.upload_id}): the job cannot be finished; "
                "`zerorename jobs abort` rolls it back"
            )
        todo = [
            c.record.upload for c, s in zip(mine, states, strict=True) if s is UploadState.PENDING
        ]
        newer = False
        if not todo:  # the job had committed: its _SUCCESS only where none is newer
            there = await store.head_object(dest.bucket, scan.layout.success)
            done = [i.last_modified for i in infos if i is not None]
            newer = newer_success(there.last_modified if there else None, done)
        say(f"completing {len(todo)} uploads ({len(mine) - len(todo)} already completed)")
        fail_batch(
            "completing the job's uploads",
            await store.complete_many(
                todo, concurrency=concurrency, on_result=_ticker("completed", len(todo), say)
            ),
        )
        kept = {c.record.upload.upload_id for c in mine}
        strays = {
            (u.key, u.upload_id): u
            for u in (c.record.upload for c in commits if not c.committed)
            if u.upload_id not in kept and (u.key, u.upload_id) in index
        }
        if strays:
            say(f"aborting {len(strays)} uploads of task attempts that never committed")
            fail_batch(
                "aborting uncommitted task attempts' uploads",
                await store.abort_many(list(strays.values()), concurrency=concurrency),
            )
        total = sum(c.record.upload.length for c in mine)
        success = SuccessData(
            job_id=job_id,
            committer=S3A_MAGIC,
            description=f"S3A magic job {job_id}, its commit finished by zerorename jobs resume",
            job_id_source="S3A job directory",
            hostname=socket.gethostname(),
            timestamp=time.time(),
            metrics={
                "uploads": len(mine),
                "bytes": total,
                "pendingsets": len(scan.pendingsets[attempt]),
                "completed_by_resume": len(todo),
            },
            diagnostics={
                "zerorename.action": "jobs resume",
                "zerorename.already_completed": str(len(mine) - len(todo)),
            },
            filenames=[success_filename(c.record.upload.key) for c in mine],
        )
        if newer:
            say(
                f"job {job_id} had committed; a newer _SUCCESS (a later job's) is at "
                f"{dest.uri}/_SUCCESS: kept as it is"
            )
        else:
            await store.put_object(dest.bucket, scan.layout.success, success.to_json())
        deleted = await delete_job_directory(store, scan.layout, scan.keys)
    return S3AResumeResult(
        job_id,
        len(mine),
        total,
        len(todo),
        len(mine) - len(todo),
        len(strays),
        deleted,
        not newer,
    )


async def _finish_cleanup(
    store: Store, scan: S3AJobScan, success: SuccessData, concurrency: int | None, say: Report
) -> S3AResumeResult:
    """Resume of a job its ``_SUCCESS`` names: every upload of its committed tasks was
    completed before that was written (S3A's order and ours), and its directory may be
    partly deleted, so the pendingsets left prove nothing more: abort the open task
    attempts' uploads still pending, keep ``_SUCCESS`` as it is, delete the directory."""
    lay = scan.layout
    say(f"{lay.dest.uri}/_SUCCESS names job {lay.job_id}: finishing its cleanup")
    attempts = sorted({e.attempt for e in scan.pendings if e.attempt is not None})
    opened = await read_commits(store, scan, attempts, pendingsets=False)
    index = await pending_index(store, lay.dest)
    strays = {
        (u.key, u.upload_id): u
        for u in (c.record.upload for c in opened)
        if (u.key, u.upload_id) in index
    }
    fail_batch(
        "aborting uncommitted task attempts' uploads",
        await store.abort_many(list(strays.values()), concurrency=concurrency),
    )
    deleted = await delete_job_directory(store, lay, scan.keys)
    files = len(success.filenames)
    total = int(success.metrics.get("bytes", 0))
    return S3AResumeResult(lay.job_id, files, total, 0, files, len(strays), deleted, False)


__all__ = [
    "NOTHING_ROLLED_BACK",
    "UNRECORDED",
    "S3AAbortResult",
    "S3AJobEntry",
    "S3AResumeResult",
    "abort_s3a_job",
    "all_completed",
    "job_committed",
    "list_s3a_jobs",
    "resume_s3a_job",
    "rolled_back",
    "show_s3a_job",
]
