"""The zero-rename commit protocol over the upload engine (no Spark inside).

Committers: :class:`MagicCommitter` (tasks stream to final keys as deferred uploads),
:class:`StagingCommitter` (tasks write local files, uploaded at task commit),
:class:`PartitionedCommitter` (staging with conflicts judged per partition).
Async core; :mod:`zerorename.committers.sync` is the blocking facade.
"""

from zerorename.committers.commitlock import DestinationLocked, LockLost
from zerorename.committers.committer import (
    CommitOptions,
    Committer,
    Job,
    JobStatus,
    MagicCommitter,
    PartitionedCommitter,
    StagingCommitter,
    committer_class,
)
from zerorename.committers.conflict import ConflictMode, ConflictScope
from zerorename.committers.errors import (
    CommitterError,
    ConflictError,
    InvalidJobId,
    JobCommitError,
    JobNotActive,
    JobNotFound,
    JournalError,
    PathError,
    RecordFormatError,
    TaskAttemptError,
)
from zerorename.committers.jobcommit import CommitProgress, JobCommitResult
from zerorename.committers.jobstorage import AbortResult
from zerorename.committers.paths import Destination, new_job_id, output_name
from zerorename.committers.records import PendingRecord, PendingSetHeader, SuccessData
from zerorename.committers.sync import SyncCommitter
from zerorename.committers.tasks import (
    MagicTaskAttempt,
    StagingTaskAttempt,
    TaskAttempt,
    TaskCommitSummary,
)

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
