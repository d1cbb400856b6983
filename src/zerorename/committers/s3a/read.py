"""Reading an S3A magic job's directory and records, for :mod:`.jobs`: one listing of
its directory (classified by :mod:`.layout`), every record it holds read and checked
(another job's record, a target outside the destination or in a magic directory, a key
named twice: refused), and where each recorded upload stands (pending, completed,
missing). Reads only. A job is found in either layout (:class:`S3ALayoutKind`): Hadoop
3.4's ``__magic_job-<uuid>/`` or Hadoop 3.3's ``__magic/job-<uuid>/``; an id in both is
refused (which job is meant cannot be told)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from zerorename.committers import objectstore as caps
from zerorename.committers.codec.pending import PendingRecord, PendingSetHeader
from zerorename.committers.codec.success import SuccessData
from zerorename.committers.errors import CommitterError, JobNotFound, RecordFormatError
from zerorename.committers.objectstore import Store
from zerorename.committers.paths import JOB_MARKER, JOURNAL_NAME, Destination
from zerorename.committers.s3a.layout import (
    FLAT,
    S3AJobLayout,
    S3AKey,
    S3AKind,
    S3ALayoutKind,
    check_output_key,
    job_id_of_shared_dir,
    owns_record_job,
    s3a_id_problem,
    shared_magic_dir,
)
from zerorename.committers.store import (
    Check,
    bounded_map,
    is_ours,
    read_optional,
    scan_pendingset,
)
from zerorename.engine.results import ObjectInfo

#: requests at once while reading records and looking at objects
READ_CONCURRENCY = 16
#: zerorename's own records at the top of a ``__magic_job-<id>/`` directory
_ZERORENAME_NAMES = (JOB_MARKER, JOURNAL_NAME, "pendingsets/", "tasks/")


@dataclass
class S3AJobScan:
    """One listing of an S3A job's directory, classified."""

    layout: S3AJobLayout
    pendingsets: dict[int, list[str]] = field(default_factory=dict)
    pendings: list[S3AKey] = field(default_factory=list)
    objects: int = 0
    created: float = 0.0
    #: keys of zerorename's own job layout found in the same directory
    zerorename: bool = False
    #: something under ``job-<uuid>/``: S3A made this directory
    s3a: bool = False

    #: ``jobs abort`` began and noted what it keeps (:attr:`S3AJobLayout.abort_note`)
    abort_note: bool = False
    #: every key the listing found: what a command that deletes the directory deletes (a
    #: record written after the listing, such as a new application attempt's, stays)
    keys: list[str] = field(default_factory=list)

    #: the attempts (``NN``, or :data:`FLAT`) any record of the job sits in
    seen_attempts: set[int] = field(default_factory=set)

    @property
    def attempts(self) -> list[int]:
        return sorted(self.pendingsets)

    @property
    def mixed(self) -> bool:
        """A Hadoop 3.3 directory with records both in ``<NN>/`` attempt directories and
        right in the job's directory: two releases' layouts, which cannot be one job's."""
        return FLAT in self.seen_attempts and len(self.seen_attempts) > 1


async def scan_job(store: Store, layout: S3AJobLayout) -> S3AJobScan:
    """List the job's directory once (``root`` ends in '/': never a sibling job's)."""
    scan = S3AJobScan(layout)
    zr = tuple(layout.root + name for name in _ZERORENAME_NAMES) if not layout.shared else ()
    async for obj in store.list_objects(layout.dest.bucket, layout.root):
        entry = layout.classify(obj.key)
        scan.objects += 1
        scan.keys.append(obj.key)
        if obj.last_modified and (not scan.created or obj.last_modified < scan.created):
            scan.created = obj.last_modified
        if obj.key.startswith(layout.attempts_dir):
            scan.s3a = True
        if zr and obj.key.startswith(zr):
            scan.zerorename = True
        if obj.key == layout.abort_note:
            scan.abort_note = True
        if entry.kind in (S3AKind.PENDINGSET, S3AKind.PENDING) and entry.attempt is not None:
            scan.seen_attempts.add(entry.attempt)
        if entry.kind is S3AKind.PENDINGSET and entry.attempt is not None:
            scan.pendingsets.setdefault(entry.attempt, []).append(obj.key)
        elif entry.kind is S3AKind.PENDING:
            scan.pendings.append(entry)
    return scan


