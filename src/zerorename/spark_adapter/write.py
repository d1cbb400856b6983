"""The committer side of a Spark write (job setup, the task writer, the job commit), shared
by the data source, the RDD API and the streaming sink.

Everything here is plain Python over :mod:`zerorename.committers`, run through the
process's :class:`LoopBridge` (so a reused Spark worker reuses its engine and connection
pool). Three places call it:

- the driver (or the Python worker Spark starts for planning) sets the job up;
- each task attempt writes its outputs and commits them to a small message;
- the driver side completes the job from exactly the messages Spark accepted.

What ``mode("overwrite")`` replaces follows Spark's partition overwrite mode: the
``partitionOverwriteMode`` option, else the session's setting. The driver-side code runs
in Python workers that cannot see the session, but every task of a SQL write gets the
session's explicitly set SQL settings from Spark (its local properties): each task reads
the setting and reports it, and the job commit uses the value its accepted tasks agree on
(:meth:`WriteOptions.overwrite_mode`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from zerorename.committers import (
    CommitProgress,
    Committer,
    CommitterError,
    ConflictScope,
    Job,
    JobCommitResult,
    TaskAttempt,
    TaskCommitSummary,
    committer_class,
)
from zerorename.committers.commit.journal import JobMarker
from zerorename.committers.commit.result import CommitRecords, RecordWrite
from zerorename.engine import UploadEngine
from zerorename.spark_adapter.bridge import get_bridge
from zerorename.spark_adapter.errors import CommitMessageError
from zerorename.spark_adapter.options import WriteOptions

if TYPE_CHECKING:
    # pyarrow and the file writers load with a task's first batch: a job's setup and
    # commit (Spark's planning workers) need neither
    import pyarrow as pa

    from zerorename.spark_adapter.files.router import BatchRouter, FileStats

log = logging.getLogger("zerorename.spark")


@dataclass(frozen=True)
class TaskResult:
    """What one successful task attempt reports back to the job driver (small)."""

    partition: int
    attempt: int
    task_attempt_id: int
    rows: int
    files: int
    bytes: int
    #: the committers' TaskCommitSummary as JSON; None when the task wrote no file.
    summary: str | None
    #: Spark's spark.sql.sources.partitionOverwriteMode as the task got it from the
    #: session ("": not set; None: not read, as in the RDD API and streams).
    session_overwrite: str | None = None
    #: rows that went through the task's local spill (partitions past maxOpenFiles)
    spilled_rows: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> TaskResult:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class WriteOutcome:
    """The outcome of a committed write, as the commit step saw it."""

    job_id: str
    destination: str
    files: int
    bytes: int
    rows: int
    tasks: int
    write_seconds: float
    commit_seconds: float
    success_key: str | None


def engine_for(opts: WriteOptions) -> UploadEngine:
    """This process's engine for the write's settings (created once per process)."""
    return get_bridge().engine(opts.engine_config())


def committer_for(opts: WriteOptions, scope: ConflictScope | None = None) -> Committer:
    """The write's committer; ``scope``: where it judges conflicts (default: the scope the
    job is set up with, :attr:`WriteOptions.setup_scope`)."""
    cls = committer_class(opts.committer)
    return cls(
        engine_for(opts),
        opts.path,
        conflict=opts.conflict,
        options=opts.commit.commit_options(),
        scope=scope or opts.setup_scope,
    )


def setup_job(opts: WriteOptions) -> str:
    """Set the job up at the destination (writes its ``job.json``); returns the job id."""
    job = get_bridge().run(committer_for(opts).setup_job())
    log.info(
        "zerorename job %s set up at %s (%s committer, conflict=%s, scope=%s%s)",
        job.job_id,
        opts.path,
        opts.committer,
        opts.conflict,
        job.scope,
        "; the session's partitionOverwriteMode decides at commit" if opts.session_decides else "",
    )
    return job.job_id


def job_handle(opts: WriteOptions, job_id: str, scope: ConflictScope | None = None) -> Job:
    return committer_for(opts, scope).job(job_id)


def record_scope(job: Job, created: float | None) -> CommitRecords:
    """The job's ``job.json`` again, with the scope its commit uses (decided from the
    tasks' reading of the session, after the job was set up), for the commit to store with
    its journal before any complete: a process that resumes the commit opens the job as it
    is being committed."""
    marker = JobMarker(
        job.job_id, job.kind, job.dest.uri, job.conflict, job.scope, created or time.time()
    )
    return CommitRecords(with_journal=(RecordWrite(job.layout.marker, marker.to_json()),))


def task_id_for(partition: int, task_attempt_id: int) -> str:
    """Records name each attempt apart (``00003_17``), so the job commits exactly the
    attempt Spark accepted even when speculative copies both finished their writes."""
    return f"{partition:05d}_{task_attempt_id}"


class TaskWriter:
    """One task attempt: open, write batches, then ``commit()`` or ``abort()``."""

    def __init__(
        self,
        opts: WriteOptions,
        job_id: str,
        partition: int,
        attempt: int,
        task_attempt_id: int,
        *,
        session_overwrite: str | None = None,
    ) -> None:
        self.opts = opts
        self.job_id = job_id
        self.partition = partition
        self.attempt = attempt
        self.task_attempt_id = task_attempt_id
        #: the session's partition overwrite mode as Spark handed it to this task
        self.session_overwrite = session_overwrite
        self._bridge = get_bridge()
        self._ta: TaskAttempt | None = None
        self._router: BatchRouter | None = None

    def _start(self, schema: pa.Schema) -> BatchRouter:
        from zerorename.spark_adapter.files.router import BatchRouter

        job = job_handle(self.opts, self.job_id)
        ta = job.task_attempt(task_id_for(self.partition, self.task_attempt_id), self.attempt)
        self._bridge.run(ta.setup())
        self._ta = ta
        self._router = BatchRouter(self.opts, schema, self.partition, self.job_id, ta.open_sync)  # type: ignore[attr-defined]
        return self._router

    def write(self, batch: pa.RecordBatch) -> None:
        router = self._router or self._start(batch.schema)
        router.write(batch)

    def write_empty(self, schema: pa.Schema) -> None:
        """Write the file Spark writes for an empty partition 0 (see BatchRouter.open_empty)."""
        (self._router or self._start(schema)).open_empty()

    @property
    def rows(self) -> int:
        return self._router.rows if self._router is not None else 0

    def close_files(self) -> list[FileStats]:
        """Finish every file (uploads pending, nothing visible)."""
        return self._router.close() if self._router is not None else []

    def commit(self) -> TaskResult:
        files = self.close_files()
        summary = None
        if self._ta is not None:
            summary = self._bridge.run(self._ta.commit()).to_json()
        return TaskResult(
            self.partition,
            self.attempt,
            self.task_attempt_id,
            self.rows,
            len(files),
            sum(f.bytes for f in files),
            summary,
            self.session_overwrite,
            self._router.spilled_rows if self._router is not None else 0,
        )

    def abort(self) -> None:
        """Abort open files and everything this attempt uploaded; never raises."""
        try:
            if self._router is not None:
                self._router.abort()
            if self._ta is not None:
                self._bridge.run(self._ta.abort())
        except Exception:
            log.exception(
                "zerorename: aborting task attempt %s of job %s failed",
                task_id_for(self.partition, self.task_attempt_id),
                self.job_id,
            )


def _log_progress(p: CommitProgress) -> None:
    log.info(
        "zerorename job %s %s: %d/%d uploads, %d/%d bytes, %.1fs",
        p.job_id,
        p.phase,
        p.uploads_done,
        p.uploads_total,
        p.bytes_done,
        p.bytes_total,
        p.elapsed,
    )


def check_results(results: Sequence[TaskResult | None], job_id: str) -> list[TaskResult]:
    """One accepted result per partition (Spark's guarantee, checked)."""
    seen: dict[int, TaskResult] = {}
    for r in results:
        if r is None:
            raise CommitMessageError(f"job {job_id}: a task has no commit message; not committing")
        if r.partition in seen:
            raise CommitMessageError(
                f"job {job_id}: two accepted attempts of partition {r.partition}; not committing"
            )
        seen[r.partition] = r
    return [seen[p] for p in sorted(seen)]


def commit_job(
    opts: WriteOptions,
    job_id: str,
    results: Sequence[TaskResult | None],
    *,
    started: float | None = None,
    sql_write: bool = False,
) -> WriteOutcome:
    """Complete the job from the accepted task results (no listing of the store).
    ``sql_write``: a DataFrame write, whose tasks report the session's partition
    overwrite mode (else, as for the RDD API, only the option counts)."""
    accepted = check_results(results, job_id)
    summaries = [TaskCommitSummary.from_json(r.summary) for r in accepted if r.summary]
    rows = sum(r.rows for r in accepted)
    mode = opts.overwrite_mode([r.session_overwrite for r in accepted] if sql_write else None)
    scope = opts.replace_scope(mode)
    job = job_handle(opts, job_id, scope)
    records = record_scope(job, started) if scope is not opts.setup_scope else None
    if opts.overwrite:
        log.info(
            "zerorename job %s: partition overwrite mode %s (%s), replacing by %s",
            job_id,
            mode.value,
            "option" if opts.partition_overwrite else "session" if opts.session_decides else "-",
            scope.value,
        )
    bridge = get_bridge()
    t0 = time.monotonic()
    result: JobCommitResult = bridge.run(
        job.commit(
            summaries,
            progress=_log_progress,
            extra_metrics={
                "rows": rows,
                "tasks": len(accepted),
                "spilled_rows": sum(r.spilled_rows for r in accepted),
            },
            records=records,
        )
    )
    commit_seconds = time.monotonic() - t0
    outcome = WriteOutcome(
        job_id=job_id,
        destination=opts.path,
        files=result.files,
        bytes=result.bytes,
        rows=rows,
        tasks=len(accepted),
        write_seconds=(time.time() - started - commit_seconds) if started else 0.0,
        commit_seconds=commit_seconds,
        success_key=result.success_key,
    )
    log.info(
        "zerorename job %s committed %d files, %d bytes, %d rows to %s in %.2fs",
        job_id,
        outcome.files,
        outcome.bytes,
        rows,
        opts.path,
        commit_seconds,
    )
    return outcome


def abort_job(opts: WriteOptions, job_id: str) -> None:
    """Abort the job: nothing of it stays visible, no upload of it stays pending."""
    job = job_handle(opts, job_id)
    try:
        res = get_bridge().run(job.abort())
        log.info(
            "zerorename job %s aborted: %d uploads aborted, %d objects deleted",
            job_id,
            res.uploads_aborted,
            res.objects_deleted,
        )
    except CommitterError:
        log.exception("zerorename job %s: abort failed", job_id)
        raise


def iter_results(messages: Iterable[Any]) -> Iterator[TaskResult | None]:
    """The task results inside Spark's commit messages (None for a failed partition)."""
    for m in messages:
        result = getattr(m, "result", None)
        yield result if isinstance(result, TaskResult) else None
