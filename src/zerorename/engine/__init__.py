"""The async upload engine: the only code in zerorename that talks to S3.

Its parts: ``core.py`` (:class:`UploadEngine`: it opens the client, sends every upload's
parts, and owns the rest as members), ``ops/`` (those members: completing, aborting and
listing uploads; whole objects), ``wire/`` (the client, the signed fast path, every answer
checked, trailing checksums), ``bodies/`` (sources cut into parts, file ranges, writers),
and beside them the leaves: ``config``, ``errors``, ``events``, ``planning``,
``checksums``, ``results`` (what the engine returns), ``retry``, ``progress``; ``run`` is
:func:`zerorename.portal.run`.

Every name below loads its module on first use (PEP 562), so ``from zerorename.engine
import EngineConfig`` loads the configuration alone, not aiohttp and botocore: a command
or a Spark worker that only reads settings stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zerorename.engine import errors
    from zerorename.engine.bodies.writers import AsyncUploadWriter, SyncUploadWriter
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
    from zerorename.engine.results import (
        BatchFailure,
        BatchResult,
        ObjectInfo,
        PartInfo,
        PendingUpload,
        UploadInfo,
        UploadResult,
    )
    from zerorename.engine.retry import EngineStats
    from zerorename.portal import run

#: each public name -> the module that defines it
_LAZY = {
    "AsyncUploadWriter": "bodies.writers",
    "BatchFailure": "results",
    "BatchResult": "results",
    "BytesSent": "events",
    "ConcurrencyChanged": "events",
    "EngineConfig": "config",
    "EngineStats": "retry",
    "Event": "events",
    "ObjectInfo": "results",
    "PartDone": "events",
    "PartInfo": "results",
    "PendingUpload": "results",
    "ProgressCallback": "events",
    "RetryConfig": "config",
    "RetryScheduled": "events",
    "SyncUploadWriter": "bodies.writers",
    "Throttled": "events",
    "UploadAborted": "events",
    "UploadCompleted": "events",
    "UploadDeferred": "events",
    "UploadEngine": "core",
    "UploadInfo": "results",
    "UploadResult": "results",
    "errors": "errors",
    "run": "zerorename.portal",  # the entry points' loop runner lives with the portal
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    path = module if module.startswith("zerorename.") else f"{__name__}.{module}"
    loaded = importlib.import_module(path)
    value = loaded if name == module else getattr(loaded, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


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