async def open_scan(store: Store, dest: Destination, job_id: str) -> S3AJobScan:
    """The scan of an S3A job that exists, in one layout, and is S3A's only, else a
    one-line error."""
    layout = await find_s3a_job(store, dest, job_id)
    if layout is None:
        raise JobNotFound(f"no S3A job {job_id} under {dest.uri} (see `zerorename jobs list`)")
    scan = await scan_job(store, layout)
    if not scan.s3a:
        raise JobNotFound(f"no S3A job {job_id} under {dest.uri} (see `zerorename jobs list`)")
    if scan.zerorename:
        raise CommitterError(
            f"{layout.uri(layout.root)} holds both zerorename's and S3A's records: refused; "
            "look at it with `zerorename jobs show` and clean it up by hand"
        )
    if scan.mixed:
        raise CommitterError(
            f"{layout.uri(layout.root)} holds records both in attempt directories (<NN>/) and "
            "outside them (two Hadoop releases' layouts, not one job's): refused; look at "
            "them with `zerorename inspect` and clean the directory up by hand"
        )
    return scan


async def is_s3a_job(store: Store, dest: Destination, job_id: str) -> bool:
    """True when ``dest/__magic_job-<job_id>/job-<job_id>/`` exists (one listing): a
    Hadoop 3.4 job (:func:`find_s3a_job` finds either layout)."""
    if s3a_id_problem(job_id) is not None:
        return False
    layout = S3AJobLayout(dest, job_id)
    async for sub in store.list_prefixes(dest.bucket, layout.root):
        if sub == layout.attempts_dir:
            return True
    return False


async def _exists_under(store: Store, bucket: str, prefix: str) -> bool:
    async for _ in store.list_objects(bucket, prefix):
        return True
    return False


async def find_s3a_job(store: Store, dest: Destination, job_id: str) -> S3AJobLayout | None:
    """The layout of S3A job ``job_id`` under ``dest``: Hadoop 3.4's when
    ``__magic_job-<id>/job-<id>/`` exists, Hadoop 3.3's when ``__magic/job-<id>/`` holds
    anything, None when neither. Refused (CommitterError, one line) when the 3.3 directory
    exists next to a ``__magic_job-<id>/`` (an S3A or a zerorename job of the same id):
    which one a command means cannot be told."""
    if s3a_id_problem(job_id) is not None:
        return None
    new = S3AJobLayout(dest, job_id)
    old = S3AJobLayout(dest, job_id, S3ALayoutKind.HADOOP_33)
    if not await _exists_under(store, dest.bucket, old.root):
        return new if await is_s3a_job(store, dest, job_id) else None
    if await _exists_under(store, dest.bucket, new.root):
        raise CommitterError(
            f"job {job_id} is both {dest.uri_of(new.root)} and Hadoop 3.3's "
            f"{dest.uri_of(old.root)}: refused, which one is meant cannot be told; look at "
            "both with `zerorename inspect` and remove the one that is not wanted by hand"
        )
    return old


async def shared_job_ids(store: Store, dest: Destination) -> list[str]:
    """The ids of the Hadoop 3.3 jobs in ``dest/__magic/`` (one listing of its
    directories; anything else in it, such as 3.3.0's ``app-attempt-NNNN/``, is no job)."""
    top = shared_magic_dir(dest)
    out = []
    async for sub in store.list_prefixes(dest.bucket, top):
        job = job_id_of_shared_dir(dest, sub)
        if job is not None:
            out.append(job)
    return out


async def drop_shared_dir_if_empty(store: Store, dest: Destination) -> int:
    """Delete the directory marker ``dest/__magic/`` when it is all that is left in that
    shared directory (another job's records, or anything else, keep it); the number of
    objects deleted (0 or 1). Deleting a marker never removes another key, so a job that
    starts in the meantime loses nothing."""
    top = shared_magic_dir(dest)
    keys = []
    async for obj in store.list_objects(dest.bucket, top):
        keys.append(obj.key)
        if len(keys) > 1:
            return 0
    if keys != [top]:
        return 0
    return await store.delete_objects(dest.bucket, keys)


