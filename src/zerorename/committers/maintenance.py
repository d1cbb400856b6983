"""Housekeeping across jobs: pending uploads by age, the jobs under a destination, and
reading any record for inspection. Used by ``Job.cleanup`` and the CLI."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from typing import Any

from zerorename.committers.codec.pending import PendingRecord, SuccessData
from zerorename.committers.commit.journal import CommitPlan, JobMarker, Journal
from zerorename.committers.errors import PathError, RecordFormatError
from zerorename.committers.objectstore import INSPECT_CAP, JOURNAL_CAP, MARKER_CAP, Store
from zerorename.committers.paths import (
    JOB_MARKER,
    JOURNAL_NAME,
    MAGIC_JOB_PREFIX,
    PENDING_SUFFIX,
    PENDINGSET_SUFFIX,
    PLAN_NAME,
    SUCCESS_NAME,
    Destination,
    JobLayout,
    job_id_of_dir,
)
from zerorename.committers.store import read_optional, scan_pendingset
from zerorename.engine.results import UploadInfo


def check_not_whole_bucket(dest: Destination, *, all_of_bucket: bool) -> None:
    """Refuse a destructive operation on a whole bucket unless it was asked for by name
    (``--all-of-bucket``); refuse that flag on a prefix, where it would mean nothing."""
    if dest.whole_bucket and not all_of_bucket:
        raise PathError(
            f"{dest.uri} is a whole bucket: give a prefix, or --all-of-bucket to mean "
            "every upload in the bucket"
        )
    if all_of_bucket and not dest.whole_bucket:
        raise PathError(f"--all-of-bucket given with a prefix ({dest.uri}); drop one of them")


async def uploads_under(
    engine: Store, dest: Destination, *, all_of_bucket: bool = False
) -> AsyncIterator[UploadInfo]:
    """Pending uploads under the destination as a directory (``prefix + '/'``), any job's.
    A whole bucket only with ``all_of_bucket`` (these are uploads to abort)."""
    check_not_whole_bucket(dest, all_of_bucket=all_of_bucket)
    async for u in engine.list_uploads(dest.bucket, dest.list_prefix, directory=False):
        if dest.rel(u.key) is not None:
            yield u


async def uploads_older_than(
    engine: Store,
    dest: Destination,
    seconds: float,
    *,
    now: float | None = None,
    all_of_bucket: bool = False,
) -> AsyncIterator[UploadInfo]:
    """Pending uploads under the destination initiated more than ``seconds`` ago (any job);
    a whole bucket only with ``all_of_bucket``."""
    cutoff = (time.time() if now is None else now) - seconds
    async for u in uploads_under(engine, dest, all_of_bucket=all_of_bucket):
        if u.initiated <= cutoff:
            yield u


@dataclass(frozen=True)
class JobEntry:
    """One job found under a destination."""

    job_id: str
    marker: JobMarker | None
    journal: Journal | None

    @property
    def state(self) -> str:
        if self.journal is not None:
            return f"committing ({self.journal.state.value})"
        return "active" if self.marker is not None else "records only"


async def list_jobs(engine: Store, dest: Destination) -> AsyncIterator[JobEntry]:
    """Jobs with records (``__magic_job-<id>/``) directly under the destination."""
    async for sub in engine.list_prefixes(dest.bucket, dest.list_prefix):
        name = (dest.rel(sub) or "").rstrip("/")
        job_id = job_id_of_dir(name)
        if job_id is None or not name.startswith(MAGIC_JOB_PREFIX):
            continue
        lay = JobLayout(dest, job_id)
        m = await read_optional(engine, dest.bucket, lay.marker, max_size=MARKER_CAP)
        j = await read_optional(engine, dest.bucket, lay.journal, max_size=JOURNAL_CAP)
        yield JobEntry(
            job_id,
            JobMarker.from_json(m, location=dest.uri_of(lay.marker)) if m is not None else None,
            Journal.from_json(j, location=dest.uri_of(lay.journal)) if j is not None else None,
        )


async def inspect_record(engine: Store, uri: str, *, max_commits: int = 20) -> dict[str, Any]:
    """Read a ``_SUCCESS``, ``.pending`` or ``.pendingset`` (streamed: only the first
    ``max_commits`` commits are kept, all are counted), or a job's ``job.json``,
    ``plan.json`` or ``journal.json``, into a JSON-ready dict (checked as the committers
    check it: a malformed record is a RecordFormatError naming the field)."""
    d = Destination.parse(uri)
    name = d.prefix.rsplit("/", 1)[-1]
    if name.endswith(PENDINGSET_SUFFIX):
        commits: list[dict[str, Any]] = []
        total = nbytes = 0
        header: dict[str, Any] = {}
        async for item in scan_pendingset(engine, d.bucket, d.prefix, job_id=None):
            if isinstance(item, PendingRecord):
                total += 1
                nbytes += item.upload.length
                if len(commits) < max_commits:
                    commits.append(item.to_dict())
            else:
                header = item.to_dict()
        return {
            "kind": "pendingset",
            "uri": uri,
            **header,
            "count": total,
            "bytes": nbytes,
            "commits": commits,
            "commitsShown": len(commits),
        }
    data = await read_optional(engine, d.bucket, d.prefix, max_size=INSPECT_CAP)
    if data is None:
        raise RecordFormatError("no such object", location=uri)
    if name.endswith(PENDING_SUFFIX):
        return {"kind": "pending", **PendingRecord.from_json(data, location=uri).to_dict()}
    if name == SUCCESS_NAME or name.endswith(SUCCESS_NAME):
        return {"kind": "success", **SuccessData.from_json(data, location=uri).to_dict()}
    parent = d.prefix.rpartition("/")[0].rpartition("/")[2]
    reader = _JOB_RECORDS.get(name) if job_id_of_dir(parent) else None
    if reader is not None:
        kind, parse = reader
        return {"kind": kind, **asdict(parse(data, location=uri))}
    raise RecordFormatError(
        "not a _SUCCESS, .pending, .pendingset or a job's job.json/plan.json/journal.json",
        location=uri,
    )


#: a job's own records that ``inspect`` reads (name -> kind, parser); they are only
#: recognised inside a ``__magic_job-<id>/`` directory
_JOB_RECORDS: dict[str, tuple[str, Any]] = {
    JOB_MARKER: ("job", JobMarker.from_json),
    PLAN_NAME: ("plan", CommitPlan.from_json),
    JOURNAL_NAME: ("journal", Journal.from_json),
}
