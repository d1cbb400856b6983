"""The driver side of the streaming sink: what the commit (or abort) of one micro-batch
does at the destination, over the committers' public API (no pyspark here, so the
protocol runs on the in-memory store in unit tests).

The commit of batch B by job J (:mod:`.log` decides, this module does the I/O):

1. read the query's log, list the query's job notes and, beside them, J's commit's first
   round (its marker, journal and pendingsets: read only, see
   :mod:`zerorename.committers.commit.run`);
2. B committed already (Spark re-runs a batch whose commit it did not record): abort J,
   success, nothing twice;
3. another run's intent of B (a driver died in its commit): resume that job (its journal
   proves what it completed) and record B as its, or discard it (no journal: nothing
   proves it committed) and commit J; a discarded job leaves the log before its records
   go; before discarding, the log is read again (an operator's ``jobs resume`` of that
   job records B before it deletes the journal: B is then a duplicate);
4. commit J: the intent (job and counts: its size does not grow with the tasks) stored
   with J's journal and plan, all answered before the first complete; B stored as
   committed with the journal's ``succeeded`` (every complete answered); J's note
   deleted with its journal, the release's last request. A driver that dies between
   leaves J's note: a journal the log does not name completed nothing, and a job the log
   has committed keeps its files; the next commit's sweep releases either (release
   deletes no data).

Sequential requests for a batch: the append job commit's 6, nothing of the sink's own.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zerorename.committers import (
    CommitOptions,
    Committer,
    CommitterError,
    Destination,
    JobCommitError,
    JobNotActive,
    JournalError,
    TaskCommitSummary,
    committer_class,
)
from zerorename.committers.commit.result import (
    CommitProgress,
    CommitRecords,
    JobCommitResult,
    RecordWrite,
)
from zerorename.committers.paths import JobLayout
from zerorename.committers.store import abort_uploads, gather, job_uploads
from zerorename.spark_adapter.bridge import get_bridge
from zerorename.spark_adapter.errors import StreamLogError
from zerorename.spark_adapter.options import WriteOptions
from zerorename.spark_adapter.stream.log import (
    BatchEntry,
    Intent,
    Recovery,
    Step,
    StreamLog,
    decide,
    jobs_prefix,
    log_key,
    recover,
    started_job,
    started_key,
)
from zerorename.spark_adapter.stream.read import query_id_of, read_log, reader_options

if TYPE_CHECKING:  # pyarrow: `zerorename jobs` imports this module without it
    from zerorename.spark_adapter.write import TaskResult

log = logging.getLogger("zerorename.spark")

#: a batch's job: no _SUCCESS (the stream log records batches) and no rollback on a failed
#: commit (its journal stays, so the batch's next commit resumes it: nothing twice)
STREAM_COMMIT = CommitOptions(write_success=False, rollback_on_failure=False)


@dataclass(frozen=True)
class BatchOutcome:
    """What the commit of one micro-batch did."""

    query_id: str
    batch_id: int
    job_id: str
    #: committed | duplicate (aborted: the batch was committed before) | adopted | empty
    action: str
    files: int
    rows: int
    bytes: int
    seconds: float


def stream_committer(opts: WriteOptions) -> Committer:
    """The committer of a query's batch jobs (append, no _SUCCESS, no rollback)."""
    from zerorename.spark_adapter.write import engine_for  # pyarrow: see TYPE_CHECKING above

    cls = committer_class(opts.committer)
    stream_opts = opts.commit.stream_commit_options()  # STREAM_COMMIT's fixed fields kept
    return cls(engine_for(opts), opts.path, conflict="append", options=stream_opts)


async def note_job(committer: Committer, query_id: str, job_id: str, batch_id: int) -> None:
    """The query's note of a batch job (what a later commit's sweep finds)."""
    dest = committer.dest
    note = json.dumps({"batch": batch_id, "job_id": job_id}).encode()
    await committer.engine.put_object(
        dest.bucket,
        started_key(dest.list_prefix, query_id, job_id),
        note,
        content_type="application/json",
    )