@dataclass(frozen=True)
class S3ACommit:
    """One upload an S3A job's record names, checked."""

    record: PendingRecord
    #: the record's object (a pendingset or a ``.pending``)
    source: str
    #: True: from a committed task's pendingset (job commit completes it)
    committed: bool
    #: the job attempt (``NN``) whose record it is
    attempt: int | None = None


def _check_commit(
    layout: S3AJobLayout, rec: PendingRecord, location: str, want_key: str | None
) -> None:
    """Refuse a record the job may not act on: another job's, a target outside the
    destination, or (a ``.pending``) a target other than its path says."""
    if not owns_record_job(layout.job_id, rec.job_id):
        raise RecordFormatError(
            f"belongs to job {rec.job_id!r}, not to S3A job {layout.job_id}", location=location
        )
    u = rec.upload
    problem = check_output_key(layout.dest, u.bucket, u.key)
    if problem is not None:
        raise RecordFormatError(f"refused: {problem}", location=location)
    if want_key is not None and u.key != want_key:
        raise RecordFormatError(
            f"names s3://{u.bucket}/{u.key}, but its path says s3://{u.bucket}/{want_key}",
            location=location,
        )


async def _read_pendingset(
    store: Store, layout: S3AJobLayout, key: str, attempt: int
) -> list[S3ACommit]:
    location = layout.uri(key)
    out: list[S3ACommit] = []
    async for item in scan_pendingset(store, layout.dest.bucket, key, job_id=None):
        if isinstance(item, PendingSetHeader):
            if not owns_record_job(layout.job_id, item.job_id):
                raise RecordFormatError(
                    f"belongs to job {item.job_id!r}, not to S3A job {layout.job_id}",
                    location=location,
                )
        else:
            _check_commit(layout, item, location, None)
            out.append(S3ACommit(item, location, True, attempt))
    return out


async def _read_pending(store: Store, layout: S3AJobLayout, entry: S3AKey) -> S3ACommit:
    location = layout.uri(entry.key)
    want = layout.final_key(entry)
    if want is None:
        raise RecordFormatError("its path maps to no output key: refused", location=location)
    data = await read_optional(store, layout.dest.bucket, entry.key, max_size=caps.PENDING_CAP)
    if data is None:
        raise RecordFormatError("vanished while the job was read", location=location)
    rec = PendingRecord.from_json(data, location=location)
    _check_commit(layout, rec, location, want)
    return S3ACommit(rec, location, False, entry.attempt)


async def read_commits(
    store: Store, scan: S3AJobScan, attempts: list[int], *, pendingsets: bool = True
) -> list[S3ACommit]:
    """Every upload the records of ``attempts`` name (with ``pendingsets``, the committed
    tasks', then the open task attempts' ``.pending`` records), each checked; a key listed
    by two committed records is refused."""
    lay = scan.layout
    keys = [(a, k) for a in attempts for k in sorted(scan.pendingsets.get(a, []))]
    if not pendingsets:
        keys = []
    entries = sorted((e for e in scan.pendings if e.attempt in attempts), key=lambda e: e.key)
    sets: dict[int, list[S3ACommit]] = {}
    singles: dict[int, S3ACommit] = {}

    async def one_set(i: int) -> None:
        sets[i] = await _read_pendingset(store, lay, keys[i][1], keys[i][0])

    async def one_pending(i: int) -> None:
        singles[i] = await _read_pending(store, lay, entries[i])

    await bounded_map(range(len(keys)), one_set, READ_CONCURRENCY)
    await bounded_map(range(len(entries)), one_pending, READ_CONCURRENCY)
    commits = [c for i in range(len(keys)) for c in sets[i]]
    seen: dict[tuple[int | None, str], str] = {}
    for c in commits:
        key = c.record.upload.key
        if (c.attempt, key) in seen:
            raise RecordFormatError(
                f"s3://{lay.dest.bucket}/{key} is listed by two committed records "
                f"({seen[c.attempt, key]} and {c.source}): refused",
                location=c.source,
            )
        seen[c.attempt, key] = c.source
    return commits + [singles[i] for i in range(len(entries))]


