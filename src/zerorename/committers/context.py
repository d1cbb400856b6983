"""What every part of a job's protocol needs to know about the job, decided once.

A frozen :class:`JobContext` (job id, store, destination, layout, options, and the
committer kind, conflict mode and scope as enums) is built when a ``Job`` handle is made;
``commit.run``, ``commit.scan``, ``commit.storage`` and ``tasks`` take it instead of calling back
into ``Job``, so no module of the protocol imports the one above it. A leaf module.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from zerorename.committers.conflict import ConflictMode, ConflictScope
from zerorename.committers.errors import CommitterConfigError
from zerorename.committers.paths import Destination, JobLayout

if TYPE_CHECKING:
    from zerorename.committers.objectstore import UploadStore

#: pendingsets being completed at once during a job commit (CommitOptions.window and a
#: journal's window when none is given).
DEFAULT_WINDOW = 64


class CommitterKind(StrEnum):
    """The committer a job was set up with (as its ``job.json`` names it)."""

    MAGIC = "magic"
    STAGING = "staging"
    DIRECTORY = "directory"  # staging's other name (S3A's)
    PARTITIONED = "partitioned"

    @classmethod
    def parse(cls, value: str | CommitterKind) -> CommitterKind:
        try:
            return cls(value)
        except ValueError:
            raise CommitterConfigError(
                f"unknown committer {value!r}; one of {sorted(k.value for k in cls)}"
            ) from None


@dataclass(frozen=True)
class CommitOptions:
    """Tuning and policy shared by a committer's jobs."""

    #: completes in flight during job commit (None: the engine's batch_concurrency).
    concurrency: int | None = None
    #: pendingsets being completed at once: what a crash can leave half done (resume
    #: re-checks those). The journal's watermark is written only when the window holds
    #: pendingsets back (more sets than the window), each time half of it is released.
    window: int = DEFAULT_WINDOW
    #: pendingsets read at once before completing (None: the commit's concurrency, or 64
    #: when that is not set either): the read is one round trip up to that many tasks.
    scan_concurrency: int | None = None
    #: uploads at once in a staging task commit.
    task_concurrency: int = 8
    #: seconds between progress callbacks during job commit (half a second, so a busy
    #: loop still reports at least once a second).
    progress_interval: float = 0.5
    #: on a failed commit, abort the job (a failed job leaves nothing); else keep the
    #: journal so resume/abort can be run later.
    rollback_on_failure: bool = True
    #: write a .pending record per magic output (lets another process abort the attempt).
    pending_records: bool = True
    write_success: bool = True
    #: local root for staging committers' attempt directories.
    staging_dir: Path = field(default_factory=lambda: Path(tempfile.gettempdir()))
    #: seconds a commit waits for its destination's commit lock while another job's
    #: commit holds it, before it refuses (nothing written); 0: refuse at once.
    lock_wait: float = 900.0
    #: seconds after which a lock whose holder has written no journal is released by the
    #: next job (the holder is fenced off: it can never complete anything).
    lock_stale_after: float = 3600.0

    def __post_init__(self) -> None:
        if self.window < 1 or self.task_concurrency < 1:
            raise CommitterConfigError("window and task_concurrency must be >= 1")
        if self.scan_concurrency is not None and self.scan_concurrency < 1:
            raise CommitterConfigError("scan_concurrency must be >= 1")
        if self.concurrency is not None and self.concurrency < 1:
            raise CommitterConfigError("concurrency must be >= 1")
        if not (self.lock_wait >= 0 and self.lock_stale_after >= 0):
            raise CommitterConfigError("lock_wait and lock_stale_after must be >= 0 seconds")
        if self.progress_interval <= 0:
            raise CommitterConfigError("progress_interval must be > 0")


@dataclass(frozen=True)
class JobContext:
    """One job at its destination, with its settings parsed: no I/O, no callbacks."""

    job_id: str
    engine: UploadStore
    dest: Destination
    layout: JobLayout
    opts: CommitOptions
    kind: CommitterKind
    conflict: ConflictMode
    scope: ConflictScope

    @classmethod
    def create(
        cls,
        job_id: str,
        engine: UploadStore,
        dest: Destination,
        opts: CommitOptions,
        *,
        kind: str | CommitterKind,
        conflict: str | ConflictMode,
        scope: str | ConflictScope,
    ) -> JobContext:
        """Parse the kind, mode and scope once (a job record holds them as strings)."""
        return cls(
            job_id,
            engine,
            dest,
            JobLayout(dest, job_id),
            opts,
            CommitterKind.parse(kind),
            ConflictMode.parse(conflict),
            ConflictScope(scope),
        )

    @property
    def partitioned(self) -> bool:
        """Every output must sit in a ``k=v`` partition directory: the partitioned
        committer's, and any job whose conflicts are judged by partition (what such a
        commit checks or clears is the set of its files' directories, so none may be the
        destination's root or a directory its partitions record could not name)."""
        return self.kind is CommitterKind.PARTITIONED or (
            self.scope is ConflictScope.PARTITIONS and self.conflict is not ConflictMode.APPEND
        )

    @property
    def needs_partitions(self) -> bool:
        """The commit must know the partitions it touches (to check or clear them)."""
        return self.partitioned

    @property
    def replaces(self) -> bool:
        return self.conflict is ConflictMode.REPLACE

    @property
    def local_job_dir(self) -> Path:
        """Where staging task attempts of this job keep their local files."""
        return self.opts.staging_dir / f"zerorename-{self.job_id}"
