"""Blocking facade over the async committers, for plain threaded Python programs.

    with SyncCommitter("magic", "s3://bucket/table", EngineConfig(...)) as c:
        job = c.setup_job()
        ta = job.task_attempt(0)
        ta.setup()
        with ta.open("part.csv") as f:      # a blocking binary file, any thread
            f.write(b"...")
        job.commit([ta.commit()])

Every facade runs on the process portal's one loop thread
(:func:`zerorename.portal.process_portal`) with the engine for its configuration from the
process's one engine cache (:mod:`zerorename.committers.enginecache`, which the Spark
adapter's bridge uses too); its hold on it (a portal resource) ends with ``close()`` (or
the ``with`` block, or at exit): nothing is created per commit, so nothing leaks across
many jobs.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

from zerorename.committers.commit.run import JobCommitResult, ProgressFn
from zerorename.committers.commit.storage import AbortResult
from zerorename.committers.committer import (
    CommitOptions,
    Committer,
    Job,
    JobStatus,
    committer_class,
)
from zerorename.committers.conflict import ConflictMode
from zerorename.committers.enginecache import engine_cache
from zerorename.committers.errors import CommitterError
from zerorename.committers.tasks import TaskAttempt, TaskCommitSummary
from zerorename.engine import EngineConfig, UploadEngine
from zerorename.portal import process_portal

T = TypeVar("T")

_facades = itertools.count(1)


class SyncCommitter:
    """A committer of ``kind`` (magic, staging/directory, partitioned) run on the process's
    loop, for threads that block."""

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
        self._portal = process_portal()
        self._pid = os.getpid()
        self._key = ("SyncCommitter", next(_facades))
        self._closed = False
        config = engine_config if engine_config is not None else EngineConfig()
        cached = engine_cache(self._portal).engine(config)
        # this facade's hold on the cache's engine: gone with close() or the portal's close
        self.engine: UploadEngine = self._portal.resource(
            self._key, lambda: contextlib.nullcontext(cached)
        )
        try:
            self.committer: Committer = cls(
                self.engine, destination, conflict=conflict, options=options
            )
        except BaseException:
            self.close()
            raise

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the process's loop and wait for it (not from that loop)."""
        if self._closed:
            coro.close()
            raise CommitterError("the committer is closed")
        if os.getpid() != self._pid:
            coro.close()
            raise CommitterError(
                f"this SyncCommitter was created in process {self._pid}; its engine does not "
                "survive a fork: create a new SyncCommitter in this process"
            )
        if self._portal.in_loop_thread():
            coro.close()
            raise CommitterError("SyncCommitter methods cannot be called from its own loop")
        if self._key not in self._portal.resource_keys():
            coro.close()
            raise CommitterError(
                "the process's event loop was closed (at exit, or get_bridge().close()) "
                "and this SyncCommitter's engine with it: create a new SyncCommitter"
            )
        return self._portal.run(coro)

    def close(self) -> None:
        """Let go of the engine (the cache closes it once retired and unused); safe to
        call twice (the process's loop and engines stay for others)."""
        if self._closed:
            return
        self._closed = True
        if os.getpid() == self._pid:
            self._portal.discard(self._key)

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
