"""The job commit's scan: every pendingset of the plan read once, parsed to its end and
each upload checked (task-side path rules, the job's, once) before anything is completed;
then the conflict pre-check. Functions of the :class:`~jobcommit.JobCommitRun` they serve.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from zerorename.committers.conflict import ConflictMode, plan_conflicts
from zerorename.committers.errors import ConflictError, RecordNotFound
from zerorename.committers.jobstorage import partitions_record, plan_replacement
from zerorename.committers.paths import partition_of
from zerorename.committers.records import MAX_SUCCESS_FILENAMES, PendingRecord
from zerorename.committers.spool import LoadedSet
from zerorename.committers.store import bounded_map, check_record, first_foreign
from zerorename.committers.validate import check_output_key

if TYPE_CHECKING:
    from zerorename.committers.jobcommit import JobCommitRun


def check(run: JobCommitRun, rec: PendingRecord, location: str) -> None:
    """An upload the job may complete: where a task may write, the job's, once."""
    check_output_key(rec, run.dest, location)
    check_record(rec, run.dest, run.job.job_id, location, partitioned=run.job.partitioned)
    run.seen.add(rec, location)


async def load(
    run: JobCommitRun, index: int, on_record: Callable[[PendingRecord, str], None]
) -> LoadedSet:
    return await run.sets.load(
        index,
        run.engine,
        run.dest.bucket,
        run.plan.pendingsets[index].key,
        run.job.job_id,
        on_record,
    )


async def scan(run: JobCommitRun, start: int, *, tally: bool, missing_ok: bool = False) -> None:
    """Read the pendingsets from ``start`` on once each, parse them to their end and
    check every upload, before completing anything. ``tally``: count them into the
    journal (a fresh scan); ``missing_ok``: skip a pendingset that is gone."""
    j = run.journal
    total = len(run.plan.pendingsets)
    if tally:
        j.uploads_total = j.bytes_total = 0
        j.filenames = []
        j.pendingsets_total = total
    mode = ConflictMode.parse(run.job.conflict)
    need_parts = run.job.partitioned or (
        mode is not ConflictMode.APPEND and run.job.scope == "partitions"
    )
    mismatched = 0

    def tally_record(rec: PendingRecord, location: str) -> None:
        check(run, rec, location)
        j.uploads_total += 1
        j.bytes_total += rec.upload.length
        if need_parts or len(j.filenames) < MAX_SUCCESS_FILENAMES:
            rel = run.dest.rel(rec.upload.key) or ""
            if len(j.filenames) < MAX_SUCCESS_FILENAMES:
                j.filenames.append(rel)
            if need_parts:
                run.partitions.add(partition_of(rel))

    async def scan_one(index: int) -> None:
        nonlocal mismatched
        attempt = run.plan.pendingsets[index].attempt
        try:
            loaded = await load(run, index, tally_record if tally else partial(check, run))
        except RecordNotFound:
            if not missing_ok:
                raise
            return
        if attempt is not None and loaded.header.attempt != attempt:
            mismatched += 1  # a later attempt overwrote it: still a valid task output

    await bounded_map(range(start, total), scan_one, run.opts.scan_concurrency)
    if mismatched:
        run.c.diagnostics["pendingsets_from_other_attempt"] = str(mismatched)


async def precheck(run: JobCommitRun) -> None:
    """Conflict mode 'fail': nothing there yet; replace by partition: record them."""
    mode = ConflictMode.parse(run.job.conflict)
    plan = plan_conflicts(mode, run.job.scope_enum, run.dest, run.partitions)
    for prefix in plan.check_prefixes:
        found = await first_foreign(run.engine, run.dest, prefix, run.job.job_id)
        if found:
            raise ConflictError(
                f"destination {run.dest.uri} already has objects where job "
                f"{run.job.job_id} writes (conflict mode 'fail'), e.g. "
                f"{run.dest.uri_of(found[0])}",
                job_id=run.job.job_id,
                conflicts=tuple(found),
            )
    if plan.replace_prefixes:
        # the older objects are listed now, before anything is completed: replace deletes
        # exactly these (if unchanged), never an object written while the commit runs
        await plan_replacement(run.job, plan.replace_prefixes)
    if plan.replace_prefixes and run.job.scope == "partitions":
        await run.engine.put_object(
            run.dest.bucket,
            run.layout.partitions,
            partitions_record(sorted(run.partitions)),
            content_type="application/json",
        )
