"""Reading an S3A magic job's directory and records, for :mod:`s3ajobs`: one listing of
its directory (classified by :mod:`s3alayout`), every record it holds read and checked
(another job's record, a target outside the destination or in a magic directory, a key
named twice: refused), and where each recorded upload stands (pending, completed,
missing). Reads only."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from zerorename.committers import objectstore as caps
from zerorename.committers.errors import CommitterError, JobNotFound, RecordFormatError
from zerorename.committers.objectstore import Store
from zerorename.committers.paths import JOB_MARKER, JOURNAL_NAME, Destination
from zerorename.committers.records import PendingRecord, PendingSetHeader
from zerorename.committers.s3alayout import (
    S3AJobLayout,
    S3AKey,
    S3AKind,
    check_output_key,
    owns_record_job,
    s3a_id_problem,
)
from zerorename.committers.store import (
    Check,
    bounded_map,
    is_ours,
    read_optional,
    scan_pendingset,
)
from zerorename.committers.successdata import SuccessData
from zerorename.engine.records import ObjectInfo

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

    @property
    def attempts(self) -> list[int]:
        return sorted(self.pendingsets)


async def scan_job(store: Store, layout: S3AJobLayout) -> S3AJobScan:
    """List the job's directory once (``root`` ends in '/': never a sibling job's)."""
    scan = S3AJobScan(layout)
    zr = tuple(layout.root + name for name in _ZERORENAME_NAMES)
    async for obj in store.list_objects(layout.dest.bucket, layout.root):
        entry = layout.classify(obj.key)
        scan.objects += 1
        if obj.last_modified and (not scan.created or obj.last_modified < scan.created):
            scan.created = obj.last_modified
        if obj.key.startswith(layout.attempts_dir):
            scan.s3a = True
        if obj.key.startswith(zr):
            scan.zerorename = True
        if entry.kind is S3AKind.PENDINGSET and entry.attempt is not None:
            scan.pendingsets.setdefault(entry.attempt, []).append(obj.key)
        elif entry.kind is S3AKind.PENDING:
            scan.pendings.append(entry)
    return scan


async def open_scan(store: Store, dest: Destination, job_id: str) -> S3AJobScan:
    """The scan of an S3A job that exists and is S3A's only, else a one-line error."""
    layout = S3AJobLayout(dest, job_id)
    scan = await scan_job(store, layout)
    if not scan.s3a:
        raise JobNotFound(f"no S3A job {job_id} under {dest.uri} (see `zerorename jobs list`)")
    if scan.zerorename:
        raise CommitterError(
            f"{layout.uri(layout.root)} holds both zerorename's and S3A's records: refused; "
            "look at it with `zerorename jobs show` and clean it up by hand"
        )
    return scan


async def is_s3a_job(store: Store, dest: Destination, job_id: str) -> bool:
    """True when ``dest/__magic_job-<job_id>/job-<job_id>/`` exists (one listing)."""
    if s3a_id_problem(job_id) is not None:
        return False
    layout = S3AJobLayout(dest, job_id)
    async for sub in store.list_prefixes(dest.bucket, layout.root):
        if sub == layout.attempts_dir:
            return True
    return False


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
    "heads",
    "is_s3a_job",
    "open_scan",
    "pending_index",
    "read_commits",
    "read_success",
    "scan_job",
    "states_of",
]