async def drop_job(store: Any, dest: Destination, query_id: str, job_id: str) -> None:
    """The last of a stream job given up (discarded, swept, or by ``zerorename jobs``): the
    query's note of it and its marker in one request, then its uploads once more. A
    straggler task may have set the job up again meanwhile (ensure_job writes the note, the
    marker, the note again): the marker never outlives the note, an upload made before that
    delete is listed here, and a later one finds no marker and aborts itself."""
    doomed = [started_key(dest.list_prefix, query_id, job_id), JobLayout(dest, job_id).marker]
    await store.delete_objects(dest.bucket, doomed)
    await abort_uploads(store, job_uploads(store, dest, job_id))


async def ensure_job(committer: Committer, job_id: str, query_id: str, batch_id: int) -> None:
    """Set the batch's job up unless another task of the batch did (they race: the marker
    is the same whoever writes it). The query's note of the job goes first, so a job with a
    marker is always one a later commit can find and clean up.

    A task that finds no marker may also be a straggler of a batch its job committed
    already (a speculative copy Spark launched before the commit and whose process ran
    after it): the log, read once the marker is written again, names the job as the
    batch's. The straggler then releases what it set up (marker, note, any upload of the
    job: release deletes no data) and gets JobNotActive. The log records the batch before
    the commit's release deletes the marker, so a marker written after that delete is
    always followed by a read that sees the record, and one written before it goes with
    the release (whose last listing also finds the straggler's uploads).

    The note is written again once the marker is: a committing driver's last request
    deletes the note (with the journal and the marker again) and may land between the
    first note and the marker, and a straggler that dies before its log read must not
    leave a marker no sweep finds."""
    job = committer.job(job_id)
    if await job.is_active():
        return
    await note_job(committer, query_id, job_id, batch_id)
    try:
        await committer.setup_job(job_id)
    except CommitterError:
        if not await job.is_active():
            raise
    await note_job(committer, query_id, job_id, batch_id)

    async def undo() -> None:
        await job.release()
        note = started_key(committer.dest.list_prefix, query_id, job_id)
        await committer.engine.delete_objects(committer.dest.bucket, [note])

    try:
        found = await read_log(committer.engine, committer.dest, query_id)
    except StreamLogError:  # the batch's commit would refuse it: nothing is written
        await undo()
        raise
    if found is not None and any(e.batch == batch_id and e.job_id == job_id for e in found.recent):
        await undo()
        raise JobNotActive(
            f"job {job_id} committed batch {batch_id} of query {query_id} already: this "
            "task attempt is a straggler; its output is discarded"
        )


