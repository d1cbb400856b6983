"""Committers and jobs: the protocol's entry points (async).

    async with UploadEngine(cfg) as engine:
        committer = MagicCommitter(engine, "s3://bucket/table", conflict="append")
        job = await committer.setup_job()                 # uuid4 job id, job.json written
        ta = job.task_attempt(task_id=3, attempt=0)       # anywhere, any process
        await ta.setup()
        async with ta.open("year=2024/part.csv") as out:
            await out.write(b"...")
        summary = await ta.commit()                       # small, JSON-serialisable
        result = await job.commit([summary])              # or job.commit() to list them

A process that did not set the job up gets it with ``await committer.open_job(job_id)``
(settings come from the job's ``job.json``) and can ``resume()`` or ``abort()`` it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from zerorename.committers import objectstore as caps
from zerorename.committers.commit.journal import CommitPlan, JobMarker, Journal, PlannedSet, State
from zerorename.committers.commit.lock import held_by_job
from zerorename.committers.commit.run import (
    CommitRecords,
    JobCommitResult,
    JobCommitRun,
    PreparedCommit,
    ProgressFn,
)
from zerorename.committers.commit.storage import (
    AbortResult,
    abort_job_storage,
    job_is_active,
    read_journal,
    release_job_storage,
)
from zerorename.committers.conflict import ConflictMode, ConflictScope
from zerorename.committers.context import CommitOptions, CommitterKind, JobContext
from zerorename.committers.errors import (
    CommitterConfigError,
    CommitterError,
    JobCommitError,
    JobNotFound,
    RecordFormatError,
    engine_errors_as,
    wrap_engine_errors,
)
from zerorename.committers.maintenance import uploads_older_than
from zerorename.committers.objectstore import UploadStore
from zerorename.committers.paths import (
    PENDINGSET_SUFFIX,
    Destination,
    JobLayout,
    check_job_id,
    new_job_id,
)
from zerorename.committers.store import abort_uploads, job_uploads, read_optional
from zerorename.committers.tasks import (
    MagicTaskAttempt,
    StagingTaskAttempt,
    TaskAttempt,
    TaskCommitSummary,
)
from zerorename.errors import map_exceptions

__all__ = [
    "CommitOptions",
    "Committer",
    "Job",
    "JobStatus",
    "MagicCommitter",
    "PartitionedCommitter",
    "StagingCommitter",
    "committer_class",
]


@dataclass(frozen=True)
class JobStatus:
    """What the store says about a job."""

    job_id: str
    active: bool
    marker: JobMarker | None
    journal: Journal | None
    pendingsets: int


class Committer:
    """Base of the committers; subclasses choose where task attempts put their output."""

    kind = "base"
    attempt_class: type[TaskAttempt] = TaskAttempt
    default_scope = ConflictScope.DESTINATION

    def __init__(
        self,
        engine: UploadStore,
        destination: str | Destination,
        *,
        conflict: str | ConflictMode = ConflictMode.APPEND,
        options: CommitOptions | None = None,
        scope: str | ConflictScope | None = None,
    ) -> None:
        """``scope``: where conflicts are judged (default: the committer's own; Spark's
        dynamic partition overwrite gives ``partitions`` to any committer)."""
        self.engine = engine
        self.dest = (
            destination if isinstance(destination, Destination) else Destination.parse(destination)
        )
        self.conflict = ConflictMode.parse(conflict)
        self.options = options or CommitOptions()
        self.scope = ConflictScope.parse(scope) if scope is not None else self.default_scope

    def job(self, job_id: str) -> Job:
        """A handle on job ``job_id`` with this committer's settings (no I/O)."""
        return Job(self, check_job_id(job_id), self.kind, self.conflict, self.scope)

    def _unrecorded(self, job_id: str) -> Job:
        """A job without its ``job.json``: handled with this committer's settings, its own
        committer unknown (:attr:`Job.kind_recorded` is False)."""
        job = self.job(job_id)
        job.kind_recorded = False
        return job

    async def setup_job(self, job_id: str | None = None) -> Job:
        """Set up a new job: a random UUID (or the given UUID), its ``job.json`` written."""
        job = self.job(job_id or new_job_id())
        marker = JobMarker(job.job_id, job.kind, self.dest.uri, job.conflict, job.scope)
        async with wrap_engine_errors(f"could not set up job at {self.dest.uri}"):
            if await job.is_active():
                raise CommitterError(f"job {job.job_id} is already set up at {self.dest.uri}")
            await self.engine.put_object(
                self.dest.bucket,
                job.layout.marker,
                marker.to_json(),
                content_type="application/json",
            )
        return job

    async def open_job(self, job_id: str) -> Job:
        """The job as recorded in its ``job.json`` (any committer kind); JobNotFound if the
        job has no records and no pending uploads (a journal alone is enough to resume or
        abort it; its uploads alone to abort it)."""
        job_id = check_job_id(job_id)
        layout = JobLayout(self.dest, job_id)
        async with wrap_engine_errors(f"opening job {job_id} at {self.dest.uri}"):
            data = await read_optional(
                self.engine, self.dest.bucket, layout.marker, max_size=caps.MARKER_CAP
            )
            if data is not None:
                m = JobMarker.from_json(data, location=self.dest.uri_of(layout.marker))
                return Job(self, job_id, m.committer, m.conflict, m.scope)
            # Hadoop 3.4's magic committer keeps a job's attempts in the same directory,
            # under job-<id>/: its uploads carry no job id, so this committer's rules would
            # misread that job
            s3a_attempts = f"{layout.root}job-{job_id}/"
            async for _ in self.engine.list_objects(self.dest.bucket, s3a_attempts):
                raise CommitterError(
                    f"{self.dest.uri_of(layout.root)} holds a Hadoop S3A magic job's records "
                    f"(job-{job_id}/), not a zerorename job's: not opening it; `zerorename "
                    f"jobs show|resume|abort {self.dest.uri} {job_id}` handles it as the "
                    "S3A job it is"
                )
            async for _ in self.engine.list_objects(self.dest.bucket, layout.root):
                return self._unrecorded(job_id)
            async for _ in job_uploads(self.engine, self.dest, job_id):
                return self._unrecorded(job_id)  # only its uploads left (a failed abort)
        raise JobNotFound(f"no job {job_id} under {self.dest.uri}")


