"""Blocking facade over the async committers, for plain threaded Python programs.

    with SyncCommitter("magic", "s3://bucket/table", EngineConfig(...)) as c:
        job = c.setup_job()
        ta = job.task_attempt(0)
        ta.setup()
        with ta.open("part.csv") as f:      # a blocking binary file, any thread
            f.write(b"...")
        job.commit([ta.commit()])

One event-loop thread and one engine per facade, both closed by ``close()`` (or the
``with`` block): nothing is created per commit, so nothing leaks across many jobs.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

from zerorename.committers.committer import (
    CommitOptions,
    Committer,
    Job,
    JobStatus,
    committer_class,
)
from zerorename.committers.conflict import ConflictMode
from zerorename.committers.errors import CommitterError
from zerorename.committers.jobcommit import JobCommitResult, ProgressFn
from zerorename.committers.jobstorage import AbortResult
from zerorename.committers.tasks import TaskAttempt, TaskCommitSummary
from zerorename.engine import EngineConfig, UploadEngine
from zerorename.engine.runner import new_loop

T = TypeVar("T")


class SyncCommitter:
    """A committer of ``kind`` (magic, staging/directory, partitioned) run on its own loop."""

    def __init__(
        self,
        kind: str,
        destination: str,
        engine_config: EngineConfig | None = None,
        *,
        conflict: str | ConflictMode = ConflictMode.APPEND,
        options: CommitOptions | None = None,
    ) -> None:
        cls = committer_class(kind)
        self._loop = new_loop()  # uvloop when available, like every entry point
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="zerorename-committer", daemon=True
        )
        self._thread.start()
        self._closed = False
        try:
            self.engine = UploadEngine(engine_config)
            self.run(self.engine.open())
            self.committer: Committer = cls(
                self.engine, destination, conflict=conflict, options=options
            )
        except BaseException:
            self.close()
            raise

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the facade's loop and wait for it (not from that loop)."""
        if self._closed:
            coro.close()
            raise CommitterError("the committer is closed")
        if threading.current_thread() is self._thread:
            coro.close()
            raise CommitterError("SyncCommitter methods cannot be called from its own loop")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def close(self) -> None:
        """Close the engine, stop the loop thread; safe to call twice."""
        if self._closed:
            return
        try:
            if hasattr(self, "engine"):
                asyncio.run_coroutine_threadsafe(self.engine.close(), self._loop).result()
        finally:
            self._closed = True
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    def __enter__(self) -> SyncCommitter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def setup_job(self, job_id: str | None = None) -> SyncJob:
        return SyncJob(self, self.run(self.committer.setup_job(job_id)))

    def job(self, job_id: str) -> SyncJob:
        return SyncJob(self, self.committer.job(job_id))

    def open_job(self, job_id: str) -> SyncJob:
        return SyncJob(self, self.run(self.committer.open_job(job_id)))


class SyncJob:
    """Blocking view of a :class:`Job`."""

    def __init__(self, owner: SyncCommitter, job: Job) -> None:
        self._owner = owner
        self.job = job
        self.job_id = job.job_id

    def task_attempt(self, task_id: int | str, attempt: int = 0) -> SyncTaskAttempt:
        return SyncTaskAttempt(self._owner, self.job.task_attempt(task_id, attempt))

    def commit(
        self,
        summaries: Iterable[TaskCommitSummary] | None = None,
        *,
        progress: ProgressFn | None = None,
    ) -> JobCommitResult:
        return self._owner.run(self.job.commit(summaries, progress=progress))

    def resume(self, *, progress: ProgressFn | None = None) -> JobCommitResult:
        return self._owner.run(self.job.resume(progress=progress))

    def abort(self) -> AbortResult:
        return self._owner.run(self.job.abort())

    def cleanup(self, *, older_than: float | None = None) -> int:
        return self._owner.run(self.job.cleanup(older_than=older_than))

    def status(self) -> JobStatus:
        return self._owner.run(self.job.status())


class SyncTaskAttempt:
    """Blocking view of a task attempt; ``open`` gives a blocking binary file."""

    def __init__(self, owner: SyncCommitter, ta: TaskAttempt) -> None:
        self._owner = owner
        self.attempt = ta

    def setup(self) -> None:
        self._owner.run(self.attempt.setup())

    def open(self, rel: str, **object_args: Any) -> Any:
        """A blocking binary file for output ``rel`` (close it before commit)."""
        return self.attempt.open_sync(rel, **object_args)

    def needs_commit(self) -> bool:
        return self.attempt.needs_commit()

    def commit(self) -> TaskCommitSummary:
        return self._owner.run(self.attempt.commit())

    def abort(self) -> None:
        self._owner.run(self.attempt.abort())
