"""A job's storage as a whole: the record of the partitions it touched, the stateless abort
that removes everything of it, and the release of its records after a successful commit."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from zerorename.committers.errors import RecordFormatError
from zerorename.committers.paths import key_carries_job
from zerorename.committers.store import abort_uploads, job_uploads, keys_under, read_optional

if TYPE_CHECKING:
    from zerorename.committers.committer import Job


@dataclass
class AbortResult:
    """What a job abort (or rollback) removed."""

    job_id: str
    uploads_aborted: int = 0
    objects_deleted: int = 0


def partitions_record(items: list[str]) -> bytes:
    """The record of the partitions a job touched (what ``replace`` clears, and where
    an abort looks for the job's objects)."""
    return json.dumps({"version": 1, "partitions": items}, ensure_ascii=False).encode()


def parse_partitions_record(data: bytes, location: str) -> list[str]:
    try:
        d = json.loads(data)
        items = d["partitions"]
        if d.get("version") != 1 or not all(isinstance(x, str) for x in items):
            raise ValueError("bad version or entries")
        return list(items)
    except (ValueError, KeyError, TypeError) as exc:
        raise RecordFormatError(f"malformed partitions record: {exc}", location=location) from None


async def abort_job_storage(job: Job, *, keep: Iterable[str] = ()) -> AbortResult:
    """Stateless abort: marker first (stragglers stop), then every pending upload and every
    object under the destination that carries the job id (but the ``keep`` keys), journal
    last."""
    engine, dest, lay = job.engine, job.dest, job.layout
    res = AbortResult(job.job_id)
    await engine.delete_objects(dest.bucket, [lay.marker])
    res.uploads_aborted = await abort_uploads(engine, job_uploads(engine, dest, job.job_id))
    skip = [lay.journal, *keep]
    prefixes = [dest.list_prefix]
    if job.scope == "partitions":
        data = await read_optional(engine, dest.bucket, lay.partitions)
        if data is not None:
            parts = parse_partitions_record(data, dest.uri_of(lay.partitions))
            prefixes = [lay.root] + [dest.key(p + "/") for p in parts]
    for prefix in prefixes:
        res.objects_deleted += await engine.delete_objects(
            dest.bucket,
            keys_under(
                engine,
                dest.bucket,
                prefix,
                lambda k: key_carries_job(k, job.job_id),
                skip=skip,
            ),
        )
    res.objects_deleted += await engine.delete_objects(dest.bucket, [lay.journal])
    await anyio.to_thread.run_sync(lambda: shutil.rmtree(job.local_job_dir, ignore_errors=True))
    return res


async def release_job_storage(job: Job) -> int:
    """After a successful commit (or for cleanup): marker first, then this job's leftover
    uploads and its records at the same time (neither depends on the other), journal last.
    Returns uploads aborted."""
    engine, dest, lay = job.engine, job.dest, job.layout
    await engine.delete_objects(dest.bucket, [lay.marker])
    aborted = 0

    async def abort_leftovers() -> None:
        nonlocal aborted
        aborted = await abort_uploads(engine, job_uploads(engine, dest, job.job_id))

    async def delete_records() -> None:
        records = keys_under(engine, dest.bucket, lay.root, lambda k: True, skip=[lay.journal])
        await engine.delete_objects(dest.bucket, records)

    async with anyio.create_task_group() as tg:
        tg.start_soon(abort_leftovers)
        tg.start_soon(delete_records)
    await engine.delete_objects(dest.bucket, [lay.journal])
    await anyio.to_thread.run_sync(lambda: shutil.rmtree(job.local_job_dir, ignore_errors=True))
    return aborted