class UploadState(StrEnum):
    """Where one recorded upload stands."""

    PENDING = "pending"
    COMPLETED = "completed"
    #: neither pending nor the object completing it makes (gone, or another object there)
    MISSING = "missing"


async def pending_index(store: Store, dest: Destination) -> set[tuple[str, str]]:
    """(key, upload id) of every pending upload under the destination (one listing)."""
    return {
        (u.key, u.upload_id)
        async for u in store.list_uploads(dest.bucket, dest.list_prefix, directory=False)
        if dest.rel(u.key) is not None
    }


async def heads(store: Store, commits: list[S3ACommit]) -> list[ObjectInfo | None]:
    out: list[ObjectInfo | None] = [None] * len(commits)

    async def one(i: int) -> None:
        u = commits[i].record.upload
        out[i] = await store.head_object(u.bucket, u.key)

    await bounded_map(range(len(commits)), one, READ_CONCURRENCY)
    return out


async def states_of(
    store: Store, commits: list[S3ACommit], index: set[tuple[str, str]], why: Check
) -> tuple[list[UploadState], list[ObjectInfo | None]]:
    """Each commit's state (an upload still listed is pending; else completed when the
    object is what completing it makes, by the ``why`` rule) and the object looked at."""
    pending = [(c.record.upload.key, c.record.upload.upload_id) in index for c in commits]
    todo = [c for c, p in zip(commits, pending, strict=True) if not p]
    infos_todo = iter(await heads(store, todo))
    states: list[UploadState] = []
    infos: list[ObjectInfo | None] = []
    for c, p in zip(commits, pending, strict=True):
        if p:
            states.append(UploadState.PENDING)
            infos.append(None)
            continue
        info = next(infos_todo)
        infos.append(info)
        ours = is_ours(c.record.upload, info, why)
        states.append(UploadState.COMPLETED if ours else UploadState.MISSING)
    return states, infos


def all_completed(states: Sequence[UploadState]) -> bool:
    """Every upload the job's committed tasks recorded is a completed object: the job's
    commit finished (pure). No committed upload proves nothing."""
    return bool(states) and all(st is UploadState.COMPLETED for st in states)


def rolled_back(states: Sequence[UploadState], infos: Sequence[ObjectInfo | None]) -> bool:
    """Whether an abort rolls a job back (pure; ``infos``: the object at each upload's key,
    None where there is none): it had no committed task, or an upload of one is pending
    (its commit never finished), or some of its committed uploads are completed objects
    and others are gone, with nothing at their keys. A commit that finished completed every
    upload, and nothing removes part of a committed job (a replace removes all of it, and
    refuses while the job's directory is there), so that mix is a commit that never
    finished whose other uploads were aborted (an earlier abort cut short, ``uploads
    abort``, a lifecycle rule): this abort finishes rolling it back. Committed tasks with
    none pending and none of that mix are a job that may have committed (its output since
    replaced or rewritten) or whose every upload was aborted: there is nothing to roll
    back, only records to delete."""
    if not states or any(st is UploadState.PENDING for st in states):
        return True
    gone = any(
        st is UploadState.MISSING and info is None for st, info in zip(states, infos, strict=True)
    )
    return gone and any(st is UploadState.COMPLETED for st in states)


async def read_success(store: Store, dest: Destination) -> SuccessData | None:
    """The destination's ``_SUCCESS`` if it is a record one can read; an empty marker (the
    classic committer's) or anything else unreadable names no job."""
    key = dest.key("_SUCCESS")
    data = await read_optional(store, dest.bucket, key, max_size=caps.SUCCESS_CAP)
    if not data:
        return None
    try:
        return SuccessData.from_json(data, location=dest.uri_of(key))
    except RecordFormatError:
        return None


__all__ = [
    "READ_CONCURRENCY",
    "S3ACommit",
    "S3AJobScan",
    "UploadState",
    "drop_shared_dir_if_empty",
    "find_s3a_job",
    "heads",
    "is_s3a_job",
    "open_scan",
    "pending_index",
    "read_commits",
    "read_success",
    "scan_job",
    "shared_job_ids",
    "states_of",
]