class StreamSink:
    """The driver side of one query's micro-batches at one destination (async I/O)."""

    def __init__(
        self, opts: WriteOptions, query_id: str, committer: Committer | None = None
    ) -> None:
        self.opts = opts
        self.query_id = query_id
        self.committer = committer if committer is not None else stream_committer(opts)
        self.dest: Destination = self.committer.dest
        self.key = log_key(self.dest.list_prefix, query_id)

    @property
    def store(self) -> Any:
        return self.committer.engine

    async def read_log(self) -> StreamLog:
        found = await read_log(self.store, self.dest, self.query_id)
        return found if found is not None else StreamLog(self.query_id)

    async def write_log(self, new: StreamLog) -> None:
        await self.store.put_object(
            self.dest.bucket, self.key, new.to_json(), content_type="application/json"
        )

    def log_record(self, new: StreamLog) -> RecordWrite:
        """:meth:`write_log` as a record a job commit sends in one of its rounds."""
        return RecordWrite(self.key, new.to_json())

    async def _settle(self, log_: StreamLog, job_id: str) -> tuple[StreamLog, BatchEntry | None]:
        """A commit of the intent's batch found another run's intent: resume that job (and
        adopt it as the batch's commit) or discard it. Returns the log to go on from and
        the entry when it was adopted."""
        intent = log_.pending
        assert intent is not None
        job = self.committer.job(intent.job_id)
        status = await job.status()
        fate = recover(intent, journal=status.journal is not None)
        log.warning(
            "zerorename stream %s: batch %d was being committed by job %s (%s); %s",
            self.query_id,
            intent.batch,
            intent.job_id,
            "its journal is there" if status.journal is not None else "no journal",
            fate.value,
        )
        entry = BatchEntry(
            intent.batch, intent.job_id, intent.files, intent.rows, intent.bytes, time.time()
        )
        if fate is Recovery.RESUME:
            # the batch is recorded before the resume's release deletes K's journal (the
            # proof a later commit would need otherwise)
            record = CommitRecords(with_succeeded=(self.log_record(log_.with_commit(entry)),))
            try:
                await job.resume(records=record)
            except (JournalError, JobCommitError) as exc:
                # a journal stored without its plan (the commit stopped before completing
                # anything) or a rollback that resume finished: abort (which refuses
                # whenever something of the job may count) and commit the new run
                if isinstance(exc, JobCommitError) and not exc.rolled_back:
                    raise
                log.warning("zerorename stream: %s; discarding the job", exc)
                fate = Recovery.DISCARD
        if fate is Recovery.DISCARD:
            # read the log again: K's journal goes only after the batch is recorded, so an
            # operator's `jobs resume` of K that finished since this commit's first read
            # left the batch recorded (writing that read back would drop the record, and
            # the batch would be written twice)
            now = await self.read_log()
            if now.committed(intent.batch):
                log.warning(
                    "zerorename stream %s: batch %d was recorded meanwhile (job %s resumed)",
                    self.query_id,
                    intent.batch,
                    intent.job_id,
                )
                return now, None
            if now.pending is not None and now.pending.job_id != intent.job_id:
                raise StreamLogError(
                    f"the stream log of query {self.query_id} changed during the commit of "
                    f"batch {intent.batch} (job {now.pending.job_id} is committing it now): "
                    "is another driver running this query? Not committing"
                )
            bare = now.without_intent()
            if intent.job_id != job_id:
                if now.pending is not None:
                    # the log stops naming the job before its records go
                    await self.write_log(bare)
                await self.discard(intent.job_id)
            return bare, None
        return log_.with_commit(entry), entry

    async def commit(
        self, batch_id: int, job_id: str, results: Sequence[TaskResult]
    ) -> BatchOutcome:
        t0 = time.monotonic()
        summaries = [TaskCommitSummary.from_json(r.summary) for r in results if r.summary]
        rows = sum(r.rows for r in results)

        def outcome(action: str, files: int, n_rows: int, n_bytes: int) -> BatchOutcome:
            return BatchOutcome(
                self.query_id,
                batch_id,
                job_id,
                action,
                files,
                n_rows,
                n_bytes,
                time.monotonic() - t0,
            )

        if not summaries:
            return outcome("empty", 0, rows, 0)
        job = self.committer.job(job_id)
        # the job commit's first round (marker, journal, pendingsets: read only) goes out
        # with the log's read; a step other than a plain commit drops what it read
        run = job.prepare_commit(summaries, extra_metrics={"rows": rows, "batch": batch_id})
        with contextlib.closing(run):
            current, noted, _ = await gather(self.read_log(), self.noted_jobs(), run.read_ahead())
            step = decide(current, batch_id, job_id)
            keep = {job_id} | ({current.pending.job_id} if current.pending else set())
            await self.sweep([k for k in noted if k not in keep])
            if step is Step.DUPLICATE:
                await self.discard(job_id)
                return outcome("duplicate", 0, 0, 0)
            if step is Step.RECOVER:
                current, adopted = await self._settle(current, job_id)
                if adopted is not None:
                    await self.write_log(current)
                    await gather(self.forget(adopted.job_id), self.discard(job_id))
                    return outcome("adopted", adopted.files, adopted.rows, adopted.bytes)
                if current.committed(batch_id):  # recorded meanwhile: nothing twice
                    await self.discard(job_id)
                    return outcome("duplicate", 0, 0, 0)
            files, n_bytes = sum(s.files for s in summaries), sum(s.bytes for s in summaries)
            # bounded: no pendingset list (the journal and plan have it; see Intent)
            intent = current.with_intent(Intent(batch_id, job_id, (), files, rows, n_bytes))

            def committed(p: CommitProgress) -> bytes:
                """The log with B committed: its files and bytes are the journal's totals
                (what the commit's scan counted) and its time the commit's, so this one
                body is made when it is sent (pure: the commit does the PUT)."""
                entry = BatchEntry(
                    batch_id, job_id, p.uploads_total, rows, p.bytes_total, time.time()
                )
                done: StreamLog = current.with_commit(entry)
                return done.to_json()

            # the intent is written with the journal and the plan, all answered before the
            # first complete (a journal stored without its intent completed nothing: the
            # job's note stays, and the next commit's sweep releases it); the batch is
            # recorded with the journal's `succeeded` (every complete answered); the
            # job's note goes with the journal's delete, the release's last request (a
            # driver that dies in the release leaves the note, and the next commit's sweep
            # releases the rest of the job: release deletes no data)
            records = CommitRecords(
                with_journal=(self.log_record(intent),),
                with_succeeded=(RecordWrite(self.key, committed),),
                release_also=(self.note_key(job_id),),
            )
            # after a recovery the job's first round is read again (the settled job may
            # have been this one)
            result: JobCommitResult = await job.commit(
                summaries,
                extra_metrics={"rows": rows, "batch": batch_id},
                records=records,
                prepared=run if step is Step.COMMIT else None,
            )
        if result.cleanup_error:
            # the last delete may have gone with the note but not the journal: note again
            await note_job(self.committer, self.query_id, job_id, batch_id)
        return outcome("committed", result.files, rows, result.bytes)

    async def noted_jobs(self) -> list[str]:
        """The jobs the query's tasks noted (runs whose commit has not cleaned them up)."""
        prefix = jobs_prefix(self.dest.list_prefix, self.query_id)
        found = []
        async for obj in self.store.list_objects(self.dest.bucket, prefix):
            job = started_job(prefix, obj.key)
            if job is None:
                log.warning("zerorename stream: ignoring %s", self.dest.uri_of(obj.key))
            else:
                found.append(job)
        return found

    def note_key(self, job_id: str) -> str:
        return started_key(self.dest.list_prefix, self.query_id, job_id)

    async def forget(self, job_id: str) -> None:
        """Delete the query's note of ``job_id``."""
        await self.store.delete_objects(self.dest.bucket, [self.note_key(job_id)])

    async def drop(self, job_id: str) -> None:
        """The last of a job this query gives up (discarded or swept): its note and its
        marker in one request, then its uploads once more. A straggler task may have set
        the job up again meanwhile (ensure_job writes the note, the marker, the note
        again): the marker never outlives the note, an upload made before that delete is
        listed here, and a later one finds no marker and aborts itself."""
        await drop_job(self.store, self.dest, self.query_id, job_id)

    async def discard(self, job_id: str) -> None:
        """Abort a run's job that completed nothing (its uploads, its records), then drop
        it (its note)."""
        await self.committer.job(job_id).abort()
        await self.drop(job_id)

    async def sweep(self, jobs: Sequence[str]) -> None:
        """Jobs of runs that died before their commit (or stragglers that set a finished
        job up again): not the log's, so nothing of theirs counts. Their pending uploads
        and records go (release never deletes data), then they are dropped (their notes)."""
        for job_id in jobs:
            log.warning("zerorename stream %s: cleaning up job %s", self.query_id, job_id)
            await self.committer.job(job_id).release()
            await self.drop(job_id)

    async def abort(self, batch_id: int, job_id: str) -> None:
        """Abort this run's job of the batch, unless the log says it is (being) committed:
        Spark also aborts after a commit that raised, which the batch's next run settles.
        An intent naming the job proves that only with the job's journal (:func:`recover`):
        a commit refused before completing anything (another job holds the destination's
        lock) deletes its journal but leaves its intent. Then the log stops naming the job
        before its uploads and records go, as the batch's next commit would do it."""
        current = await self.read_log()
        p = current.pending
        committing = any(e.job_id == job_id for e in current.recent)
        if not committing and p is not None and p.job_id == job_id:
            status = await self.committer.job(job_id).status()
            committing = recover(p, journal=status.journal is not None) is Recovery.RESUME
            if not committing:
                await self.write_log(current.without_intent())
        if committing:
            log.warning(
                "zerorename stream %s: batch %d's job %s is in the log; not aborting it",
                self.query_id,
                batch_id,
                job_id,
            )
            return
        await self.discard(job_id)


def read_stream_log(
    path: str,
    query: str,
    *,
    endpoint: str | None = None,
    region: str | None = None,
    profile: str | None = None,
    addressing_style: str = "auto",
) -> StreamLog:
    """The log of a query's batches at ``path``: ``query`` is the query id or its local
    checkpoint directory (the id is in its ``metadata`` file). A query that committed
    nothing yet has an empty log. Credentials come from the AWS chain."""
    opts = reader_options(path, endpoint, region, profile, addressing_style)
    return get_bridge().run(StreamSink(opts, query_id_of(query)).read_log())
