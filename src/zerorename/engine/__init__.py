"""The async upload engine: the only code in zerorename that talks to S3."""

from zerorename.engine import errors
from zerorename.engine.config import EngineConfig, RetryConfig
from zerorename.engine.core import UploadEngine
from zerorename.engine.events import (
    BytesSent,
    ConcurrencyChanged,
    Event,
    PartDone,
    ProgressCallback,
    RetryScheduled,
    Throttled,
    UploadAborted,
    UploadCompleted,
    UploadDeferred,
)
from zerorename.engine.records import (
    BatchFailure,
    BatchResult,
    ObjectInfo,
    PartInfo,
    PendingUpload,
    UploadInfo,
    UploadResult,
)
from zerorename.engine.retry import EngineStats
from zerorename.engine.runner import run
from zerorename.engine.writers import AsyncUploadWriter, SyncUploadWriter

__all__ = [
    "AsyncUploadWriter",
    "BatchFailure",
    "BatchResult",
    "BytesSent",
    "ConcurrencyChanged",
    "EngineConfig",
    "EngineStats",
    "Event",
    "ObjectInfo",
    "PartDone",
    "PartInfo",
    "PendingUpload",
    "ProgressCallback",
    "RetryConfig",
    "RetryScheduled",
    "SyncUploadWriter",
    "Throttled",
    "UploadAborted",
    "UploadCompleted",
    "UploadDeferred",
    "UploadEngine",
    "UploadInfo",
    "UploadResult",
    "errors",
    "run",
]
