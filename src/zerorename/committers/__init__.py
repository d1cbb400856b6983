"""The zero-rename commit protocol over the upload engine (no Spark inside).

Committers: :class:`MagicCommitter` (tasks stream to final keys as deferred uploads),
:class:`StagingCommitter` (tasks write local files, uploaded at task commit),
:class:`PartitionedCommitter` (staging with conflicts judged per partition).
Async core; :mod:`zerorename.committers.sync` is the blocking facade.

Every name below loads its module on first use (PEP 562), as :mod:`zerorename.engine`'s do:
``from zerorename.committers import ConflictScope`` loads the conflict rules alone, not the
committers, the engine, aiohttp and botocore, so a Spark planning process or a command that
needs one module stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zerorename.committers.codec.pending import PendingRecord, PendingSetHeader, SuccessData
    from zerorename.committers.commit.lock import DestinationLocked, LockLost
    from zerorename.committers.commit.run import CommitProgress, JobCommitResult
    from zerorename.committers.commit.storage import AbortResult
    from zerorename.committers.committer import (
        Committer,
        Job,
        JobStatus,
        MagicCommitter,
        PartitionedCommitter,
        StagingCommitter,
        committer_class,
    )
    from zerorename.committers.conflict import ConflictMode, ConflictScope
    from zerorename.committers.context import CommitOptions
    from zerorename.committers.errors import (
        CommitterError,
        ConflictError,
        InvalidJobId,
        JobCommitError,
        JobNotActive,
        JobNotFound,
        JournalError,
        NothingToResume,
        PathError,
        RecordFormatError,
        TaskAttemptError,
    )
    from zerorename.committers.paths import Destination, new_job_id, output_name
    from zerorename.committers.sync import SyncCommitter
    from zerorename.committers.tasks import (
        MagicTaskAttempt,
        StagingTaskAttempt,
        TaskAttempt,
        TaskCommitSummary,
    )

#: each public name -> the module that defines it
_LAZY = {
    "AbortResult": "commit.storage",
    "CommitOptions": "context",
    "CommitProgress": "commit.run",
    "Committer": "committer",
    "CommitterError": "errors",
    "ConflictError": "errors",
    "ConflictMode": "conflict",
    "ConflictScope": "conflict",
    "Destination": "paths",
    "DestinationLocked": "commit.lock",
    "InvalidJobId": "errors",
    "Job": "committer",
    "JobCommitError": "errors",
    "JobCommitResult": "commit.run",
    "JobNotActive": "errors",
    "JobNotFound": "errors",
    "JobStatus": "committer",
    "JournalError": "errors",
    "LockLost": "commit.lock",
    "MagicCommitter": "committer",
    "MagicTaskAttempt": "tasks",
    "NothingToResume": "errors",
    "PartitionedCommitter": "committer",
    "PathError": "errors",
    "PendingRecord": "codec.pending",
    "PendingSetHeader": "codec.pending",
    "RecordFormatError": "errors",
    "StagingCommitter": "committer",
    "StagingTaskAttempt": "tasks",
    "SuccessData": "codec.pending",
    "SyncCommitter": "sync",
    "TaskAttempt": "tasks",
    "TaskAttemptError": "errors",
    "TaskCommitSummary": "tasks",
    "committer_class": "committer",
    "new_job_id": "paths",
    "output_name": "paths",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "AbortResult",
    "CommitOptions",
    "CommitProgress",
    "Committer",
    "CommitterError",
    "ConflictError",
    "ConflictMode",
    "ConflictScope",
    "Destination",
    "DestinationLocked",
    "InvalidJobId",
    "Job",
    "JobCommitError",
    "JobCommitResult",
    "JobNotActive",
    "JobNotFound",
    "JobStatus",
    "JournalError",
    "LockLost",
    "MagicCommitter",
    "MagicTaskAttempt",
    "NothingToResume",
    "PartitionedCommitter",
    "PathError",
    "PendingRecord",
    "PendingSetHeader",
    "RecordFormatError",
    "StagingCommitter",
    "StagingTaskAttempt",
    "SuccessData",
    "SyncCommitter",
    "TaskAttempt",
    "TaskAttemptError",
    "TaskCommitSummary",
    "committer_class",
    "new_job_id",
    "output_name",
]