class MagicCommitter(Committer):
    """Tasks stream outputs straight to their final keys as deferred uploads."""

    kind = "magic"
    attempt_class = MagicTaskAttempt


class StagingCommitter(Committer):
    """Tasks write local files; task commit uploads them (the 'directory' committer)."""

    kind = "staging"
    attempt_class = StagingTaskAttempt


class PartitionedCommitter(StagingCommitter):
    """Staging, with every file in a ``k=v`` partition directory and conflicts judged per
    touched partition (fail if a touched partition holds files; replace its files)."""

    kind = "partitioned"
    default_scope = ConflictScope.PARTITIONS


_KINDS: dict[str, type[Committer]] = {
    "magic": MagicCommitter,
    "staging": StagingCommitter,
    "directory": StagingCommitter,
    "partitioned": PartitionedCommitter,
}


def committer_class(kind: str) -> type[Committer]:
    try:
        return _KINDS[kind]
    except KeyError:
        raise CommitterConfigError(f"unknown committer {kind!r}; one of {sorted(_KINDS)}") from None


class Job:
    """One job of a committer at its destination (a handle: its settings are in
    :attr:`context`, parsed once)."""

    def __init__(
        self,
        committer: Committer,
        job_id: str,
        kind: str | CommitterKind,
        conflict: str | ConflictMode,
        scope: str | ConflictScope,
    ) -> None:
        self.committer = committer
        #: False for a job opened without its ``job.json`` (:meth:`Committer.open_job`):
        #: :attr:`kind` is then the opening committer's, not the job's own
        self.kind_recorded = True
        self.context = JobContext.create(
            job_id,
            committer.engine,
            committer.dest,
            committer.options,
            kind=kind,
            conflict=conflict,
            scope=scope,
        )

    # the public view of the context (strings, as job.json holds them)
    @property
    def job_id(self) -> str:
        return self.context.job_id

    @property
    def engine(self) -> UploadStore:
        return self.context.engine

    @property
    def dest(self) -> Destination:
        return self.context.dest

    @property
    def layout(self) -> JobLayout:
        return self.context.layout

    @property
    def options(self) -> CommitOptions:
        return self.context.opts

    @property
    def kind(self) -> str:
        return self.context.kind.value

    @property
    def conflict(self) -> str:
        return self.context.conflict.value

    @property
    def scope(self) -> str:
        return self.context.scope.value

    @property
    def scope_enum(self) -> ConflictScope:
        return self.context.scope

    @property
    def partitioned(self) -> bool:
        return self.context.partitioned

    @property
    def local_job_dir(self) -> Path:
        return self.context.local_job_dir

    def __repr__(self) -> str:
        return f"Job({self.job_id}, {self.kind}, {self.dest.uri}, conflict={self.conflict})"

    async def is_active(self) -> bool:
        """True while the job's ``job.json`` exists (set up, not yet committed or aborted)."""
        return await job_is_active(self.context)

    def task_attempt(self, task_id: int | str, attempt: int = 0) -> TaskAttempt:
        cls = _KINDS[self.kind].attempt_class
        return cls(self.context, task_id, attempt)

    async def _plan_from_listing(self) -> CommitPlan:
        sets = []
        async for obj in self.engine.list_objects(self.dest.bucket, self.layout.pendingsets_dir):
            if obj.key.endswith(PENDINGSET_SUFFIX):
                sets.append(PlannedSet(obj.key))
        return CommitPlan(self.job_id, tuple(sets), "listing")

    def _plan_from_summaries(self, summaries: Iterable[TaskCommitSummary]) -> CommitPlan:
        by_task: dict[str, PlannedSet] = {}
        for s in summaries:
            if s.job_id != self.job_id:
                raise RecordFormatError(
                    f"task summary of job {s.job_id} given to job {self.job_id}"
                )
            d = Destination.parse(s.pendingset)
            if d.bucket != self.dest.bucket or not d.prefix.startswith(self.layout.pendingsets_dir):
                raise RecordFormatError(
                    f"pendingset {s.pendingset} is not one of job {self.job_id}'s"
                )
            by_task[s.task_id] = PlannedSet(d.prefix, s.task_id, s.attempt)
        return CommitPlan(self.job_id, tuple(by_task[t] for t in sorted(by_task)), "summaries")

    def prepare_commit(
        self,
        summaries: Iterable[TaskCommitSummary],
        *,
        extra_metrics: Mapping[str, int | float] | None = None,
    ) -> PreparedCommit:
        """A fresh commit of the committed tasks, to run in steps: ``read_ahead()`` (its
        first round, beside the caller's reads), then :meth:`commit` with ``prepared``, or
        ``close()``. RecordFormatError for a summary that is not this job's."""
        return PreparedCommit(self.context, self._plan_from_summaries(summaries), extra_metrics)

    async def commit(
        self,
        summaries: Iterable[TaskCommitSummary] | None = None,
        *,
        progress: ProgressFn | None = None,
        extra_metrics: Mapping[str, int | float] | None = None,
        records: CommitRecords | None = None,
        prepared: PreparedCommit | None = None,
    ) -> JobCommitResult:
        """Complete every upload of the committed tasks, write ``_SUCCESS``, then abort the
        job's leftover uploads and delete its records. With ``summaries`` (the driver's
        list of successful attempts) nothing is listed; without, the job's pendingsets are.
        ``extra_metrics`` (e.g. rows) go into ``_SUCCESS``'s metrics; ``records``: the
        caller's records the commit stores in its own rounds; ``prepared``: the run
        :meth:`prepare_commit` made (``summaries`` and ``extra_metrics`` are its).
        On failure raises JobCommitError (``rolled_back`` says whether nothing is left)."""
        with self._failed_as("started", f"job {self.job_id} commit failed"):
            if prepared is None:
                plan = (
                    self._plan_from_summaries(summaries)
                    if summaries is not None
                    else await self._plan_from_listing()
                )
                prepared = PreparedCommit(self.context, plan, extra_metrics)
            return await JobCommitRun.fresh(prepared, progress, records).commit()

    async def resume(
        self, *, progress: ProgressFn | None = None, records: CommitRecords | None = None
    ) -> JobCommitResult:
        """Finish a job commit another process started (from its journal), idempotently.
        ``records.with_succeeded``: the caller's records, stored before the release deletes
        the journal (a streaming sink's log: the journal is its proof until then)."""
        with self._failed_as("", f"resuming job {self.job_id} failed"):
            return await JobCommitRun.resuming(self.context, progress, records).resume()

    def _failed_as(self, state: str, doing: str) -> map_exceptions:
        """The boundary of commit and resume: an engine error becomes a JobCommitError
        that changed nothing (``"<doing>: <engine error>"``)."""
        return engine_errors_as(
            lambda exc: JobCommitError(
                f"{doing}: {exc}", job_id=self.job_id, rolled_back=False, state=state
            )
        )

    async def abort(self) -> AbortResult:
        """Abort the job: every pending upload of it aborted, every object it completed and
        its records deleted. Refused (JournalError) once a commit deleted replaced files or
        wrote _SUCCESS."""
        with engine_errors_as(lambda e: CommitterError(f"aborting job {self.job_id} failed: {e}")):
            return await JobCommitRun.aborting(self.context).rollback()

    async def wipe(self) -> AbortResult:
        """The abort procedure without the journal checks (used by abort and rollback)."""
        return await abort_job_storage(self.context)

    async def release(self) -> int:
        """Delete the job's records and abort its leftover uploads (after _SUCCESS), and the
        destination's commit lock when the job holds it (:func:`.commit.lock.held_by_job`)."""
        lock = await held_by_job(self.context)
        return await release_job_storage(self.context, lock=lock)

    async def cleanup(self, *, older_than: float | None = None) -> int:
        """Abort this job's leftover uploads and delete its records (never another job's);
        with ``older_than`` (seconds), also every pending upload under the destination
        initiated longer ago than that. Returns the number of uploads aborted."""
        failed = f"cleaning up job {self.job_id} failed"
        with engine_errors_as(lambda exc: CommitterError(f"{failed}: {exc}")):
            journal = await read_journal(self.context)
            if journal is not None and journal.state is not State.SUCCEEDED:
                raise CommitterError(
                    f"job {self.job_id} has an unfinished commit "
                    f"({journal.state.value}); resume or abort it first"
                )
            aborted = await self.release()
            if older_than is not None:
                aborted += await abort_uploads(
                    self.engine, uploads_older_than(self.engine, self.dest, older_than)
                )
            return aborted

    async def status(self) -> JobStatus:
        """What the store holds of the job: its marker, journal and pendingsets."""
        async with wrap_engine_errors(f"reading the status of job {self.job_id}"):
            data = await read_optional(
                self.engine, self.dest.bucket, self.layout.marker, max_size=caps.MARKER_CAP
            )
            marker = (
                JobMarker.from_json(data, location=self.dest.uri_of(self.layout.marker))
                if data is not None
                else None
            )
            journal = await read_journal(self.context)
            count = 0
            pendingsets = self.layout.pendingsets_dir
            async for obj in self.engine.list_objects(self.dest.bucket, pendingsets):
                count += obj.key.endswith(PENDINGSET_SUFFIX)
        return JobStatus(self.job_id, marker is not None, marker, journal, count)
